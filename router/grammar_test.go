package router

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/templates"
)

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want Parsed
	}{
		{"", Parsed{Command: "help"}},
		{"  /help ", Parsed{Command: "help"}},
		{"/GOALS", Parsed{Command: "goals"}},
		{"／status ＃docs", Parsed{Command: "status", Addr: &Address{Goal: "docs"}}},
		{"/status", Parsed{Command: "status"}},
		{"/bind #docs/codex", Parsed{Command: "bind", Addr: &Address{Goal: "docs", Agent: "codex"}}},
		{"/budget #docs 10 12h", Parsed{Command: "budget", Addr: &Address{Goal: "docs"}, Slots: 10, Window: 12}},
		{"/budget 0", Parsed{Command: "budget", Slots: 0}},
		{"/todo #docs add a search box", Parsed{Command: "todo", Addr: &Address{Goal: "docs"}, Text: "add a search box"}},
		{"/approve g12 looks good", Parsed{Command: "approve", GateID: 12, Text: "looks good"}},
		{"/reject 7", Parsed{Command: "reject", GateID: 7}},
		{"/lang ZH", Parsed{Command: "lang", Lang: "zh"}},
		{"hello there", Parsed{Mode: "inbox", Text: "hello there"}},
		{"#docs hello", Parsed{Mode: "inbox", Addr: &Address{Goal: "docs"}, Text: "hello"}},
		{"#Docs/Codex/sess-1 hi\nsecond line", Parsed{Mode: "inbox", Addr: &Address{Goal: "docs", Agent: "codex", Session: "sess-1"}, Text: "hi\nsecond line"}},
		{"/steer #docs/codex stop that", Parsed{Mode: "steer", Addr: &Address{Goal: "docs", Agent: "codex"}, Text: "stop that"}},
		{"#docs /queue later please", Parsed{Mode: "queue", Addr: &Address{Goal: "docs"}, Text: "later please"}},
		{"／queue　next turn", Parsed{Mode: "queue", Text: "next turn"}},
		// The goal contract.
		{"/contract", Parsed{Command: "contract"}},
		{"/scope #docs editable docs/** site/*.md", Parsed{Command: "scope", Addr: &Address{Goal: "docs"}, Part: "editable", Op: "set", Items: []string{"docs/**", "site/*.md"}}},
		{"/scope protected add deploy/**, .github/**", Parsed{Command: "scope", Part: "protected", Op: "add", Items: []string{"deploy/**", ".github/**"}}},
		{"/scope Protected remove deploy/**", Parsed{Command: "scope", Part: "protected", Op: "remove", Items: []string{"deploy/**"}}},
		{"/scope editable all", Parsed{Command: "scope", Part: "editable", Op: "set", Items: []string{}}},
		{"/scope protected none", Parsed{Command: "scope", Part: "protected", Op: "set", Items: []string{}}},
		{"/scope notes never touch billing", Parsed{Command: "scope", Part: "notes", Text: "never touch billing"}},
		{"/scope notes none", Parsed{Command: "scope", Part: "notes"}},
		{"/capability #docs grant write-code, Publish", Parsed{Command: "capability", Addr: &Address{Goal: "docs"}, Op: "grant", Items: []string{"write-code", "publish"}}},
		{"/capability #docs/codex revoke publish", Parsed{Command: "capability", Addr: &Address{Goal: "docs", Agent: "codex"}, Op: "revoke", Items: []string{"publish"}}},
		{"/criteria add docs build\nlinks: links checked\n\n", Parsed{Command: "criteria", Op: "add",
			Criteria: []store.Criterion{{Text: "docs build"}, {ID: "links", Text: "links checked"}}}},
		{"/criteria #docs remove g1 G2", Parsed{Command: "criteria", Addr: &Address{Goal: "docs"}, Op: "remove", Items: []string{"g1", "g2"}}},
		{"/done", Parsed{Command: "done"}},
		{"/done #docs shipped it", Parsed{Command: "done", Addr: &Address{Goal: "docs"}, Reason: "shipped it"}},
		{"/reopen one more fix", Parsed{Command: "reopen", Reason: "one more fix"}},
		{"/replan #docs Ship the API because users asked cancel 3 #4 reopen 7",
			Parsed{Command: "replan", Addr: &Address{Goal: "docs"}, Text: "Ship the API", Reason: "users asked", Cancel: []int64{3, 4}, Reopen: []int64{7}}},
		{"/replan Ship the API, because: users asked, because they pay", Parsed{Command: "replan", Text: "Ship the API", Reason: "users asked, because they pay"}},
		{"/replan 改写接口文档，因为客户要求", Parsed{Command: "replan", Text: "改写接口文档", Reason: "客户要求"}},
		{"/replan cancel the old plan and ship", Parsed{Command: "replan", Text: "cancel the old plan and ship"}},
		{"/replan Ship it reopen 5, 6", Parsed{Command: "replan", Text: "Ship it", Reopen: []int64{5, 6}}},
		{"/replan Ship it cancel 3 later", Parsed{Command: "replan", Text: "Ship it cancel 3 later"}},
		{"/waive g2 checked by hand", Parsed{Command: "waive", Text: "g2", Reason: "checked by hand"}},
		{"/waive #docs todo 3 C1 not needed", Parsed{Command: "waive", Addr: &Address{Goal: "docs"}, TodoID: 3, Text: "c1", Reason: "not needed"}},
		{"/waive 待办 #3 c1 不需要", Parsed{Command: "waive", TodoID: 3, Text: "c1", Reason: "不需要"}},
		{"/handoff #docs 3 to claude the build is green", Parsed{Command: "handoff", Addr: &Address{Goal: "docs"}, TodoID: 3, To: "claude", Text: "the build is green"}},
		{"/handoff todo #3 Claude as review check links", Parsed{Command: "handoff", TodoID: 3, To: "claude", Kind: "review", Text: "check links"}},
		{"/handoff 待办 3 给 claude 检查链接", Parsed{Command: "handoff", TodoID: 3, To: "claude", Text: "检查链接"}},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tpl, err := templates.New()
	require.NoError(t, err)
	// What an English chat reads (the word of the problem's code), as the chat reads it.
	cases := map[string]string{
		"/frobnicate":                    "there is no command /frobnicate",
		"/help me":                       "takes nothing after it",
		"/budget #docs many":             `the number of turns must be a whole number from 0 to 100000, not "many"`,
		"/budget #docs 3 9999":           "the window must be a whole number of hours",
		"/budget":                        "needs the number of turns",
		"/approve":                       "needs the gate's id",
		"/approve x12":                   "is not a gate id",
		"/lang fr":                       `the language must be one of en|zh, not "fr"`,
		"/bind":                          "needs the goal to bind",
		"/bind #a/b/c":                   "too many parts: here the address is #goal/agent",
		"/status #docs/codex":            "too many parts: here the address is #goal",
		"#Bad!goal hi":                   `"Bad!goal" is not a goal id`,
		"#docs/bad!agent hi":             `"bad!agent" is not an agent id`,
		"#docs/a/b!d hi":                 "session",
		"#docs":                          "no text to deliver",
		"/steer":                         "no text to deliver",
		"/todo #docs":                    "needs the text",
		"#docs /status":                  "put the command first: /status #docs",
		"/status #docs extra":            `"extra" does not belong after /status`,
		"/bind #docs extra":              `"extra" does not belong after /bind #docs`,
		"#":                              "is not a goal id",
		"/budget #docs -1":               "the number of turns must be",
		"/approve g99999999999999999999": "is not a gate id",
		"/schedule #docs heartbeat UTC":  "write the cron spec before the time zone (UTC)",
		"/schedule #docs":                "/schedule needs heartbeat|report",
		"/owners #docs":                  "/owners needs add|remove|set",
		"/stall #docs x":                 `or off, not "x"`,
		"/breaker #docs x":               `off or default, not "x"`,
		"/progress #docs x":              `/progress takes on, off or default, not "x"`,
		"/runs 99":                       "from 1 to 30",
		"/scope":                         "/scope takes editable, protected or notes first",
		"/scope editable":                "name the paths",
		"/scope editable add all":        "editable add takes paths, not all",
		"/scope protected a[":            `"a[" is not a path pattern`,
		"/scope notes":                   "say the boundaries in words",
		"/capability #docs":              "/capability takes grant or revoke",
		"/capability add publish":        "/capability takes grant or revoke",
		"/capability grant":              "name the capabilities to grant",
		"/capability grant spend_money":  `"spend_money" is not a capability name`,
		"/capability #a/b/c grant x":     "too many parts",
		"/criteria":                      "/criteria takes add or remove",
		"/criteria add":                  "say what must be true after add",
		"/criteria remove":               "name the criteria to remove by id",
		"/criteria remove g!":            `"g!" is not a criterion id`,
		"/replan":                        "say the new objective",
		"/replan because x":              "say the new objective",
		"/waive":                         "name the criterion to waive",
		"/waive todo x g1 why":           `"x" is not a todo number`,
		"/waive g1":                      "say why g1 counts as met",
		"/waive g!1 why":                 `"g!1" is not a criterion id`,
		"/handoff":                       `/handoff needs the todo number`,
		"/handoff 3":                     "name the agent that takes the todo",
		"/handoff 3 to":                  "name the agent that takes the todo",
		"/handoff 3 to Bad! note":        `"Bad!" is not an agent id`,
		"/handoff 3 to claude":           "add a note: what claude should do next",
		"/handoff 3 to claude as boss x": `after as comes resume, review or verify, not "boss"`,
		"/done #docs/codex":              "too many parts",
	}
	for in, want := range cases {
		_, err := Parse(in)
		var pe *ParseError
		require.True(t, errors.As(err, &pe), "%q: got %v", in, err)
		require.NotEmpty(t, pe.Code, in)
		require.Contains(t, tpl.Word("en", "parse."+pe.Code, pe.Args...), want, in)
	}
}

// Every problem the grammar names has a code, and each code a word in every language that
// says it with the same arguments; every form has its usage in every language.
func TestParseCodesHaveWords(t *testing.T) {
	t.Parallel()
	tpl, err := templates.New()
	require.NoError(t, err)
	var codes [][]string
	for _, f := range []string{"grammar.go", "contractgrammar.go", "commands.go"} {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		codes = append(codes, regexp.MustCompile(`(?:bad|parseError\([a-zA-Z."]*,|usage\(ctx, [a-z]+, [a-zA-Z."]*,) ?\("?([a-z_0-9]+)"`).FindAllStringSubmatch(string(src), -1)...)
		codes = append(codes, regexp.MustCompile(`"(parse\.[a-z_]+)"`).FindAllStringSubmatch(string(src), -1)...)
	}
	require.Greater(t, len(codes), 40)
	for _, m := range codes {
		key := m[1]
		if !strings.HasPrefix(key, "parse.") {
			key = "parse." + key
		}
		for _, lang := range templates.Languages() {
			require.NotEqual(t, key, tpl.Word(lang, key), "no %s word %s", lang, key)
		}
	}
	for _, depth := range []string{"1", "2", "3"} {
		for _, lang := range templates.Languages() {
			require.NotEqual(t, "parse.address_parts_"+depth, tpl.Word(lang, "parse.address_parts_"+depth))
		}
	}
	for _, form := range append([]string{formMessage, "queue", "steer"}, commandNames()...) {
		for _, lang := range templates.Languages() {
			require.NotEqual(t, "usage."+form, tpl.Word(lang, "usage."+form), "no %s usage of %s", lang, form)
		}
	}
	for _, in := range []string{"/scope editable add all", "/capability grant x_y", "/criteria remove g!", "/waive g1",
		"/handoff 3 to claude as boss x", "/budget #docs 3 9999", "/bind #a/b/c", "#docs /status", "/status #docs x"} {
		_, err := Parse(in)
		var pe *ParseError
		require.True(t, errors.As(err, &pe), in)
		require.NotEmpty(t, pe.Code, in)
		for _, lang := range templates.Languages() {
			require.NotContains(t, tpl.Word(lang, "parse."+pe.Code, pe.Args...), "%!", "%s %s: the word takes the arguments", lang, in)
		}
	}
}

func commandNames() []string {
	var out []string
	for _, c := range commandTable() {
		out = append(out, c.name)
	}
	return out
}

func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	tpl, err := templates.New()
	require.NoError(t, err)
	for _, c := range commandTable() {
		p, err := Parse("/" + c.name)
		if c.args == argsNone || c.args == argsGoalOpt {
			require.NoError(t, err, c.name)
			require.Equal(t, c.name, p.Command)
		}
		for _, lang := range templates.Languages() {
			require.NotEqual(t, "help."+c.name, tpl.Word(lang, "help."+c.name), "no %s summary of /%s in the word list", lang, c.name)
			usage := tpl.Word(lang, "usage."+c.name)
			require.True(t, usage == "/"+c.name || strings.HasPrefix(usage, "/"+c.name+" "), "%s usage of /%s: %q", lang, c.name, usage)
		}
	}
}

// FuzzParse: the parser never panics, and every input is a known command, a message with
// text, or a ParseError with a problem a person can read.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "/help", "#g/a/s text", "/budget #g 1 2", "／approve ｇ1", "/steer", "#", "/todo #x y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := Parse(in)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Problem == "" || pe.Code == "" {
				t.Fatalf("Parse(%q): error %v is not a ParseError with a problem and its code", in, err)
			}
			if !utf8.ValidString(pe.Problem) && utf8.ValidString(in) {
				t.Fatalf("Parse(%q): problem is not valid UTF-8", in)
			}
			return
		}
		if p.Addr != nil {
			// The regular expressions are the documented rules, an oracle for the loops.
			idRe := regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
			sessionRe := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
			if !idRe.MatchString(p.Addr.Goal) || (p.Addr.Agent != "" && !idRe.MatchString(p.Addr.Agent)) ||
				(p.Addr.Session != "" && !sessionRe.MatchString(p.Addr.Session)) {
				t.Fatalf("Parse(%q): invalid address %+v accepted", in, *p.Addr)
			}
		}
		if p.Command != "" {
			if _, ok := lookupCommand(p.Command); !ok {
				t.Fatalf("Parse(%q): unknown command %q", in, p.Command)
			}
			return
		}
		if p.Mode != "inbox" && p.Mode != "queue" && p.Mode != "steer" {
			t.Fatalf("Parse(%q): message with mode %q", in, p.Mode)
		}
		if strings.TrimSpace(p.Text) == "" {
			t.Fatalf("Parse(%q): message without text", in)
		}
	})
}

package router

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

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
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"/frobnicate":                    "unknown command /frobnicate",
		"/help me":                       "takes no arguments",
		"/budget #docs many":             "slots must be a whole number",
		"/budget #docs 3 9999":           "window-hours must be",
		"/budget":                        "needs the number of turns",
		"/approve":                       "needs the gate id",
		"/approve x12":                   "is not a gate id",
		"/lang fr":                       "language must be en or zh",
		"/bind":                          "needs the goal to bind",
		"/bind #a/b/c":                   "too many parts",
		"/status #docs/codex":            "too many parts",
		"#Bad!goal hi":                   "goal \"Bad!goal\" is not a goal id",
		"#docs/bad!agent hi":             "agent \"bad!agent\" is not an agent id",
		"#docs/a/b!d hi":                 "session",
		"#docs":                          "no text to deliver",
		"/steer":                         "no text to deliver",
		"/todo #docs":                    "needs the text",
		"#docs /status":                  "put the command first",
		"/status #docs extra":            "unexpected",
		"#":                              "is not a goal id",
		"/budget #docs -1":               "slots must be",
		"/approve g99999999999999999999": "is not a gate id",
	}
	for in, want := range cases {
		_, err := Parse(in)
		var pe *ParseError
		require.True(t, errors.As(err, &pe), "%q: got %v", in, err)
		require.Contains(t, pe.Error(), want, in)
	}
}

func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	tpl, err := templates.New()
	require.NoError(t, err)
	for _, c := range commandTable() {
		p, err := Parse(c.usage[:strings.IndexAny(c.usage+" ", " ")])
		if c.args == argsNone || c.args == argsGoalOpt {
			require.NoError(t, err, c.usage)
			require.Equal(t, c.name, p.Command)
		}
		for _, lang := range templates.Languages() {
			require.NotEqual(t, "help."+c.name, tpl.Word(lang, "help."+c.name), "no %s summary of /%s in the word list", lang, c.name)
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
			if !errors.As(err, &pe) || pe.Problem == "" {
				t.Fatalf("Parse(%q): error %v is not a ParseError with a problem", in, err)
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

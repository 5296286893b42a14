package router_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/change"
	"loopx/router"
	"loopx/store"
	"loopx/templates"
)

// A Chinese chat reads Chinese: every reply to a bad command, to a command the kernel refuses
// and to a command someone may not run is said in Chinese, with nothing of the English the
// kernel and the grammar keep for the API and the logs. Commands, addresses, ids, names and
// the choices a command takes are typed as they are and may stay.

// typedInChat is what a Chinese reply may carry in Latin letters: what people type or read as
// it is (commands, #addresses, gate ids, open_ids and mentions, paths, a command's choices,
// what the sender typed, quoted back) and the names that read the same in both languages.
var typedInChat = []*regexp.Regexp{
	regexp.MustCompile(`<at (user_id="|id=)[^>]*></at>`),              // mentions
	regexp.MustCompile(`“[^”]*”|"[^"]*"`),                             // what the sender typed, quoted back
	regexp.MustCompile(`(^|[^\w])[/#][A-Za-z][\w./*-]*(\[[^\]]*\])*`), // /gates, #docs/codex, #目标[/智能体]
	regexp.MustCompile(`\b[a-z]+(\|[a-z]+)+\b`),                       // heartbeat|report, on|off|default
	regexp.MustCompile(`\b[\w-]*_[\w-]*\b|ou_…`),                      // open_id, ou_owner: ids with an underscore
	regexp.MustCompile(`\b[\w.-]+/[\w.*/-]+`),                         // paths and zones: src/**, Asia/Shanghai
	regexp.MustCompile(`\bg\d+\b`),                                    // gate ids and criterion ids: g12
	regexp.MustCompile(`\b(LoopX|UTF-8|UTC|ID|cron|should-run|Lark)\b`),
	// What people wrote in the test's goals (titles, objectives, todos, questions) is theirs.
	regexp.MustCompile(`Docs site|ship the docs|publish the site|Publish now\?|Delete the old pages\?`),
}

// englishWord is a word only English prose uses, or one the glossary says a Chinese text
// says in Chinese (its retired-in-zh block: approve, gate, turn, ...); a Chinese text holding
// one standing alone says something in English.
var englishWord = regexp.MustCompile(`(?i)(^|[^\w/#-])(the|is|are|was|not|no|you|your|there|this|that|these|must|be|from|after|takes|needs|` +
	`only|can|cannot|would|has|have|for|of|and|or|please|again|unknown|usage|nothing|changed|with|it|its|what|which|lists|shows|try|` +
	retiredInChinese() + `)($|[^\w-])`)

// retiredInChinese is the glossary's retired-in-zh block as alternatives of a pattern.
func retiredInChinese() string {
	b, err := os.ReadFile(filepath.Join("..", "docs", "glossary.md"))
	if err != nil {
		panic(err) // the glossary is part of the tree
	}
	_, rest, _ := strings.Cut(string(b), "```retired-in-zh\n")
	body, _, _ := strings.Cut(rest, "```")
	var words []string
	for _, w := range strings.Split(body, ",") {
		if w = strings.TrimSpace(w); w != "" {
			words = append(words, regexp.QuoteMeta(w))
		}
	}
	return strings.Join(words, "|")
}

// latinRun is three Latin words in a row (a name like spend-money is one word): a sentence,
// whatever its words.
var latinRun = regexp.MustCompile(`[A-Za-z][\w'’-]*([ ,.:;()]+[A-Za-z][\w'’-]*){2,}`)

// placeholder is a part of a command's form left in English: <text>, #goal.
var placeholder = regexp.MustCompile(`<[A-Za-z][A-Za-z -]*…?>|#goal\b|/agent\b|/session\b`)

// englishIn returns the English a Chinese text holds ("" when it holds none).
func englishIn(text string) string {
	text = typedInChat[0].ReplaceAllString(text, " ") // mentions first: their tags are no placeholder
	if m := placeholder.FindString(text); m != "" {
		return m
	}
	for _, re := range typedInChat[1:] {
		text = re.ReplaceAllString(text, " ")
	}
	if m := englishWord.FindStringSubmatch(text); m != nil {
		return m[2] + " (in: " + strings.TrimSpace(text) + ")"
	}
	if m := latinRun.FindString(text); m != "" {
		return m
	}
	return ""
}

// shownOf is what a person reads of an outbox row: a text, or every string a card shows.
func shownOf(t *testing.T, r store.OutboxRecord) string {
	t.Helper()
	if r.Kind == "text" {
		return r.Content
	}
	var root any
	require.NoError(t, json.Unmarshal([]byte(r.Content), &root), r.Content)
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if c, ok := x["content"].(string); ok {
				out = append(out, c)
			}
			for k, y := range x {
				if k != "value" { // button values are read by LoopX, not shown
					walk(y)
				}
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(root)
	return strings.Join(out, "\n")
}

func TestEnglishInDetectsSentencesOnly(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"操作未完成：there is no gate g999 you can answer; /gates lists the open ones",
		"操作未完成：unknown command /frobnicate; /help lists the commands",
		"slots must be a whole number from 0 to 100000, got \"lots\"",
		"Nothing would change: #docs already has that.",
		"用法：/budget #goal <slots> [<window-hours>]",
	} {
		require.NotEmpty(t, englishIn(s), s)
	}
	for _, s := range []string{
		"没有 /frobnicate 这个命令；/help 可以查看全部命令",
		"请先 @ 对方，或者写出对方的 open_id（ou_…）：<at user_id=\"ou_owner\"></at>",
		"/approve g12、/gates #docs、#docs/codex、/schedule #目标 heartbeat|report <cron 表达式>|off [时区]",
		"“Mars/Olympus”不是有效的时区：请写 Asia/Shanghai、UTC 这样的时区名。",
		"/scope 后面先写 editable、protected 或 notes",
	} {
		require.Empty(t, englishIn(s), s)
	}
}

func TestChineseChatRepliesInChinese(t *testing.T) {
	t.Parallel()
	e := langSetup(t, "zh")
	ctx := t.Context()
	todo, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "publish the site", Meta: setupMeta})
	require.NoError(t, err)
	open := e.askGate("Publish now?", 0)
	closed := e.askGate("Delete the old pages?", 0)
	_, err = e.st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "docs", GateID: closed.ID, Answer: "reject", AnsweredBy: owner,
		Notice: e.cards.Gates.Update, Meta: setupMeta})
	require.NoError(t, err)
	e.apply(change.Request{GoalID: "docs", Kind: store.ProposalGoalSet, Goal: change.GoalChange{Objective: ptr("ship the docs")}})
	e.apply(change.Request{GoalID: "infra", Kind: store.ProposalGoalPause})
	e.outbox()
	long := strings.Repeat("长", store.MaxText+1)

	// Each text, and for some what the answer says (the refusal worded by what it is).
	type ask struct{ who, text, want string }
	var corpus []ask
	for _, text := range []string{
		// The grammar: every problem a text can have.
		"/frobnicate", "/help me", "/budget #docs many", "/budget #docs 3 9999", "/budget", "/approve", "/approve x12",
		"/lang fr", "/bind", "/bind #a/b/c", "/bind #docs extra", "/status #docs/codex", "#Bad!goal hi", "#docs/bad!agent hi",
		"#docs/a/b!d hi", "#docs", "/steer", "/queue", "/todo #docs", "#docs /status", "/status #docs extra", "#",
		"/budget #docs -1", "/approve g99999999999999999999", "/schedule #docs heartbeat UTC", "/schedule #docs",
		"/owners #docs", "/stall #docs x", "/breaker #docs x", "/progress #docs x", "/quiet #docs maybe", "/runs 99",
		"/scope", "/scope editable", "/scope editable add all", "/scope protected a[", "/scope notes", "/capability #docs",
		"/capability grant", "/capability grant spend_money", "/criteria", "/criteria add", "/criteria remove g!",
		"/replan", "/waive", "/waive todo x g1 why", "/waive g1", "/handoff", "/handoff 3", "/handoff 3 to Bad! note",
		"/handoff 3 to claude", "/handoff 3 to claude as boss x",
		// Refusals the router or the kernel words itself, asked for below with what they say.
		"/resume #docs/codex", "/stop #docs/codex", "/steer #docs/codex now", "/handoff 999 to claude check it",
		"/handoff " + itoa(todo.ID) + " to nobody check it", "/waive g9 no need", "/capability #docs/claude grant spend-money",
		"/criteria remove zz", "/bind #nosuch", "#docs/nobody hello", "/report", "/web", "/help",
	} {
		corpus = append(corpus, ask{owner, text, ""})
	}
	corpus = append(corpus,
		ask{owner, "/frobnicate", "没有 /frobnicate 这个命令；/help 可以查看全部命令"},
		ask{owner, "／status ＃docs extra", "“extra”不应该写在 /status 后面\n用法：/status [#目标]"},
		ask{owner, "/budget #docs many", "轮数要写 0 到 100000 的整数，不能写“many”\n用法：/budget #目标 <轮数> [<窗口小时数>]"},
		ask{owner, "/approve g999", "没有你可以处理的待决事项 g999；/gates 可以查看待处理的待决事项"},
		ask{owner, "/owners #docs add bob", "“bob”不是一个人：请 @ 对方，或者写出对方的 open_id（ou_…）"},
		ask{owner, "/approve g" + itoa(closed.ID), "待决事项 g" + itoa(closed.ID) + " 已经处理过了（已拒绝），没有任何变化。/gates #docs 可以查看待处理的待决事项。"},
		ask{owner, "/approve g" + itoa(open.ID) + " " + long, "备注太长了（12001 个字符）：请缩短后再发送。没有任何变化。"},
		ask{owner, "/todo #docs " + long, "待办内容太长了（12001 个字符）"},
		ask{owner, "/pause #infra", "#infra 已经暂停了，没有任何变化。/resume #infra 可以恢复运行。"},
		ask{owner, "/resume #docs", "#docs 没有暂停，不需要恢复。"},
		ask{owner, "/schedule #docs heartbeat 61 * * * *", "“61 * * * *”不是有效的 cron 表达式"},
		ask{owner, "/schedule #docs report 30 9 * * * Mars/Olympus", "“Mars/Olympus”不是有效的时区"},
		ask{owner, "/owners #docs set ou_x!y", "这里写到的人中有无法添加的"},
		ask{owner, "/replan #docs ship the docs", "不会有任何变化：#docs 已经是这样了。/contract #docs 可以查看目标约定。"},
		ask{owner, "/scope protected none", "不会有任何变化：#docs 已经是这样了。"},
		// Who may not: a member, a stranger.
		ask{member, "/budget 5", "只有 #docs 的负责人可以使用 /budget"},
		ask{member, "/approve g" + itoa(open.ID), "只有 #docs 的负责人可以使用 /approve"},
		ask{stranger, "/status #docs", ""}, ask{stranger, "/lang en", ""},
	)
	// And what a Chinese chat reads when things go well.
	for _, text := range []string{"/gates", "/status", "/contract", "/runs", "/goals", "/todo 写首页", "/budget 5", "/pause",
		"/stall #docs 4", "/schedule #docs heartbeat 30 9 * * 1-5 Asia/Shanghai", "/unbind #infra", "/help"} {
		corpus = append(corpus, ask{owner, text, ""})
	}

	says := func(a ask) {
		t.Helper()
		e.say(a.who, a.text)
		rows := e.outbox()
		require.NotEmpty(t, rows, "no answer to %q", a.text)
		for _, r := range rows {
			if r.Kind == "reaction" {
				continue
			}
			shown := shownOf(t, r)
			require.Empty(t, englishIn(shown), "%q answered with English: %s", a.text, shown)
			require.Regexp(t, `\p{Han}`, shown, "%q answered with no Chinese", a.text)
			require.False(t, internalID.MatchString(shown), "%q: an internal identifier in %s", a.text, shown)
			require.Contains(t, shown, a.want, a.text)
		}
	}
	for _, a := range corpus {
		says(a)
	}

	// A direct chat in Chinese: the overview, a problem with a text.
	dm := func(text string) {
		t.Helper()
		e.send(router.Message{ChatID: "oc_dm", ChatType: router.ChatP2P, SenderID: owner, Text: text}, false)
	}
	dm("/lang zh")
	e.outbox()
	for _, text := range []string{"/status", "/gates", "/frobnicate", "/web", "hello"} {
		dm(text)
		for _, r := range e.outbox() {
			if r.Kind == "reaction" {
				continue
			}
			shown := shownOf(t, r)
			require.Empty(t, englishIn(shown), "%q answered with English: %s", text, shown)
			require.Regexp(t, `\p{Han}`, shown, "%q answered with no Chinese", text)
		}
	}

	// A done goal refuses in Chinese too.
	e.apply(change.Request{GoalID: "docs", Kind: store.ProposalGoalDone, Reason: "shipped"})
	says(ask{owner, "/budget 5", "#docs 已完成：负责人重新打开（/reopen #docs）之前，不能再修改它。"})
	says(ask{owner, "/done", "#docs 已经完成了。"})
	says(ask{owner, "/criteria add every page builds", "#docs 已完成"})
}

// In English the same refusals are said by what they are, not with the kernel's message.
func TestKernelRefusalsSaidByWhatTheyAre(t *testing.T) {
	t.Parallel()
	e := langSetup(t, "en")
	closed := e.askGate("Delete the old pages?", 0)
	_, err := e.st.AnswerGate(t.Context(), store.AnswerGateParams{GoalID: "docs", GateID: closed.ID, Answer: "reject", AnsweredBy: owner,
		Notice: e.cards.Gates.Update, Meta: setupMeta})
	require.NoError(t, err)
	e.apply(change.Request{GoalID: "infra", Kind: store.ProposalGoalPause})
	for text, want := range map[string]string{
		"/approve g" + itoa(closed.ID):                        "g" + itoa(closed.ID) + " is already rejected: nothing changed. /gates #docs lists the open ones.",
		"/pause #infra":                                       "#infra is paused already: nothing changed. /resume #infra runs it again.",
		"/resume #docs":                                       "#docs is not paused: there is nothing to resume.",
		"/schedule #docs heartbeat 61 * * * *":                `"61 * * * *" is not a schedule LoopX can read`,
		"/schedule #docs report 30 9 * * * Mars/Olympus":      `"Mars/Olympus" is not a time zone`,
		"/todo #docs " + strings.Repeat("x", store.MaxText+1): "The todo's text is too long (12001 characters)",
		"/scope protected none":                               "Nothing would change: #docs already has that. /contract #docs shows the contract.",
	} {
		e.say(owner, text)
		rows := e.outbox()
		require.Len(t, rows, 1, text)
		require.Contains(t, rows[0].Content, want, text)
		require.False(t, internalID.MatchString(rows[0].Content), "%q: %s", text, rows[0].Content)
	}
}

// Every reason the kernel gives has its own words in every language, not the words of its
// kind.
func TestEveryKernelReasonHasWords(t *testing.T) {
	t.Parallel()
	tpl, err := templates.New()
	require.NoError(t, err)
	render := func(lang, kind, reason string) string {
		out, err := tpl.Text(lang, "kernel_refused", map[string]any{"Kind": kind, "Reason": reason, "Field": "", "FieldName": "",
			"Command": "", "GoalID": "docs", "AgentID": "codex", "Gate": "g1", "GateStatus": "approved", "Value": "", "Chars": 0})
		require.NoError(t, err)
		return out
	}
	for _, r := range store.ErrorReasons() {
		for _, lang := range templates.Languages() {
			require.NotEqual(t, render(lang, r.Code, ""), render(lang, r.Code, r.Reason), "%s has no words of its own in %s", r.Reason, lang)
		}
	}
}

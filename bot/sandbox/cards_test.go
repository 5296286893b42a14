package sandbox_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
)

func TestRenderCard(t *testing.T) {
	t.Parallel()
	v1 := `{"config":{"wide_screen_mode":true},"header":{"title":{"tag":"plain_text","content":"Old card"}},
		"elements":[{"tag":"div","text":{"tag":"lark_md","content":"line one"}},{"tag":"hr"},
		{"tag":"action","actions":[{"tag":"button","text":{"tag":"plain_text","content":"OK"},"value":{"k":"ok"}},
		{"tag":"button","text":{"tag":"plain_text","content":"No"},"value":{"k":"no"}}]}]}`
	got := sandbox.RenderCard(v1)
	require.Equal(t, "Old card", got.Title)
	require.Equal(t, []sandbox.CardLine{{Text: "line one", Markdown: true}, {Text: "────"}}, got.Lines)
	require.Equal(t, []sandbox.Button{{N: 1, Text: "OK", Value: map[string]any{"k": "ok"}}, {N: 2, Text: "No", Value: map[string]any{"k": "no"}}}, got.Buttons)

	v2 := `{"schema":"2.0","body":{"elements":[{"tag":"column_set","columns":[
		{"tag":"column","elements":[{"tag":"markdown","content":"left"}]},
		{"tag":"column","elements":[{"tag":"button","text":{"tag":"plain_text","content":"Go"},
		"behaviors":[{"type":"open_url","default_url":"https://x"},{"type":"callback","value":{"gate":"g1"}}]}]}]}]}}`
	got = sandbox.RenderCard(v2)
	require.Equal(t, []sandbox.CardLine{{Text: "left", Markdown: true}}, got.Lines)
	require.Equal(t, map[string]any{"gate": "g1"}, got.Buttons[0].Value)

	require.Equal(t, "[template card AAA]", sandbox.RenderCard(`{"type":"template","data":{"template_id":"AAA"}}`).Title)
	require.Equal(t, []sandbox.CardLine{{Text: "not json"}}, sandbox.RenderCard("not json").Lines)
}

func TestRenderMarkdownForTheTerminal(t *testing.T) {
	t.Parallel()
	src := "# Report\n**Owners:** @ou_demo_owner · *soon* ~~never~~\nOr reply `/approve g1 [comment]` · `/reject g1`\n" +
		"- first **item**\n  * nested\n2. second\n> quoted\n---\n[the docs](https://example.invalid/docs) <font color='red'>red</font> <text_tag color='blue'>tag</text_tag>\n" +
		"```\nloopx todo **add**\n```\nkeep ou_demo_owner and 2 * 3 * 4 and \\*literal\\* and a lone ` tick"
	require.Equal(t, []string{
		"Report",
		"Owners: @ou_demo_owner · soon never",
		"Or reply /approve g1 [comment] · /reject g1",
		"• first item",
		"  • nested",
		"2. second",
		"│ quoted",
		"────",
		"the docs (https://example.invalid/docs) red [tag]",
		"    loopx todo **add**",
		"keep ou_demo_owner and 2 * 3 * 4 and *literal* and a lone ` tick",
	}, sandbox.RenderMarkdown(src, false))

	ansi := sandbox.RenderMarkdown("**Owners:** `code` *it* ~~gone~~ [x](https://u)", true)
	require.Equal(t, []string{"\x1b[1mOwners:\x1b[22m \x1b[36mcode\x1b[39m \x1b[3mit\x1b[23m \x1b[9mgone\x1b[29m \x1b[4mx\x1b[24m (https://u)"}, ansi)
	require.Equal(t, []string{"\x1b[1mTitle\x1b[22m"}, sandbox.RenderMarkdown("## Title", true))
}

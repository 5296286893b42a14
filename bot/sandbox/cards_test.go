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
	require.Equal(t, []string{"line one", "────"}, got.Lines)
	require.Equal(t, []sandbox.Button{{N: 1, Text: "OK", Value: map[string]any{"k": "ok"}}, {N: 2, Text: "No", Value: map[string]any{"k": "no"}}}, got.Buttons)

	v2 := `{"schema":"2.0","body":{"elements":[{"tag":"column_set","columns":[
		{"tag":"column","elements":[{"tag":"markdown","content":"left"}]},
		{"tag":"column","elements":[{"tag":"button","text":{"tag":"plain_text","content":"Go"},
		"behaviors":[{"type":"open_url","default_url":"https://x"},{"type":"callback","value":{"gate":"g1"}}]}]}]}]}}`
	got = sandbox.RenderCard(v2)
	require.Equal(t, []string{"left"}, got.Lines)
	require.Equal(t, map[string]any{"gate": "g1"}, got.Buttons[0].Value)

	require.Equal(t, "[template card AAA]", sandbox.RenderCard(`{"type":"template","data":{"template_id":"AAA"}}`).Title)
	require.Equal(t, []string{"not json"}, sandbox.RenderCard("not json").Lines)
}

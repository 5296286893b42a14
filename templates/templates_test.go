package templates_test

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/templates"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// TestGolden renders every template in every language with each sample data file
// (testdata/data/<name>[.<variant>].json) and compares with testdata/golden/<lang>/.
func TestGolden(t *testing.T) {
	t.Parallel()
	set, err := templates.New()
	require.NoError(t, err)

	files, err := filepath.Glob("testdata/data/*.json")
	require.NoError(t, err)
	covered := map[string]bool{}
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".json")
		name, _, _ := strings.Cut(base, ".")
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var data map[string]any
		require.NoError(t, json.Unmarshal(raw, &data), f)
		for _, kind := range []string{"txt", "card"} {
			if !set.Has(name, kind) {
				continue
			}
			covered[name+"."+kind] = true
			for _, lang := range templates.Languages() {
				var got string
				if kind == "card" {
					got, err = set.Card(lang, name, data)
					require.NoError(t, err, "%s %s", lang, base)
					var v map[string]any
					require.NoError(t, json.Unmarshal([]byte(got), &v))
					require.Equal(t, "2.0", v["schema"])
					require.Equal(t, map[string]any{"update_multi": true}, v["config"])
				} else {
					got, err = set.Text(lang, name, data)
					require.NoError(t, err, "%s %s", lang, base)
				}
				golden := filepath.Join("testdata", "golden", lang, base+"."+kind)
				if *update {
					require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
					require.NoError(t, os.WriteFile(golden, []byte(got+"\n"), 0o644))
					continue
				}
				want, err := os.ReadFile(golden)
				require.NoError(t, err, "missing golden file; run go test ./templates -run TestGolden -update")
				require.Equal(t, string(want), got+"\n", golden)
			}
		}
	}
	for _, n := range set.Names() {
		require.True(t, covered[n], "template %s has no sample data in testdata/data/", n)
	}
}

func TestCardEscapesUserText(t *testing.T) {
	t.Parallel()
	set, err := templates.New()
	require.NoError(t, err)
	nasty := "\"}]},{\"tag\":\"button\"} \\ \n <at id=all></at> \u2028 {{.X}}"
	card, err := set.Card("en", "gate", gateData(nasty, 1))
	require.NoError(t, err)
	var v struct {
		Body struct {
			Elements []map[string]any `json:"elements"`
		} `json:"body"`
	}
	require.NoError(t, json.Unmarshal([]byte(card), &v))
	// The question comes back as typed, its markup made inert, in its own element, and adds
	// no element.
	found := false
	for _, el := range v.Body.Elements {
		if txt, ok := el["text"].(map[string]any); ok && txt["content"] == templates.SafeText(nasty) {
			found = true
		}
	}
	require.True(t, found, "question not found in %s", card)
	require.Len(t, v.Body.Elements, 5)
}

func TestCardTooLargeFallsBackToText(t *testing.T) {
	t.Parallel()
	set, err := templates.New()
	require.NoError(t, err)
	big := strings.Repeat("é", 11000) // 22 KB of question
	data := gateData(big, 1)
	data["TodoID"], data["TodoText"] = 3, strings.Repeat("b", 12000)

	_, err = set.Card("en", "gate", data)
	require.True(t, errors.Is(err, templates.ErrTooLarge), "got %v", err)

	r, err := set.Render("zh", "gate", data)
	require.NoError(t, err)
	require.Equal(t, templates.KindText, r.Kind)
	require.Contains(t, r.Content, big)

	r, err = set.Render("en", "gate", gateData("small", 1))
	require.NoError(t, err)
	require.Equal(t, templates.KindCard, r.Kind)
	require.LessOrEqual(t, len(r.Content), templates.MaxCardBytes)
}

func TestUnknownTemplateAndMissingField(t *testing.T) {
	t.Parallel()
	set, err := templates.New()
	require.NoError(t, err)
	_, err = set.Text("en", "no-such-template", nil)
	require.ErrorIs(t, err, templates.ErrUnknown)
	_, err = set.Card("en", "help", nil) // help has no card
	require.ErrorIs(t, err, templates.ErrUnknown)
	_, err = set.Text("en", "paused", map[string]any{})
	require.ErrorContains(t, err, "GoalID")
	// An unsupported language falls back to English.
	a, err := set.Text("fr", "paused", map[string]any{"GoalID": "x"})
	require.NoError(t, err)
	b, err := set.Text("en", "paused", map[string]any{"GoalID": "x"})
	require.NoError(t, err)
	require.Equal(t, b, a)
}

func TestTextNeutralisesMentionsInUserText(t *testing.T) {
	t.Parallel()
	set, err := templates.New()
	require.NoError(t, err)
	out, err := set.Text("en", "todo_added", map[string]any{"GoalID": "g", "TodoID": 1, "Text": `ping <at user_id="all"></at>`})
	require.NoError(t, err)
	require.NotContains(t, out, "<at")
}

func gateData(question string, version int) map[string]any {
	return map[string]any{
		"Open": true, "GateID": 7, "Short": "g7", "GoalID": "docs", "AgentID": "codex", "CardVersion": version,
		"Owners": []string{"ou_a"}, "Question": question, "Options": []string{"approve", "reject"},
		"Labels": []string{"Approve", "Reject"}, "Stall": false, "AnswerLabel": "",
		"TodoID": 0, "TodoText": "", "Status": "open", "AnsweredBy": "", "AnsweredAt": "", "Answer": "", "Comment": "",
	}
}

// A text LoopX wrote from a word in one language reads in another, its arguments read back;
// a text no word made reads as it is.
func TestReword(t *testing.T) {
	t.Parallel()
	set, err := templates.New()
	require.NoError(t, err)
	en := set.Word("en", "stall_question", 4)
	zh := set.Word("zh", "stall_question", 4)
	require.NotEqual(t, en, zh)
	for _, c := range []struct{ lang, from, want string }{{"zh", en, zh}, {"en", zh, en}, {"en", en, en}, {"zh", zh, zh}} {
		got, ok := set.Reword(c.lang, "stall_question", c.from)
		require.True(t, ok, c.from)
		require.Equal(t, c.want, got)
	}
	for _, text := range []string{"Should we continue?", "no progress in many turns: continue or pause?", ""} {
		got, ok := set.Reword("zh", "stall_question", text)
		require.False(t, ok, text)
		require.Equal(t, text, got)
	}
}

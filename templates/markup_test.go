package templates_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/templates"
)

// markupCorpus is Lark mention, link and markup syntax an agent or a person might write.
var markupCorpus = []string{
	`<at user_id="all"></at>`,
	`<at id=all></at> hi`,
	`<AT ID=ALL></AT>`,
	`< at id = all >`,
	`<at user_id="ou_victim">boss</at>`,
	`[approve here](https://evil.example/phish)`,
	`![logo](img_v2_evil)`,
	`<font color='red'>urgent</font>`,
	`<link url="https://evil.example">docs</link>`,
	`<a href="https://evil.example">x</a>`,
	`&#60;at id=all&#62;&#60;/at&#62;`,
	`&lt;at id=all&gt;`,
	`<text_tag color='red'>P0</text_tag>`,
	`<person id='ou_x'></person>`,
	"line one\n[two](https://e.example)",
}

// ourMention is the only mention the bot may send: one LoopX wrote, of an id, never everyone.
var ourMention = regexp.MustCompile(`<at (user_id="[A-Za-z0-9_-]+"|id=[A-Za-z0-9_-]+)></at>`)

var anyTag = regexp.MustCompile(`(?i)</?(at|a|b|i|u|s|font|link|text_tag|person|img)\b`)
var anyLink = regexp.MustCompile(`\[[^\[\]\n]*\]\(`)
var anyEntity = regexp.MustCompile(`&(#[0-9]+|#[xX][0-9a-fA-F]+|lt|gt);`)

// markup lists the Lark markup in s that LoopX did not write.
func markup(s string) []string {
	var found []string
	for _, m := range ourMention.FindAllStringSubmatch(s, -1) {
		id := strings.Trim(strings.TrimPrefix(strings.TrimPrefix(m[1], "user_id="), "id="), `"`)
		if strings.EqualFold(id, "all") {
			found = append(found, "a mention of everyone: "+m[0])
		}
	}
	s = ourMention.ReplaceAllString(s, "")
	for _, re := range []*regexp.Regexp{anyTag, anyLink, anyEntity} {
		found = append(found, re.FindAllString(s, -1)...)
	}
	return found
}

// replaceStrings puts v in place of every string of the sample data.
func replaceStrings(data any, v string) any {
	switch x := data.(type) {
	case string:
		return v
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = replaceStrings(x[i], v)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = replaceStrings(e, v)
		}
		return out
	}
	return data
}

// cardStrings lists every string a card shows (its callback values are not shown).
func cardStrings(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		*out = append(*out, x)
	case []any:
		for _, e := range x {
			cardStrings(e, out)
		}
	case map[string]any:
		for k, e := range x {
			if k != "value" {
				cardStrings(e, out)
			}
		}
	}
}

// Every template, in every language, with every string of its sample data replaced by Lark
// markup: what reaches Lark holds no mention and no link but the ones LoopX wrote.
func TestNoMarkupFromAgentsOrPeopleReachesLark(t *testing.T) {
	t.Parallel()
	set, err := templates.New()
	require.NoError(t, err)
	files, err := filepath.Glob("testdata/data/*.json")
	require.NoError(t, err)
	rendered := 0
	for _, f := range files {
		name, _, _ := strings.Cut(strings.TrimSuffix(filepath.Base(f), ".json"), ".")
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var sample map[string]any
		require.NoError(t, json.Unmarshal(raw, &sample), f)
		for _, bad := range markupCorpus {
			data := replaceStrings(sample, bad)
			for _, lang := range templates.Languages() {
				if set.Has(name, "txt") {
					if txt, err := set.Text(lang, name, data); err == nil {
						rendered++
						require.Empty(t, markup(txt), "%s %s.txt with %q:\n%s", lang, f, bad, txt)
					}
				}
				if set.Has(name, "card") {
					card, err := set.Card(lang, name, data)
					if err != nil {
						continue
					}
					rendered++
					var v any
					require.NoError(t, json.Unmarshal([]byte(card), &v))
					var shown []string
					cardStrings(v, &shown)
					for _, s := range shown {
						require.Empty(t, markup(s), "%s %s.card with %q:\n%s", lang, f, bad, s)
					}
				}
			}
		}
	}
	require.Greater(t, rendered, 1000, "most templates render with the corpus")
}

func TestSafeTextKeepsWhatIsNotMarkup(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"/budget #goal <slots> [<window-hours>]", "a < b > c", "AT&T", "[todo 3]", "x [y] (z)", "价格 <100 元"} {
		require.Equal(t, s, templates.SafeText(s))
	}
	require.Equal(t, "‹at id=all>", templates.SafeText("<at id=all>"))
	require.Equal(t, "［x］(https://e.example)", templates.SafeText("[x](https://e.example)"))
}

package templates_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The glossary (docs/glossary.md) names the retired words: English texts people read use none
// of the "retired" block, Chinese texts none of the "retired-in-zh" block (English words) nor
// of the "retired-zh" block (Chinese words the glossary says otherwise). This test reads
// every text people read: the chat templates, the workspace's pages and both word lists.

func glossaryWords(t *testing.T, block string) *regexp.Regexp {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "glossary.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "```"+block+"\n")
	require.True(t, ok, "docs/glossary.md has no %s block", block)
	body, _, _ := strings.Cut(rest, "```")
	var words []string
	for _, w := range strings.Split(body, ",") {
		if w = strings.TrimSpace(w); w != "" {
			words = append(words, regexp.QuoteMeta(w))
		}
	}
	require.NotEmpty(t, words)
	// A word, not part of an identifier (ou_owner, {{.Slots}}) or a path.
	return regexp.MustCompile(`(?i)(^|[^A-Za-z0-9_./-])(` + strings.Join(words, "|") + `)($|[^A-Za-z0-9_-])`)
}

var (
	action     = regexp.MustCompile(`(?s)\{\{.*?\}\}`)
	quoted     = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	codeToken  = regexp.MustCompile(`^[a-z0-9_.:/%-]*$`)                      // "stopped", "approve": values compared, not shown
	commandTok = regexp.MustCompile(`(^|\s|` + "`" + `)[/#][A-Za-z][\w./-]*`) // /approve, #goal: typed as they are
	choiceTok  = regexp.MustCompile(`\b[a-z]+(\|[a-z]+)+\b`)                  // heartbeat|report: the choices a command takes, typed as they are
	htmlTag    = regexp.MustCompile(`(?s)<[^>]*>`)
	jsonKey    = regexp.MustCompile(`"[A-Za-z_]+"\s*:`)
)

// shown is what a person reads of a template: its text outside actions, and inside actions
// the quoted strings that are not code tokens (printf formats, labels).
func shown(src string, html bool) string {
	var b strings.Builder
	last := 0
	for _, loc := range action.FindAllStringIndex(src, -1) {
		b.WriteString(src[last:loc[0]])
		b.WriteString(" ")
		for _, m := range quoted.FindAllStringSubmatch(src[loc[0]:loc[1]], -1) {
			if !codeToken.MatchString(m[1]) {
				b.WriteString(m[1] + " ")
			}
		}
		last = loc[1]
	}
	b.WriteString(src[last:])
	out := b.String()
	if html {
		out = htmlTag.ReplaceAllString(out, " ")
	} else {
		// Card templates are JSON: their keys and tags are structure, not words.
		out = jsonKey.ReplaceAllString(out, " ")
		out = quoted.ReplaceAllStringFunc(out, func(q string) string {
			if codeToken.MatchString(strings.Trim(q, `"`)) {
				return " "
			}
			return q
		})
	}
	return typed(out)
}

// typed blanks what people type as it is: commands, addresses and a command's choices.
func typed(s string) string {
	return choiceTok.ReplaceAllString(commandTok.ReplaceAllString(s, " "), " ")
}

func wordValues(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]string
	require.NoError(t, json.Unmarshal(b, &m), path)
	for k, v := range m {
		m[k] = typed(v)
	}
	return m
}

// retiredChinese matches the Chinese words of a glossary block (no word boundaries in
// Chinese: any occurrence counts).
func retiredChinese(t *testing.T, block string) *regexp.Regexp {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "glossary.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "```"+block+"\n")
	require.True(t, ok, "docs/glossary.md has no %s block", block)
	body, _, _ := strings.Cut(rest, "```")
	var words []string
	for _, w := range strings.Split(body, ",") {
		if w = strings.TrimSpace(w); w != "" {
			words = append(words, regexp.QuoteMeta(w))
		}
	}
	require.NotEmpty(t, words)
	return regexp.MustCompile(strings.Join(words, "|"))
}

// TestNoRetiredChineseWords: a Chinese text says each thing with the glossary's word (配额,
// never 额度 or 预算; 待决事项, never 审批).
func TestNoRetiredChineseWords(t *testing.T) {
	t.Parallel()
	retired := retiredChinese(t, "retired-zh")
	var bad []string
	files, err := filepath.Glob(filepath.Join("zh", "*.tmpl"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, line := range strings.Split(shown(string(b), false), "\n") {
			if m := retired.FindString(line); m != "" {
				bad = append(bad, f+":"+itoa(i+1)+": "+m)
			}
		}
	}
	for _, f := range []string{filepath.Join("zh", "words.json"), filepath.Join("web", "words.zh.json")} {
		for k, v := range wordValues(t, f) {
			if m := retired.FindString(v); m != "" {
				bad = append(bad, f+": "+k+": "+m)
			}
		}
	}
	require.Empty(t, bad, "retired Chinese words (docs/glossary.md says what to use)")
}

func TestNoRetiredWords(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"en", "zh"} {
		retired := glossaryWords(t, "retired")
		if lang == "zh" {
			retired = glossaryWords(t, "retired-in-zh")
		}
		var bad []string
		files, err := filepath.Glob(filepath.Join(lang, "*.tmpl"))
		require.NoError(t, err)
		require.NotEmpty(t, files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			for i, line := range strings.Split(shown(string(b), false), "\n") {
				if m := retired.FindStringSubmatch(line); m != nil {
					bad = append(bad, f+":"+itoa(i+1)+": "+m[2])
				}
			}
		}
		for _, f := range []string{filepath.Join(lang, "words.json"), filepath.Join("web", "words."+lang+".json")} {
			for k, v := range wordValues(t, f) {
				if m := retired.FindStringSubmatch(v); m != nil {
					bad = append(bad, f+": "+k+": "+m[2])
				}
			}
		}
		if lang == "en" {
			pages, err := filepath.Glob(filepath.Join("web", "*.html"))
			require.NoError(t, err)
			for _, f := range pages {
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				if m := retired.FindStringSubmatch(shown(string(b), true)); m != nil {
					bad = append(bad, f+": "+m[2])
				}
			}
		}
		require.Empty(t, bad, "retired words in %s texts (docs/glossary.md says what to use)", lang)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestPagesSayNoWordsOfTheirOwn: the workspace's page templates take every word from the word
// lists (words.en.json, words.zh.json), so a Chinese page has no English left in it but the
// names that read the same in both (LoopX, English in the language switch, UTC, SHA-256).
func TestPagesSayNoWordsOfTheirOwn(t *testing.T) {
	t.Parallel()
	word := regexp.MustCompile(`[A-Za-z][A-Za-z'’-]+`)
	same := map[string]bool{"LoopX": true, "English": true, "UTC": true, "SHA-": true}
	pages, err := filepath.Glob(filepath.Join("web", "*.html"))
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	var bad []string
	for _, f := range pages {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, w := range word.FindAllString(shown(string(b), true), -1) {
			if !same[w] {
				bad = append(bad, f+": "+w)
			}
		}
	}
	require.Empty(t, bad, "words written in a page template instead of its word lists")
}

package templates

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"unicode/utf8"
)

//go:embed en/*.tmpl zh/*.tmpl en/words.json zh/words.json web/*.html web/*.json
var files embed.FS

// Languages lists the supported languages; the first, DefaultLang, is the fallback. This is
// the one list: every check of a language (config, chat /lang, goals, the workspace) asks
// IsLang.
func Languages() []string { return []string{DefaultLang, "zh"} }

// DefaultLang is the language used when nothing chose one.
const DefaultLang = "en"

// IsLang reports whether lang is a supported language.
func IsLang(lang string) bool { return slices.Contains(Languages(), lang) }

// MaxCardBytes is Lark's limit for an interactive message body.
const MaxCardBytes = 30 * 1024

// MaxTextBytes is Lark's limit for a text message body.
const MaxTextBytes = 150 * 1024

// Errors callers can test with errors.Is.
var (
	// ErrTooLarge: a rendered card is over MaxCardBytes.
	ErrTooLarge = errors.New("card too large")
	// ErrUnknown: no template of that name (or kind) exists.
	ErrUnknown = errors.New("unknown template")
)

// Kind of a rendered message; the values match the outbox kinds.
const (
	KindText = "text"
	KindCard = "card"
)

// Rendered is a message ready for the outbox.
type Rendered struct {
	Kind    string // KindText or KindCard
	Content string // text, or compact card JSON
}

// Set holds every parsed template. It is immutable and safe for concurrent use.
type Set struct {
	byLang map[string]*template.Template
	names  []string // "<name>.txt" / "<name>.card", sorted
	// words are the short phrases Go code puts into messages and cards (<lang>/words.json):
	// command summaries, reasons, labels. Every language has every key.
	words map[string]map[string]string
	// nonce marks the mentions the templates wrote (markup.go), so text from agents and
	// people can be neutralised without touching them.
	nonce string
}

// New parses the embedded templates and checks that every language has the same set.
func New() (*Set, error) {
	s := &Set{byLang: map[string]*template.Template{}, nonce: newNonce()}
	words, err := readWords(func(lang string) string { return lang + "/words.json" })
	if err != nil {
		return nil, err
	}
	s.words = words
	var first []string
	for _, lang := range Languages() {
		t := template.New(lang).Funcs(s.funcs()).Option("missingkey=error")
		entries, err := fs.ReadDir(files, lang)
		if err != nil {
			return nil, fmt.Errorf("list %s templates: %w", lang, err)
		}
		var names []string
		for _, e := range entries {
			if e.Name() == "words.json" {
				continue // the word list, read by readWords
			}
			base, ok := strings.CutSuffix(e.Name(), ".tmpl")
			if !ok || (!strings.HasSuffix(base, ".txt") && !strings.HasSuffix(base, ".card")) {
				return nil, fmt.Errorf("template %s/%s: name must end in .txt.tmpl or .card.tmpl", lang, e.Name())
			}
			b, err := files.ReadFile(path.Join(lang, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("read template %s/%s: %w", lang, e.Name(), err)
			}
			if _, err := t.New(base).Parse(string(b)); err != nil {
				return nil, fmt.Errorf("parse template %s/%s: %w", lang, e.Name(), err)
			}
			names = append(names, base)
		}
		slices.Sort(names)
		if first == nil {
			first = names
		} else if !slices.Equal(first, names) {
			return nil, fmt.Errorf("templates for %q differ from %q: %v vs %v", lang, Languages()[0], names, first)
		}
		s.byLang[lang] = t
	}
	s.names = first
	return s, nil
}

// Word is the phrase key in lang (<lang>/words.json), formatted with args. A key missing from
// the word lists reads as itself, so a typo shows on screen instead of an empty space; tests
// of each caller catch it.
func (s *Set) Word(lang, key string, args ...any) string {
	w, ok := s.words[Lang(lang)][key]
	if !ok {
		return key
	}
	if len(args) == 0 {
		return w
	}
	return fmt.Sprintf(w, args...)
}

// Reword says text again in lang, where text is the word key as some language said it with
// its arguments (a text LoopX stored when it wrote it, such as a stall gate's question): the
// arguments are read back by that word's form. Only %d and %s arguments are read back. ok is
// false, and text comes back as it is, when no language's word made text (the word changed
// since, or someone else wrote it).
func (s *Set) Reword(lang, key, text string) (string, bool) {
	for _, l := range Languages() {
		w, ok := s.words[l][key]
		if !ok {
			continue
		}
		if args, ok := unformat(w, text); ok {
			return s.Word(lang, key, args...), true
		}
	}
	return text, false
}

// formVerb is a verb unformat reads back.
var formVerb = regexp.MustCompile(`%[ds]`)

// unformat reads the arguments of format back from text: a whole number for each %d, the
// text for each %s. ok is false when text is not format said with some arguments.
func unformat(format, text string) ([]any, bool) {
	verbs := formVerb.FindAllString(format, -1)
	parts := formVerb.Split(format, -1)
	var re strings.Builder
	re.WriteString("^")
	for i, p := range parts {
		re.WriteString(regexp.QuoteMeta(p))
		if i < len(verbs) {
			if verbs[i] == "%d" {
				re.WriteString(`(-?[0-9]+)`)
			} else {
				re.WriteString(`(.+?)`)
			}
		}
	}
	re.WriteString("$")
	m := regexp.MustCompile(re.String()).FindStringSubmatch(text)
	if m == nil {
		return nil, false
	}
	args := make([]any, len(verbs))
	for i, v := range verbs {
		if v == "%d" {
			n, err := strconv.Atoi(m[i+1])
			if err != nil {
				return nil, false
			}
			args[i] = n
		} else {
			args[i] = m[i+1]
		}
	}
	return args, true
}

// readWords reads one word list per language from path(lang) and checks that every language
// has the same keys.
func readWords(path func(lang string) string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	var first []string
	for _, lang := range Languages() {
		b, err := files.ReadFile(path(lang))
		if err != nil {
			return nil, fmt.Errorf("read %s words: %w", lang, err)
		}
		var w map[string]string
		if err := json.Unmarshal(b, &w); err != nil {
			return nil, fmt.Errorf("parse %s: %w", path(lang), err)
		}
		keys := slices.Sorted(maps.Keys(w))
		if first == nil {
			first = keys
		} else if !slices.Equal(first, keys) {
			return nil, fmt.Errorf("words of %s differ from those of %s", path(lang), path(DefaultLang))
		}
		out[lang] = w
	}
	return out, nil
}

// Names lists every template as "<name>.txt" or "<name>.card".
func (s *Set) Names() []string { return slices.Clone(s.names) }

// Has reports whether a template of that name and kind ("txt" or "card") exists.
func (s *Set) Has(name, kind string) bool {
	_, ok := slices.BinarySearch(s.names, name+"."+kind)
	return ok
}

// Lang returns lang when it is supported and the fallback language otherwise.
func Lang(lang string) string {
	if IsLang(lang) {
		return lang
	}
	return DefaultLang
}

// Text renders the plain-text template name in lang.
func (s *Set) Text(lang, name string, data any) (string, error) {
	out, err := s.exec(lang, name, "txt", data)
	if err != nil {
		return "", err
	}
	text := strings.TrimSpace(s.finishText(out))
	if text == "" {
		return "", fmt.Errorf("render %s/%s.txt: empty message", Lang(lang), name)
	}
	if len(text) > MaxTextBytes {
		text = truncBytes(text, MaxTextBytes-len("…")) + "…"
	}
	return text, nil
}

// Card renders the card template name in lang and returns compact card JSON 2.0. It fails
// with ErrTooLarge when the card is over MaxCardBytes.
func (s *Set) Card(lang, name string, data any) (string, error) {
	out, err := s.exec(lang, name, "card", data)
	if err != nil {
		return "", err
	}
	if !json.Valid([]byte(out)) {
		return "", fmt.Errorf("render %s/%s.card: output is not valid JSON", Lang(lang), name)
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal([]byte(out), &head); err != nil || head.Schema != "2.0" {
		return "", fmt.Errorf("render %s/%s.card: card must be a JSON object with \"schema\":\"2.0\"", Lang(lang), name)
	}
	card, err := s.finishCard([]byte(out))
	if err != nil {
		return "", fmt.Errorf("render %s/%s.card: %w", Lang(lang), name, err)
	}
	if len(card) > MaxCardBytes {
		return "", fmt.Errorf("render %s/%s.card: %d bytes, limit %d: %w", Lang(lang), name, len(card), MaxCardBytes, ErrTooLarge)
	}
	return string(card), nil
}

// Render renders name as a card when a card template exists and fits, and as text otherwise
// (a card over the size limit falls back to the text template of the same name).
func (s *Set) Render(lang, name string, data any) (Rendered, error) {
	if s.Has(name, "card") {
		card, err := s.Card(lang, name, data)
		if err == nil {
			return Rendered{Kind: KindCard, Content: card}, nil
		}
		if !errors.Is(err, ErrTooLarge) || !s.Has(name, "txt") {
			return Rendered{}, err
		}
	}
	text, err := s.Text(lang, name, data)
	if err != nil {
		return Rendered{}, err
	}
	return Rendered{Kind: KindText, Content: text}, nil
}

func (s *Set) exec(lang, name, kind string, data any) (string, error) {
	lang = Lang(lang)
	full := name + "." + kind
	if !s.Has(name, kind) {
		return "", fmt.Errorf("render %s/%s: %w", lang, full, ErrUnknown)
	}
	var buf bytes.Buffer
	if err := s.byLang[lang].ExecuteTemplate(&buf, full, data); err != nil {
		return "", fmt.Errorf("render %s/%s: %w", lang, full, err)
	}
	return buf.String(), nil
}

func (s *Set) funcs() template.FuncMap {
	return template.FuncMap{
		// json writes v as a JSON value; strings come out quoted and escaped.
		"json": func(v any) (string, error) {
			b, err := json.Marshal(v)
			if err != nil {
				return "", fmt.Errorf("json: %w", err)
			}
			return string(b), nil
		},
		// plain is kept for the templates' readability: every rendered message is made
		// safe as a whole (markup.go).
		"plain":  func(v string) string { return v },
		"at":     func(openID string) string { return s.mention('t', openID) },
		"cardAt": func(openID string) string { return s.mention('c', openID) },
		"cardAts": func(ids any) string {
			list := toStrings(ids)
			for i, id := range list {
				list[i] = s.mention('c', id)
			}
			return strings.Join(slices.DeleteFunc(list, func(v string) bool { return v == "" }), " ")
		},
		"join": func(list any, sep string) string { return strings.Join(toStrings(list), sep) },
		"add":  func(a, b int) int { return a + b },
		// plural picks the English form for a count: {{plural .N "turn" "turns"}}.
		"plural": func(n any, one, other string) string {
			if fmt.Sprint(n) == "1" {
				return one
			}
			return other
		},
		"trunc": func(n int, s string) string {
			if utf8.RuneCountInString(s) <= n {
				return s
			}
			r := []rune(s)
			return string(r[:n]) + "…"
		},
	}
}

// toStrings accepts []string and the []any that decoded JSON (golden sample data) gives.
func toStrings(v any) []string {
	switch l := v.(type) {
	case []string:
		return slices.Clone(l)
	case []any:
		out := make([]string, len(l))
		for i, x := range l {
			out[i] = fmt.Sprint(x)
		}
		return out
	case nil:
		return nil
	}
	return []string{fmt.Sprint(v)}
}

// idOnly keeps the characters an open_id may hold, so an id cannot close the tag around it.
func idOnly(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return -1
	}, s)
}

func truncBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

package templates

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"net/url"
	"strings"
	"time"
)

// The web workspace's pages: HTML templates (html/template, so every value is escaped for
// its context) sharing one layout, and every word they show in web/words.<lang>.json.

// pageNames are the pages of the workspace; each is web/<name>.html defining "content".
var pageNames = []string{"home", "goals", "goal", "turn", "proposal", "signin", "notice", "replan", "defaults"}

// Pages renders the workspace's pages in every language. It is immutable and safe for
// concurrent use.
type Pages struct {
	byLang map[string]map[string]*template.Template
	words  map[string]map[string]string
}

// NewPages parses the embedded pages and word lists and checks that every language has
// every word.
func NewPages() (*Pages, error) {
	p := &Pages{byLang: map[string]map[string]*template.Template{}, words: map[string]map[string]string{}}
	words, err := readWords(func(lang string) string { return "web/words." + lang + ".json" })
	if err != nil {
		return nil, err
	}
	p.words = words
	for _, lang := range Languages() {
		layout, err := files.ReadFile("web/layout.html")
		if err != nil {
			return nil, fmt.Errorf("read layout: %w", err)
		}
		p.byLang[lang] = map[string]*template.Template{}
		for _, name := range pageNames {
			body, err := files.ReadFile("web/" + name + ".html")
			if err != nil {
				return nil, fmt.Errorf("read page %s: %w", name, err)
			}
			t := template.New(name).Funcs(p.funcs(lang)).Option("missingkey=error")
			if _, err := t.Parse(string(layout)); err != nil {
				return nil, fmt.Errorf("parse layout: %w", err)
			}
			if _, err := t.Parse(string(body)); err != nil {
				return nil, fmt.Errorf("parse page %s: %w", name, err)
			}
			p.byLang[lang][name] = t
		}
	}
	return p, nil
}

// Render writes page in lang with data. The page is rendered into a buffer first, so a
// failing template writes nothing.
func (p *Pages) Render(w io.Writer, lang, page string, data any) error {
	t, ok := p.byLang[Lang(lang)][page]
	if !ok {
		return fmt.Errorf("render page %s: %w", page, ErrUnknown)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		return fmt.Errorf("render page %s/%s: %w", Lang(lang), page, err)
	}
	_, err := buf.WriteTo(w)
	return err
}

// Word is the text of key in lang, formatted with args; an unknown key reads as itself.
func (p *Pages) Word(lang, key string, args ...any) string {
	s, ok := p.words[Lang(lang)][key]
	if !ok {
		return key
	}
	if len(args) == 0 {
		return s
	}
	return fmt.Sprintf(s, args...)
}

func (p *Pages) funcs(lang string) template.FuncMap {
	return template.FuncMap{
		"t": func(key string, args ...any) string { return p.Word(lang, key, args...) },
		"ago": func(now, t time.Time) string {
			return Ago(lang, now.Sub(t))
		},
		// since says an age with its word: "4 min ago", "4 分钟前".
		"since": func(now, t time.Time) string { return p.Word(lang, "n_ago", Ago(lang, now.Sub(t))) },
		// until says a time to come: "in 12 min", "12 分钟后".
		"until": func(now, t time.Time) string { return p.Word(lang, "in_time", Ago(lang, t.Sub(now))) },
		// plural picks key_one or key_other by n and formats it with n: "1 goal", "2 goals".
		"plural": func(n int, key string) string {
			if n == 1 {
				return p.Word(lang, key+"_one", n)
			}
			return p.Word(lang, key+"_other", n)
		},
		"schedule": func(spec string) string { return Schedule(lang, spec) },
		// isURL tells an evidence reference people can open (http or https) from a path or a
		// command, which the page shows as code.
		"isURL": func(ref string) bool {
			u, err := url.Parse(ref)
			return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
		},
		// word says a value from the state by its word prefix+value (turn states, inbox
		// modes, audit actions, skip reasons); a value with no word yet reads as itself with
		// spaces, never as a key.
		"word": func(prefix, value string) string {
			if w, ok := p.words[Lang(lang)][prefix+value]; ok {
				return w
			}
			return strings.NewReplacer("_", " ", ".", " ").Replace(value)
		},
		"add": func(a, b int) int { return a + b },
		// actor says who did something in an audit row: a person's open_id as it is, an
		// agent by its name, the admin, the scheduler and the system in words.
		"actor": func(actor string) string {
			if a, ok := strings.CutPrefix(actor, "agent:"); ok {
				return p.Word(lang, "actor_agent", a[strings.LastIndex(a, "/")+1:])
			}
			if w, ok := p.words[Lang(lang)]["actor_"+actor]; ok {
				return w
			}
			return actor
		},
		"dur": func(a, b time.Time) string { return Ago(lang, b.Sub(a)) },
		"at": func(t time.Time, tz string) string {
			loc, err := time.LoadLocation(tz)
			if err != nil {
				loc = time.UTC
			}
			return t.In(loc).Format("2006-01-02 15:04") + " " + tz
		},
		"pct": func(a, b int) int {
			if b <= 0 {
				return 100
			}
			return min(100, a*100/b)
		},
		"bar":   func(v, h int) int { return min(h, v*6) },
		"mul":   func(a, b int) int { return a * b },
		"sub":   func(a, b int) int { return a - b },
		"list":  func(v ...string) []string { return v },
		"join":  func(v []string, sep string) string { return strings.Join(v, sep) },
		"deref": func(t *time.Time) time.Time { return derefTime(t) },
		// args passes several values to a shared template: args "H" .Handoff "Now" $.Now.
		"args": func(kv ...any) (map[string]any, error) {
			if len(kv)%2 != 0 {
				return nil, fmt.Errorf("args takes pairs, got %d values", len(kv))
			}
			m := make(map[string]any, len(kv)/2)
			for i := 0; i < len(kv); i += 2 {
				k, ok := kv[i].(string)
				if !ok {
					return nil, fmt.Errorf("args: key %v is not a string", kv[i])
				}
				m[k] = kv[i+1]
			}
			return m, nil
		},
		"bytes": humanBytes,
	}
}

// humanBytes writes a file size as people read it: 512 B, 3.4 KiB, 20 MiB.
func humanBytes(n int64) string {
	f, unit := float64(n), "B"
	for _, u := range []string{"KiB", "MiB", "GiB"} {
		if f < 1024 {
			break
		}
		f, unit = f/1024, u
	}
	if unit == "B" {
		return fmt.Sprintf("%d B", n)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", f), ".0") + " " + unit
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// Ago says a duration the way people read an age: 45 s, 12 min, 3 h, 2 d.
func Ago(lang string, d time.Duration) string {
	zh := lang == "zh"
	switch {
	case d < time.Minute:
		n := max(int(d.Seconds()), 0)
		if zh {
			return fmt.Sprintf("%d 秒", n)
		}
		return fmt.Sprintf("%d s", n)
	case d < time.Hour:
		if zh {
			return fmt.Sprintf("%d 分钟", int(d.Minutes()))
		}
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		if zh {
			return fmt.Sprintf("%d 小时", int(d.Hours()))
		}
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
	if zh {
		return fmt.Sprintf("%d 天", int(d.Hours()/24))
	}
	return fmt.Sprintf("%d d", int(d.Hours()/24))
}

package sandbox

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// ANSI styles of the terminal rendering; each is switched off by its own code so that
// nested styles survive.
const (
	ansiBold      = "\x1b[1m"
	ansiBoldOff   = "\x1b[22m"
	ansiItalic    = "\x1b[3m"
	ansiItalicOff = "\x1b[23m"
	ansiUnder     = "\x1b[4m"
	ansiUnderOff  = "\x1b[24m"
	ansiStrike    = "\x1b[9m"
	ansiStrikeOff = "\x1b[29m"
	ansiCode      = "\x1b[36m"
	ansiCodeOff   = "\x1b[39m"
)

// mdRules are the markdown patterns of the terminal renderer, compiled on first use rather
// than when the binary starts: only `loopx chat` renders cards. Only *x* is italic (a single
// underscore is common in ids such as ou_demo_owner).
type mdRules struct {
	heading   *regexp.Regexp
	rule      *regexp.Regexp
	bullet    *regexp.Regexp
	ordered   *regexp.Regexp
	quote     *regexp.Regexp
	link      *regexp.Regexp
	bold      *regexp.Regexp
	strike    *regexp.Regexp
	italic    *regexp.Regexp
	font      *regexp.Regexp
	textTag   *regexp.Regexp
	lineBreak *regexp.Regexp
	escape    *regexp.Regexp
}

var markdown = sync.OnceValue(func() *mdRules {
	return &mdRules{
		heading:   regexp.MustCompile(`^#{1,6}\s+(.*)$`),
		rule:      regexp.MustCompile(`^\s*(?:-{3,}|\*{3,}|_{3,})\s*$`),
		bullet:    regexp.MustCompile(`^(\s*)[-*+]\s+(.*)$`),
		ordered:   regexp.MustCompile(`^(\s*)(\d{1,9})[.)]\s+(.*)$`),
		quote:     regexp.MustCompile(`^>\s?(.*)$`),
		link:      regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`),
		bold:      regexp.MustCompile(`\*\*([^*]+?)\*\*|__([^_]+?)__`),
		strike:    regexp.MustCompile(`~~([^~]+?)~~`),
		italic:    regexp.MustCompile(`\*([^*\s](?:[^*]*[^*\s])?)\*`),
		font:      regexp.MustCompile(`(?i)<font\b[^>]*>(.*?)</font>`),
		textTag:   regexp.MustCompile(`(?i)<text_tag\b[^>]*>(.*?)</text_tag>`),
		lineBreak: regexp.MustCompile(`(?i)<br\s*/?>`),
		escape:    regexp.MustCompile(`\\([\\*_~\x60\[\]()#>+\-.!<])`),
	}
})

// RenderMarkdown renders Lark card markdown for a terminal, one string per output line:
// headings and **bold** in bold, *italic*, ~~strike~~, `code` and fenced code blocks,
// [links](url) as the text followed by the URL, bullets as •, numbered items kept, > quotes
// and --- rules drawn, <font> and <text_tag> reduced to their text. With ansi false the
// markers are dropped and the text is left plain (for pipes and logs); with ansi true the
// styles are ANSI escape sequences. Mentions (<at>) are left to the caller.
func RenderMarkdown(src string, ansi bool) []string {
	md := markdown()
	st := style{ansi: ansi}
	var out []string
	inFence := false
	for _, line := range strings.Split(md.lineBreak.ReplaceAllString(src, "\n"), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			out = append(out, "    "+st.wrap(line, ansiCode, ansiCodeOff))
			continue
		}
		switch {
		case md.rule.MatchString(line):
			out = append(out, "────")
		case md.heading.MatchString(line):
			out = append(out, st.wrap(st.inline(md.heading.FindStringSubmatch(line)[1]), ansiBold, ansiBoldOff))
		case md.bullet.MatchString(line):
			m := md.bullet.FindStringSubmatch(line)
			out = append(out, m[1]+"• "+st.inline(m[2]))
		case md.ordered.MatchString(line):
			m := md.ordered.FindStringSubmatch(line)
			out = append(out, m[1]+m[2]+". "+st.inline(m[3]))
		case md.quote.MatchString(line):
			out = append(out, "│ "+st.inline(md.quote.FindStringSubmatch(line)[1]))
		default:
			out = append(out, st.inline(line))
		}
	}
	return out
}

type style struct{ ansi bool }

func (s style) wrap(text, on, off string) string {
	if !s.ansi || text == "" {
		return text
	}
	return on + text + off
}

// inline renders the spans of one line. Code spans are cut out first: nothing inside them is
// markdown.
func (s style) inline(line string) string {
	var b strings.Builder
	for i, part := range strings.Split(line, "`") {
		if i%2 == 1 && i < strings.Count(line, "`") {
			b.WriteString(s.wrap(part, ansiCode, ansiCodeOff))
			continue
		}
		if i%2 == 1 {
			b.WriteString("`") // an unpaired backtick is a character
		}
		b.WriteString(s.spans(part))
	}
	return b.String()
}

func (s style) spans(t string) string {
	md := markdown()
	// Escaped characters are set aside so that no rule below sees them.
	var escaped []string
	t = md.escape.ReplaceAllStringFunc(t, func(e string) string {
		escaped = append(escaped, e[1:])
		return "\x00" + strconv.Itoa(len(escaped)-1) + "\x00"
	})
	t = md.font.ReplaceAllString(t, "$1")
	t = md.textTag.ReplaceAllString(t, "[$1]")
	t = md.link.ReplaceAllStringFunc(t, func(l string) string {
		m := md.link.FindStringSubmatch(l)
		if m[1] == "" || m[1] == m[2] {
			return s.wrap(m[2], ansiUnder, ansiUnderOff)
		}
		return s.wrap(m[1], ansiUnder, ansiUnderOff) + " (" + m[2] + ")"
	})
	t = md.bold.ReplaceAllStringFunc(t, func(x string) string {
		m := md.bold.FindStringSubmatch(x)
		return s.wrap(m[1]+m[2], ansiBold, ansiBoldOff)
	})
	t = md.strike.ReplaceAllStringFunc(t, func(x string) string {
		return s.wrap(md.strike.FindStringSubmatch(x)[1], ansiStrike, ansiStrikeOff)
	})
	t = md.italic.ReplaceAllStringFunc(t, func(x string) string {
		return s.wrap(md.italic.FindStringSubmatch(x)[1], ansiItalic, ansiItalicOff)
	})
	for i, e := range escaped {
		t = strings.Replace(t, "\x00"+strconv.Itoa(i)+"\x00", e, 1)
	}
	return t
}

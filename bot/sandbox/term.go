package sandbox

import (
	"regexp"
	"strconv"
	"strings"
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

var (
	mdHeading = regexp.MustCompile(`^#{1,6}\s+(.*)$`)
	mdRule    = regexp.MustCompile(`^\s*(?:-{3,}|\*{3,}|_{3,})\s*$`)
	mdBullet  = regexp.MustCompile(`^(\s*)[-*+]\s+(.*)$`)
	mdOrdered = regexp.MustCompile(`^(\s*)(\d{1,9})[.)]\s+(.*)$`)
	mdQuote   = regexp.MustCompile(`^>\s?(.*)$`)
	mdLink    = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)
	mdBold    = regexp.MustCompile(`\*\*([^*]+?)\*\*|__([^_]+?)__`)
	mdStrike  = regexp.MustCompile(`~~([^~]+?)~~`)
	// Only *x* is italic: a single underscore is common in ids (ou_demo_owner).
	mdItalic  = regexp.MustCompile(`\*([^*\s](?:[^*]*[^*\s])?)\*`)
	mdFont    = regexp.MustCompile(`(?i)<font\b[^>]*>(.*?)</font>`)
	mdTextTag = regexp.MustCompile(`(?i)<text_tag\b[^>]*>(.*?)</text_tag>`)
	mdBreak   = regexp.MustCompile(`(?i)<br\s*/?>`)
	mdEscape  = regexp.MustCompile(`\\([\\*_~\x60\[\]()#>+\-.!<])`)
)

// RenderMarkdown renders Lark card markdown for a terminal, one string per output line:
// headings and **bold** in bold, *italic*, ~~strike~~, `code` and fenced code blocks,
// [links](url) as the text followed by the URL, bullets as •, numbered items kept, > quotes
// and --- rules drawn, <font> and <text_tag> reduced to their text. With ansi false the
// markers are dropped and the text is left plain (for pipes and logs); with ansi true the
// styles are ANSI escape sequences. Mentions (<at>) are left to the caller.
func RenderMarkdown(src string, ansi bool) []string {
	st := style{ansi: ansi}
	var out []string
	inFence := false
	for _, line := range strings.Split(mdBreak.ReplaceAllString(src, "\n"), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			out = append(out, "    "+st.wrap(line, ansiCode, ansiCodeOff))
			continue
		}
		switch {
		case mdRule.MatchString(line):
			out = append(out, "────")
		case mdHeading.MatchString(line):
			out = append(out, st.wrap(st.inline(mdHeading.FindStringSubmatch(line)[1]), ansiBold, ansiBoldOff))
		case mdBullet.MatchString(line):
			m := mdBullet.FindStringSubmatch(line)
			out = append(out, m[1]+"• "+st.inline(m[2]))
		case mdOrdered.MatchString(line):
			m := mdOrdered.FindStringSubmatch(line)
			out = append(out, m[1]+m[2]+". "+st.inline(m[3]))
		case mdQuote.MatchString(line):
			out = append(out, "│ "+st.inline(mdQuote.FindStringSubmatch(line)[1]))
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
	// Escaped characters are set aside so that no rule below sees them.
	var escaped []string
	t = mdEscape.ReplaceAllStringFunc(t, func(e string) string {
		escaped = append(escaped, e[1:])
		return "\x00" + strconv.Itoa(len(escaped)-1) + "\x00"
	})
	t = mdFont.ReplaceAllString(t, "$1")
	t = mdTextTag.ReplaceAllString(t, "[$1]")
	t = mdLink.ReplaceAllStringFunc(t, func(l string) string {
		m := mdLink.FindStringSubmatch(l)
		if m[1] == "" || m[1] == m[2] {
			return s.wrap(m[2], ansiUnder, ansiUnderOff)
		}
		return s.wrap(m[1], ansiUnder, ansiUnderOff) + " (" + m[2] + ")"
	})
	t = mdBold.ReplaceAllStringFunc(t, func(x string) string {
		m := mdBold.FindStringSubmatch(x)
		return s.wrap(m[1]+m[2], ansiBold, ansiBoldOff)
	})
	t = mdStrike.ReplaceAllStringFunc(t, func(x string) string {
		return s.wrap(mdStrike.FindStringSubmatch(x)[1], ansiStrike, ansiStrikeOff)
	})
	t = mdItalic.ReplaceAllStringFunc(t, func(x string) string {
		return s.wrap(mdItalic.FindStringSubmatch(x)[1], ansiItalic, ansiItalicOff)
	})
	for i, e := range escaped {
		t = strings.Replace(t, "\x00"+strconv.Itoa(i)+"\x00", e, 1)
	}
	return t
}

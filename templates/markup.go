package templates

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"regexp"
	"strings"
)

// Lark markup in what the bot sends. A text message renders <at user_id="…"> mentions, a
// few style tags and [text](url) links; card markdown renders <at id=…>, <font>, <link>,
// <text_tag> and other tags, [text](url) links and ![alt](image) images. Only LoopX may write
// such markup, and only through the template functions at, cardAt and cardAts: whatever an
// agent or a person wrote (a gate's question, options, answer and comment, a todo, a reply)
// is shown as it was typed, never as a mention of someone or a link in the bot's name.
//
// The template functions emit a placeholder that carries the set's random nonce; after a
// template ran, every Lark tag and link in the output is neutralised, then the placeholders
// become the mentions they stand for. Text that does not go through a template (an agent's
// inbox reply) goes through SafeText.

// larkTag matches the start of a tag Lark renders in text or card markdown (case and spaces
// as Lark's parser tolerates them): mentions, styles, links, people, tags, times, images.
var larkTag = regexp.MustCompile(`(?i)</?(at|a|b|i|u|s|em|strong|del|br|hr|font|link|text_tag|person|number_tag|local_datetime|img|span|p|h[1-6]|code|pre)\b`)

// larkLink matches a markdown link or image: [text](target) and ![alt](target).
var larkLink = regexp.MustCompile(`!?\[([^\[\]\n]*)\]\(`)

// larkEntity matches an HTML character reference, which card markdown may decode into a
// tag's angle bracket.
var larkEntity = regexp.MustCompile(`&(#[0-9]+|#[xX][0-9a-fA-F]+|[a-zA-Z]+);`)

// SafeText returns s with every piece of Lark markup made inert: a tag's < becomes ‹, a
// link's brackets become full-width ［］, and a character reference's & becomes ＆. What a
// person reads is unchanged but for those characters.
func SafeText(s string) string {
	if !strings.ContainsAny(s, "<[&") {
		return s
	}
	s = larkTag.ReplaceAllStringFunc(s, func(m string) string { return "‹" + m[1:] })
	s = larkLink.ReplaceAllStringFunc(s, func(m string) string {
		m = strings.Replace(m, "[", "［", 1)
		return strings.Replace(m, "](", "］(", 1)
	})
	return larkEntity.ReplaceAllStringFunc(s, func(m string) string { return "＆" + m[1:] })
}

// Mention placeholders: \uE000<nonce><kind>:<open_id>\uE001, kind t (text) or c (card).
const (
	markOpen  = "\uE000"
	markClose = "\uE001"
)

func newNonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// mention is the placeholder of a mention of openID; "" for an id that is empty or names
// everyone (LoopX never mentions everyone).
func (s *Set) mention(kind byte, openID string) string {
	id := idOnly(openID)
	if id == "" || strings.EqualFold(id, "all") {
		return ""
	}
	return markOpen + s.nonce + string(kind) + ":" + id + markClose
}

// restore turns this set's placeholders in out into Lark mentions; anything else between the
// marks (a forged placeholder) is dropped.
func (s *Set) restore(out string) string {
	if !strings.Contains(out, markOpen) {
		return out
	}
	var b strings.Builder
	for {
		i := strings.Index(out, markOpen)
		if i < 0 {
			b.WriteString(out)
			return b.String()
		}
		b.WriteString(out[:i])
		out = out[i+len(markOpen):]
		j := strings.Index(out, markClose)
		if j < 0 {
			return b.String()
		}
		ph := out[:j]
		out = out[j+len(markClose):]
		rest, ok := strings.CutPrefix(ph, s.nonce)
		if !ok || len(rest) < 2 || rest[1] != ':' {
			continue
		}
		switch id := idOnly(rest[2:]); rest[0] {
		case 't':
			b.WriteString(`<at user_id="` + id + `"></at>`)
		case 'c':
			b.WriteString("<at id=" + id + "></at>")
		}
	}
}

// finishText makes a rendered text message safe: markup neutralised, mentions restored.
func (s *Set) finishText(out string) string { return s.restore(SafeText(out)) }

// finishCard does the same for every string of a rendered card, except the values its
// buttons send back (an option must come back exactly as it was asked). It rewrites the
// card token by token, so members keep their order.
func (s *Set) finishCard(out []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var b bytes.Buffer
	// Per open container: is it an object, and is the next string in it a key.
	type level struct{ object, key bool }
	var stack []level
	skip := 0 // depth inside a "value" member, where nothing is rewritten
	pendingSkip := false
	comma := func() {
		if n := b.Len(); n > 0 {
			if c := b.Bytes()[n-1]; c != '{' && c != '[' && c != ':' {
				b.WriteByte(',')
			}
		}
	}
	for {
		t, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		top := len(stack) - 1
		isKey := top >= 0 && stack[top].object && stack[top].key
		switch v := t.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				comma()
				b.WriteByte(byte(v))
				if pendingSkip || skip > 0 {
					skip++
				}
				pendingSkip = false
				stack = append(stack, level{object: v == '{', key: v == '{'})
				continue
			}
			b.WriteByte(byte(v))
			stack = stack[:top]
			if skip > 0 {
				skip--
			}
		case string:
			if isKey {
				comma()
				writeJSON(&b, v)
				b.WriteByte(':')
				stack[top].key = false
				pendingSkip = v == "value" && skip == 0
				continue
			}
			comma()
			if skip == 0 && !pendingSkip {
				v = s.finishText(v)
			}
			writeJSON(&b, v)
		default:
			comma()
			writeJSON(&b, v)
		}
		pendingSkip = false
		if top = len(stack) - 1; top >= 0 && stack[top].object {
			stack[top].key = true
		}
	}
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, v any) {
	enc, _ := json.Marshal(v) // strings, numbers, booleans and null always encode
	b.Write(enc)
}

package sandbox

import (
	"encoding/json"
	"slices"
	"strings"
)

// Button is one clickable button of a card.
type Button struct {
	N     int            `json:"n"` // 1-based position in card order
	Text  string         `json:"text"`
	Value map[string]any `json:"value"` // the callback value sent on click
}

// CardView is a card read for a terminal: its title, text elements and buttons.
type CardView struct {
	Title   string     `json:"title,omitempty"`
	Lines   []CardLine `json:"lines,omitempty"`
	Buttons []Button   `json:"buttons,omitempty"`
}

// CardLine is one text element of a card: Lark markdown (the markdown and lark_md tags, see
// RenderMarkdown) or plain text, as the card gave it.
type CardLine struct {
	Text     string `json:"text"`
	Markdown bool   `json:"markdown,omitempty"`
}

// RenderCard renders card JSON (2.0 or 1.0) as text. It reads header.title, markdown,
// plain_text and lark_md contents and buttons (value from a callback behavior, or the 1.0
// "value"), in document order. A template card renders as its template id.
func RenderCard(content string) CardView {
	var root map[string]any
	if json.Unmarshal([]byte(content), &root) != nil {
		return CardView{Lines: []CardLine{{Text: content}}}
	}
	var v CardView
	if root["type"] == "template" {
		data, _ := root["data"].(map[string]any)
		id, _ := data["template_id"].(string)
		v.Title = "[template card " + id + "]"
		return v
	}
	if h, isMap := root["header"].(map[string]any); isMap {
		v.Title = textOf(h["title"])
	}
	delete(root, "header")
	walkCard(root, &v)
	return v
}

// textOf reads the content of a text object ({"tag":"plain_text","content":"…"}) or a string.
func textOf(x any) string {
	switch t := x.(type) {
	case string:
		return t
	case map[string]any:
		c, _ := t["content"].(string)
		return c
	}
	return ""
}

// cardKeyOrder walks the structural keys in the order Lark lays them out, then the rest
// sorted, so rendering never depends on map order.
func cardKeyOrder(m map[string]any) []string {
	first := []string{"body", "elements", "columns", "actions", "text", "fields"}
	keys := make([]string, 0, len(m))
	for _, k := range first {
		if _, has := m[k]; has {
			keys = append(keys, k)
		}
	}
	var rest []string
	for k := range m {
		if !slices.Contains(first, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(keys, rest...)
}

func walkCard(x any, v *CardView) {
	switch t := x.(type) {
	case []any:
		for _, e := range t {
			walkCard(e, v)
		}
	case map[string]any:
		tag, _ := t["tag"].(string)
		switch tag {
		case "button":
			v.Buttons = append(v.Buttons, Button{N: len(v.Buttons) + 1, Text: textOf(t["text"]), Value: buttonValue(t)})
			return
		case "markdown", "plain_text", "lark_md":
			if c, isStr := t["content"].(string); isStr && strings.TrimSpace(c) != "" {
				v.Lines = append(v.Lines, CardLine{Text: c, Markdown: tag != "plain_text"})
			}
			return
		case "hr":
			v.Lines = append(v.Lines, CardLine{Text: "────"})
			return
		}
		for _, k := range cardKeyOrder(t) {
			if k == "i18n_elements" || k == "i18n_header" || k == "config" || k == "behaviors" {
				continue
			}
			walkCard(t[k], v)
		}
	}
}

func buttonValue(b map[string]any) map[string]any {
	if behaviors, isList := b["behaviors"].([]any); isList {
		for _, x := range behaviors {
			if bh, isMap := x.(map[string]any); isMap && bh["type"] == "callback" {
				if val, isMap := bh["value"].(map[string]any); isMap {
					return val
				}
			}
		}
	}
	if val, isMap := b["value"].(map[string]any); isMap {
		return val
	}
	return map[string]any{}
}

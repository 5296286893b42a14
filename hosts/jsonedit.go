package hosts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// node is a JSON value that keeps the order of object members, so a file merged into keeps
// the user's layout: members stay where they were and new ones go last.
type node struct {
	obj    []member // object members in order (isObj)
	arr    []*node  // array items (isArr)
	scalar json.RawMessage
	isObj  bool
	isArr  bool
}

type member struct {
	key string
	val *node
}

// parseJSON reads a JSON document. Comments and trailing commas (JSONC) are refused: they
// would be lost on the way back.
func parseJSON(b []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n, err := readNode(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return n, nil
}

func readNode(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &node{isObj: true}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", kt)
				}
				v, err := readNode(dec)
				if err != nil {
					return nil, err
				}
				n.obj = append(n.obj, member{key: k, val: v})
			}
			_, err := dec.Token() // '}'
			return n, err
		case '[':
			n := &node{isArr: true}
			for dec.More() {
				v, err := readNode(dec)
				if err != nil {
					return nil, err
				}
				n.arr = append(n.arr, v)
			}
			_, err := dec.Token() // ']'
			return n, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		raw, err := marshal(t)
		if err != nil {
			return nil, err
		}
		return &node{scalar: raw}, nil
	}
}

// fromValue converts a Go value (maps are written with sorted keys) into a node.
func fromValue(v any) (*node, error) {
	b, err := marshal(v)
	if err != nil {
		return nil, err
	}
	return parseJSON(b)
}

// marshal encodes v without HTML escaping (a config file is not a web page).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func (n *node) get(key string) *node {
	for _, m := range n.obj {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

func (n *node) set(key string, v *node) {
	for i, m := range n.obj {
		if m.key == key {
			n.obj[i].val = v
			return
		}
	}
	n.obj = append(n.obj, member{key: key, val: v})
}

func (n *node) del(key string) {
	for i, m := range n.obj {
		if m.key == key {
			n.obj = append(n.obj[:i], n.obj[i+1:]...)
			return
		}
	}
}

func (n *node) empty() bool { return (n.isObj && len(n.obj) == 0) || (n.isArr && len(n.arr) == 0) }

// canonical is n's value as compact JSON with sorted keys: equal values, equal bytes.
func (n *node) canonical() string {
	var v any
	_ = json.Unmarshal([]byte(n.compact()), &v)
	b, _ := marshal(v)
	return string(b)
}

func (n *node) compact() string {
	var b strings.Builder
	n.write(&b, "", "", false)
	return b.String()
}

// format writes n indented by unit per level, as json.MarshalIndent does.
func (n *node) format(unit string) []byte {
	var b strings.Builder
	n.write(&b, "", unit, true)
	return []byte(b.String())
}

func (n *node) write(b *strings.Builder, indent, unit string, pretty bool) {
	nl := func(level string) {
		if pretty {
			b.WriteString("\n" + level)
		}
	}
	switch {
	case n.isObj:
		if len(n.obj) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{")
		for i, m := range n.obj {
			if i > 0 {
				b.WriteString(",")
			}
			nl(indent + unit)
			k, _ := marshal(m.key)
			b.Write(k)
			b.WriteString(":")
			if pretty {
				b.WriteString(" ")
			}
			m.val.write(b, indent+unit, unit, pretty)
		}
		nl(indent)
		b.WriteString("}")
	case n.isArr:
		if len(n.arr) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[")
		for i, v := range n.arr {
			if i > 0 {
				b.WriteString(",")
			}
			nl(indent + unit)
			v.write(b, indent+unit, unit, pretty)
		}
		nl(indent)
		b.WriteString("]")
	default:
		b.Write(n.scalar)
	}
}

// indentUnit guesses a file's indentation from its first indented line (two spaces when it
// has none).
func indentUnit(b []byte) string {
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if trimmed != "" && len(trimmed) < len(line) {
			return line[:len(line)-len(trimmed)]
		}
	}
	return "  "
}

// sortedKeys lists m's keys in order, for stable output of maps.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

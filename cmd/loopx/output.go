package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

func writeJSONTo(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(w, `{"error":{"code":"internal","message":%q}}`+"\n", err.Error())
		return
	}
	fmt.Fprintln(w, string(b))
}

// show prints an API answer: as received with --format json, else through text.
func (a *app) show(raw json.RawMessage, text func(w io.Writer, raw json.RawMessage) error) error {
	switch a.format {
	case "json":
		fmt.Fprintln(a.stdout, strings.TrimSpace(string(raw)))
		return nil
	case "text", "":
		if text == nil {
			return printFields(a.stdout, raw)
		}
		return text(a.stdout, raw)
	}
	return usageError{fmt.Errorf("--format: %q is not json or text", a.format)}
}

// printFields prints a JSON object as "key: value" lines, sorted by key.
func printFields(w io.Writer, raw json.RawMessage) error {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		fmt.Fprintln(w, strings.TrimSpace(string(raw)))
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s: %s\n", k, textValue(m[k]))
	}
	return nil
}

// printList prints the array under key as one line per item with the given columns.
func printList(key string, cols ...string) func(io.Writer, json.RawMessage) error {
	return func(w io.Writer, raw json.RawMessage) error {
		var m map[string][]map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
		items := m[key]
		if len(items) == 0 {
			fmt.Fprintf(w, "no %s\n", key)
			return nil
		}
		fmt.Fprintln(w, strings.ToUpper(strings.Join(cols, "\t")))
		for _, it := range items {
			vals := make([]string, len(cols))
			for i, c := range cols {
				vals[i] = textValue(it[c])
			}
			fmt.Fprintln(w, strings.Join(vals, "\t"))
		}
		return nil
	}
}

func textValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		if x == "" {
			return "-"
		}
		return strings.ReplaceAll(x, "\n", " ")
	case float64:
		return fmt.Sprintf("%g", x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = textValue(e)
		}
		return strings.Join(parts, ",")
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

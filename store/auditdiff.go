package store

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
)

// Redacted stands for a secret's value in an audit row: the row says that it was set or
// changed, never what it is.
const Redacted = "[redacted]"

// Change is one field's value before and after a change, as an audit row keeps it.
type Change struct {
	Before any `json:"before"`
	After  any `json:"after"`
}

// changes compares two records field by field (their JSON members) and returns the fields
// that differ, leaving out the bookkeeping ones (skip: version, updated_at, ...).
func changes(before, after any, skip ...string) map[string]Change {
	b, a := jsonFields(before), jsonFields(after)
	out := map[string]Change{}
	for _, k := range slices.Sorted(maps.Keys(mergeKeys(b, a))) {
		if slices.Contains(skip, k) {
			continue
		}
		if !reflect.DeepEqual(b[k], a[k]) {
			out[k] = Change{Before: b[k], After: a[k]}
		}
	}
	return out
}

func mergeKeys(ms ...map[string]any) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			out[k] = true
		}
	}
	return out
}

func jsonFields(v any) map[string]any {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	default:
		raw, _ = json.Marshal(v)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

// secretChanges is the audit view of secrets set, changed or removed: names and what
// happened, values redacted.
func secretChanges(before map[string]bool, changed, removed []string) map[string]Change {
	out := map[string]Change{}
	state := func(set bool) any {
		if set {
			return Redacted
		}
		return nil
	}
	for _, n := range changed {
		out["secrets."+n] = Change{Before: state(before[n]), After: Redacted + " (changed)"}
	}
	for _, n := range removed {
		out["secrets."+n] = Change{Before: state(before[n]), After: nil}
	}
	return out
}

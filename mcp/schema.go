package mcp

import (
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool schemas as every host can read them. Hosts map tool schemas onto narrower dialects
// (Gemini CLI and Qwen Code onto OpenAPI's function declarations), and the MCP Inspector's
// --strict check refuses what does not port:
//   - no bare `true` where a schema belongs (a raw JSON member is an object);
//   - one type per schema: an optional input is simply optional (a pointer's null is dropped:
//     models omit what they do not set), and a nullable output member is anyOf null and its
//     type;
//   - closed sets as enum (enums, by input property path).

// portableInput rewrites an inferred input schema in place.
func portableInput(s *jsonschema.Schema, enums map[string][]any) *jsonschema.Schema {
	walk(s, func(n *jsonschema.Schema) {
		if len(n.Types) == 2 && slices.Contains(n.Types, "null") {
			n.Type, n.Types = nonNull(n.Types), nil
		}
	})
	for path, values := range enums {
		if p := property(s, path); p != nil {
			p.Enum = values
		}
	}
	return s
}

// property is the schema of the property at path (names joined by dots: handoff.kind), nil
// when there is none.
func property(s *jsonschema.Schema, path string) *jsonschema.Schema {
	for name := range strings.SplitSeq(path, ".") {
		if s == nil {
			return nil
		}
		s = s.Properties[name]
	}
	return s
}

// portableOutput rewrites an inferred output schema in place.
func portableOutput(s *jsonschema.Schema) *jsonschema.Schema {
	walk(s, func(n *jsonschema.Schema) {
		if len(n.Types) == 2 && slices.Contains(n.Types, "null") {
			inner := *n
			inner.Type, inner.Types, inner.Description = nonNull(n.Types), nil, ""
			*n = jsonschema.Schema{Description: n.Description,
				AnyOf: []*jsonschema.Schema{{Type: "null"}, &inner}}
		}
	})
	return s
}

func nonNull(types []string) string {
	if types[0] == "null" {
		return types[1]
	}
	return types[0]
}

// walk calls f on s and every schema below it, parents first.
func walk(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	if s == nil {
		return
	}
	f(s)
	for _, p := range s.Properties {
		walk(p, f)
	}
	walk(s.Items, f)
	for _, a := range s.AnyOf {
		walk(a, f)
	}
	for _, d := range s.Defs {
		walk(d, f)
	}
	if s.AdditionalProperties != nil && !isTrue(s.AdditionalProperties) {
		walk(s.AdditionalProperties, f)
	}
}

// isTrue: the empty schema, which encodes as `true`.
func isTrue(s *jsonschema.Schema) bool {
	b, err := s.MarshalJSON()
	return err == nil && string(b) == "true"
}

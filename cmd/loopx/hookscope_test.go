package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWrittenPaths(t *testing.T) {
	t.Parallel()
	patch := "*** Begin Patch\n*** Update File: src/a.go\n@@\n-x\n+y\n*** Add File: docs/new.md\n+hi\n*** Update File: src/old.go\n*** Move to: src/new.go\n" +
		"*** Delete File: deploy/prod.yaml\n*** Update File: src/a.go\n*** End Patch\n"
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	for _, c := range []struct {
		tool  string
		input json.RawMessage
		want  []string
	}{
		{"Write", raw(map[string]any{"file_path": "/p/src/a.go", "content": "x"}), []string{"/p/src/a.go"}},
		{"Edit", raw(map[string]any{"file_path": "src/a.go", "old_string": "a", "new_string": "b"}), []string{"src/a.go"}},
		{"MultiEdit", raw(map[string]any{"file_path": "src/a.go", "edits": []any{}}), []string{"src/a.go"}},
		{"NotebookEdit", raw(map[string]any{"notebook_path": "nb/x.ipynb", "new_source": "1"}), []string{"nb/x.ipynb"}},
		{"Read", raw(map[string]any{"file_path": "src/a.go"}), nil},
		{"Bash", raw(map[string]any{"command": "rm -rf build"}), nil},
		{"apply_patch", raw(map[string]any{"patch": patch}), []string{"src/a.go", "docs/new.md", "src/old.go", "src/new.go", "deploy/prod.yaml"}},
		{"Bash", raw(map[string]any{"command": "apply_patch <<'EOF'\n" + patch + "EOF\n"}), []string{"src/a.go", "docs/new.md", "src/old.go", "src/new.go", "deploy/prod.yaml"}},
		{"apply_patch", raw(patch), []string{"src/a.go", "docs/new.md", "src/old.go", "src/new.go", "deploy/prod.yaml"}},
	} {
		require.Equal(t, c.want, writtenPaths(c.tool, c.input), "%s %s", c.tool, c.input)
	}
}

func TestProjectPaths(t *testing.T) {
	t.Parallel()
	got := projectPaths("/src/app", "/src/app/pkg", []string{"/src/app/deploy/x.yaml", "util.go", "../README.md", "/etc/passwd", "../../other/y"})
	require.Equal(t, []string{"deploy/x.yaml", "pkg/util.go", "README.md", "../../etc/passwd", "../other/y"}, got)
	require.Equal(t, []string{"a.go"}, projectPaths("/src/app", "", []string{"a.go"}), "no host folder: the project's")
}

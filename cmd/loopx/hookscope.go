package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
)

// writeTools are the host tools that write the file their arguments name: Claude Code's
// (file_path; NotebookEdit's notebook_path).
var writeTools = []string{"Edit", "Write", "MultiEdit", "NotebookEdit"}

// writtenPaths lists the files a tool call writes, as its arguments name them: a Claude
// Code write tool's path, or the files of an apply_patch patch (Codex: its Add, Update,
// Delete and Move to lines, wherever the hook's input carries the patch). A tool whose
// arguments name no file writes none we can tell; the scope is then not checked.
func writtenPaths(tool string, input json.RawMessage) []string {
	var m map[string]any
	if json.Unmarshal(input, &m) != nil {
		var patch string // a freeform tool's input: the patch itself
		if json.Unmarshal(input, &patch) != nil {
			patch = string(input)
		}
		return patchPaths(patch)
	}
	if slices.Contains(writeTools, tool) {
		for _, k := range []string{"file_path", "notebook_path"} {
			if s, _ := m[k].(string); s != "" {
				return []string{s}
			}
		}
		return nil
	}
	for _, k := range []string{"patch", "input", "command"} {
		if s, _ := m[k].(string); s != "" {
			if p := patchPaths(s); len(p) > 0 {
				return p
			}
		}
	}
	return nil
}

// patchPaths lists the files of an apply_patch patch ("*** Begin Patch" ... "*** End
// Patch"), once each, in order.
func patchPaths(patch string) []string {
	if !strings.Contains(patch, "*** Begin Patch") {
		return nil
	}
	var out []string
	for line := range strings.SplitSeq(patch, "\n") {
		line = strings.TrimSpace(line)
		for _, prefix := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "} {
			if p, ok := strings.CutPrefix(line, prefix); ok && strings.TrimSpace(p) != "" && !slices.Contains(out, strings.TrimSpace(p)) {
				out = append(out, strings.TrimSpace(p))
			}
		}
	}
	return out
}

// projectPaths makes paths relative to the project folder root, with forward slashes (what
// the goal's scope patterns match): a relative path is the host's, from its folder cwd; a
// path that leaves the project folder keeps its ../.
func projectPaths(root, cwd string, paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		abs := p
		if !filepath.IsAbs(p) {
			abs = filepath.Join(cmpDir(cwd, root), p)
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil {
			rel = abs // another volume: outside the project, as it is
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

func cmpDir(dirs ...string) string {
	for _, d := range dirs {
		if d != "" {
			return d
		}
	}
	return "."
}

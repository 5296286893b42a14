package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// allowedImports is the dependency rule of docs/architecture.md: for each package (or
// folder), the project packages it may import. A package not listed follows the nearest
// listed parent. Every package may import its own sub-packages.
var allowedImports = map[string][]string{
	"loopx/store":           {},
	"loopx/store/storetest": {"loopx/store"},
	"loopx/store/devpg":     {},
	"loopx/store/change":    {"loopx/store", "loopx/templates"},
	"loopx/templates":       {},
	"loopx/scheduler/quota": {"loopx/store"},
	"loopx/scheduler":       {"loopx/store", "loopx/templates", "loopx/scheduler/quota"},
	"loopx/inbox":           {"loopx/store", "loopx/templates"},
	"loopx/router":          {"loopx/store", "loopx/store/change", "loopx/inbox", "loopx/scheduler/quota", "loopx/templates"},
	"loopx/router/api":      {"loopx/store", "loopx/store/change", "loopx/inbox", "loopx/scheduler/quota", "loopx/router", "loopx/templates"},
	"loopx/router/web":      {"loopx/store", "loopx/store/change", "loopx/router", "loopx/templates"},
	"loopx/bot":             {"loopx/router"},
	"loopx/bot/sandbox":     {},
	"loopx/cmd/loopx":       nil, // everything
	"loopx/bench":           nil, // programs: the benchmarks and the fault suite (bench/chaos) drive every package
	"loopx":                 {},  // the module root holds only the dependency pin file

	// The API's Go client speaks the API's types only; the MCP server calls the API through
	// it and never the store (it imports store, inbox and quota for their answer types).
	"loopx/router/apiclient": {"loopx/router/api"},
	"loopx/router/mcp":       {"loopx/router/api", "loopx/router/apiclient", "loopx/store", "loopx/inbox", "loopx/scheduler/quota", "loopx/templates"},
	// A project's link (connect, status, .loopx/, tokens) talks to the API only; the host
	// installers write files only.
	"loopx/cmd/loopx/project": {"loopx/router/api", "loopx/router/apiclient", "loopx/store"},
	"loopx/cmd/loopx/hosts":   {"loopx/cmd/loopx/project"},
}

func ruleFor(pkg string) (string, []string) {
	for p := pkg; ; {
		if r, ok := allowedImports[p]; ok {
			return p, r
		}
		i := strings.LastIndex(p, "/")
		if i < 0 {
			return "", []string{}
		}
		p = p[:i]
	}
}

func allowed(pkg, imp string) bool {
	if strings.HasPrefix(imp, pkg+"/") {
		return true
	}
	key, rule := ruleFor(pkg)
	if rule == nil {
		return true
	}
	// A package below a listed folder may use its folder's packages (bot/x -> bot).
	if key != pkg && (imp == key || strings.HasPrefix(imp, key+"/")) {
		return true
	}
	for _, e := range rule {
		if imp == e {
			return true
		}
		// Sub-packages of an allowed one are allowed, unless they have a rule of their own
		// (router may import scheduler/quota; bot may import router but not router/api).
		if k, _ := ruleFor(imp); strings.HasPrefix(imp, e+"/") && !strings.HasPrefix(k, e+"/") {
			return true
		}
	}
	return false
}

func TestDependencyRule(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "loopx/...").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	var violations []string
	pkgs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkgs++
		pkg := fields[0]
		for _, imp := range fields[1:] {
			if imp != "loopx" && !strings.HasPrefix(imp, "loopx/") {
				continue
			}
			if !allowed(pkg, imp) {
				violations = append(violations, pkg+" imports "+imp)
			}
		}
	}
	require.Positive(t, pkgs)
	require.Empty(t, violations, "the dependency rule in docs/architecture.md is broken")
}

// Only package store (and the packages under it) talks to PostgreSQL through pgx: every other
// package passes store's executor along and checks store's sentinel errors, so a transaction
// can be seen and bounded in one place. Test files may use pgx to inspect the database.
func TestOnlyStoreImportsPgx(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "loopx/...").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	var leaks []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] == "loopx/store" || strings.HasPrefix(fields[0], "loopx/store/") {
			continue
		}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, "github.com/jackc/pgx") {
				leaks = append(leaks, fields[0]+" imports "+imp)
			}
		}
	}
	require.Empty(t, leaks, "only package store imports pgx")
}

func TestDependencyRuleCatchesViolations(t *testing.T) {
	t.Parallel()
	require.False(t, allowed("loopx/store", "loopx/router"))
	require.False(t, allowed("loopx/bot", "loopx/store"))
	require.False(t, allowed("loopx/bot/sandbox", "loopx/bot"))
	require.False(t, allowed("loopx/router", "loopx/scheduler"))
	require.False(t, allowed("loopx/inbox", "loopx/scheduler/quota"))
	require.True(t, allowed("loopx/router", "loopx/scheduler/quota"))
	require.True(t, allowed("loopx/router/api", "loopx/router"))
	require.True(t, allowed("loopx/cmd/loopx", "loopx/bot"))
	require.True(t, allowed("loopx/bot", "loopx/router"))
	require.False(t, allowed("loopx/bot", "loopx/router/api"))
	require.True(t, allowed("loopx/store/storetest", "loopx/store"))
	require.True(t, allowed("loopx/router/mcp", "loopx/router/apiclient"))
	require.False(t, allowed("loopx/router/apiclient", "loopx/store"))
	require.False(t, allowed("loopx/router/mcp", "loopx/router"))
	require.False(t, allowed("loopx/cmd/loopx/hosts", "loopx/router/apiclient"))
	require.True(t, allowed("loopx/cmd/loopx/project", "loopx/router/apiclient"))
}

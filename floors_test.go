package loopx_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// floors is the dependency rule of docs/architecture.md. A package may import project
// packages only on lower floors (a higher index), never on its own floor or above, with the
// exceptions below. A package belongs to the floor of the nearest folder listed; a folder's
// own sub-packages (api/client, scheduler/runner, store/storetest) are on its floor and may
// import it and each other.
var floors = [][]string{
	{"loopx/cmd"},    // entry: main and the client commands
	{"loopx/server"}, // wiring: the config loader, building every part once
	{"loopx/bot", "loopx/router", "loopx/api", "loopx/web", "loopx/mcp", "loopx/hosts"}, // ways in
	{"loopx/quota", "loopx/change", "loopx/inbox", "loopx/scheduler", "loopx/cards"},    // domain
	{"loopx/store"},                       // state
	{"loopx/templates", "loopx/examples"}, // words and embedded examples
}

// sideways are the imports allowed within a floor, each with its reason.
var sideways = map[[2]string]string{
	{"loopx/bot", "loopx/router"}:      "the bot hands Lark events to the chat router (its Message and CardAction types and two entry points)",
	{"loopx/mcp", "loopx/api"}:         "the MCP tools call the HTTP API through its Go client and speak its types",
	{"loopx/hosts", "loopx/api"}:       "a project's link (connect, status) talks to the API through its Go client",
	{"loopx/scheduler", "loopx/quota"}: "a heartbeat asks should-run",
	{"loopx/scheduler", "loopx/cards"}: "digests render report cards",
	{"loopx/cards", "loopx/change"}:    "proposal cards word a proposal's effects",
}

// leaves import no project package at all: the Lark emulator and the private PostgreSQL
// cluster stand alone, so tests and `loopx chat` can use them without the rest.
var leaves = []string{"loopx/bot/sandbox", "loopx/store/devpg", "loopx/templates", "loopx/examples"}

// narrow lists packages held to fewer imports than their floor allows, each keeping a seam:
// the bot knows Lark and the chat router's entry points, not the state (server/larkstore
// adapts the outbox); the API's client speaks the API's types only; the host installers
// write files and talk to nothing (their texts come from the loop contract in templates).
var narrow = map[string][]string{
	"loopx/bot":           {"loopx/router"},
	"loopx/api/client":    {"loopx/api"},
	"loopx/hosts":         {"loopx/hosts/project", "loopx/templates"},
	"loopx/hosts/project": {"loopx/api", "loopx/api/client", "loopx/store"},
}

// programs measure or shake the product from outside; they may import every floor and
// nothing imports them.
const programs = "loopx/bench"

func under(pkg, folder string) bool { return pkg == folder || strings.HasPrefix(pkg, folder+"/") }

// floorOf is the floor index and folder of pkg; -1 when pkg is on no floor.
func floorOf(pkg string) (int, string) {
	best, at := "", -1
	for i, fl := range floors {
		for _, f := range fl {
			if under(pkg, f) && len(f) > len(best) {
				best, at = f, i
			}
		}
	}
	return at, best
}

// violation says why pkg may not import imp, or "" when it may.
func violation(pkg, imp string) string {
	switch {
	case under(imp, programs):
		return "nothing imports the benchmark programs"
	case under(pkg, programs):
		return ""
	case slices.ContainsFunc(leaves, func(l string) bool { return pkg == l }):
		if under(imp, pkg) {
			return ""
		}
		return pkg + " is a leaf: it imports no project package"
	}
	if only, ok := narrow[pkg]; ok && !slices.Contains(only, imp) {
		return pkg + " may import only " + strings.Join(only, ", ")
	}
	pf, pfolder := floorOf(pkg)
	ifl, ifolder := floorOf(imp)
	switch {
	case pf < 0:
		return pkg + " is on no floor: add its folder to floors"
	case ifl < 0:
		return imp + " is on no floor: add its folder to floors"
	case pfolder == ifolder:
		return "" // a folder and its own sub-packages
	case ifl > pf:
		return ""
	case ifl < pf:
		return imp + " is on a higher floor than " + pkg
	}
	if _, ok := sideways[[2]string{pfolder, ifolder}]; ok {
		return ""
	}
	return pkg + " and " + imp + " are on the same floor and " + pfolder + " may not import " + ifolder
}

type listed struct {
	ImportPath string
	Imports    []string
	GoFiles    []string
}

// goList lists every package of the module with its imports; overlay (a go list -overlay
// file) may add files.
func goList(t *testing.T, overlay string) []listed {
	t.Helper()
	args := []string{"list", "-json=ImportPath,Imports,GoFiles"}
	if overlay != "" {
		// A planted import may close a cycle or name a program; -e lists the imports anyway.
		args = append(args, "-e", "-overlay", overlay)
	}
	out, err := exec.CommandContext(t.Context(), "go", append(args, "loopx/...")...).Output()
	require.NoError(t, err, "go list")
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listed
		require.NoError(t, dec.Decode(&p))
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

func violations(pkgs []listed) []string {
	var out []string
	for _, p := range pkgs {
		for _, imp := range p.Imports {
			if imp != "loopx" && !strings.HasPrefix(imp, "loopx/") {
				continue
			}
			if why := violation(p.ImportPath, imp); why != "" {
				out = append(out, p.ImportPath+" imports "+imp+": "+why)
			}
		}
	}
	return out
}

func TestFloors(t *testing.T) {
	t.Parallel()
	require.Empty(t, violations(goList(t, "")), "the floors of docs/architecture.md are broken")
}

// A planted violation, added to the real tree through go list's overlay, is caught: the API
// importing the chat router (same floor), the store importing a domain package (a higher
// floor), and the sandbox importing the bot (a leaf).
func TestFloorsCatchAPlantedViolation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plant := map[string]string{
		"api/zz_planted.go":         "package api\n\nimport _ \"loopx/router\"\n",
		"store/zz_planted.go":       "package store\n\nimport _ \"loopx/quota\"\n",
		"bot/sandbox/zz_planted.go": "package sandbox\n\nimport _ \"loopx/templates\"\n",
		"web/zz_planted.go":         "package web\n\nimport _ \"loopx/api\"\n",
		"cmd/loopx/zz_planted.go":   "package main\n\nimport _ \"loopx/bench/chaos\"\n",
	}
	root, err := os.Getwd()
	require.NoError(t, err)
	replace := map[string]string{}
	for rel, src := range plant {
		f := filepath.Join(dir, strings.ReplaceAll(rel, "/", "_"))
		require.NoError(t, os.WriteFile(f, []byte(src), 0o600))
		replace[filepath.Join(root, rel)] = f
	}
	b, err := json.Marshal(map[string]any{"Replace": replace})
	require.NoError(t, err)
	overlay := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(overlay, b, 0o600))
	got := violations(goList(t, overlay))
	for _, want := range []string{
		"loopx/api imports loopx/router", "loopx/store imports loopx/quota",
		"loopx/bot/sandbox imports loopx/templates", "loopx/web imports loopx/api",
		"loopx/cmd/loopx imports loopx/bench/chaos",
	} {
		require.True(t, slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, want+":") }), "%s not caught: %v", want, got)
	}
}

func TestFloorRules(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pkg, imp string
		ok       bool
	}{
		{"loopx/cmd/loopx", "loopx/server", true},
		{"loopx/cmd/loopx", "loopx/bot/sandbox", true},
		{"loopx/server", "loopx/cmd/loopx", false},
		{"loopx/api", "loopx/router", false},
		{"loopx/web", "loopx/router", false},
		{"loopx/api", "loopx/web", false},
		{"loopx/web", "loopx/api", false},
		{"loopx/api", "loopx/cards", true},
		{"loopx/mcp", "loopx/api/client", true},
		{"loopx/mcp", "loopx/router", false},
		{"loopx/bot", "loopx/router", true},
		{"loopx/router", "loopx/bot", false},
		{"loopx/bot", "loopx/store", false},
		{"loopx/server/larkstore", "loopx/store", true},
		{"loopx/bot/sandbox", "loopx/bot", false},
		{"loopx/api/client", "loopx/api", true},
		{"loopx/scheduler/runner", "loopx/scheduler", true},
		{"loopx/scheduler", "loopx/quota", true},
		{"loopx/quota", "loopx/scheduler", false},
		{"loopx/inbox", "loopx/quota", false},
		{"loopx/cards", "loopx/router", false},
		{"loopx/store", "loopx/templates", true},
		{"loopx/store", "loopx/cards", false},
		{"loopx/store/storetest", "loopx/store", true},
		{"loopx/change", "loopx/templates", true},
		{"loopx/templates", "loopx/store", false},
		{"loopx/bench/chaos", "loopx/server", true},
		{"loopx/server", "loopx/bench/chaos", false},
	} {
		require.Equal(t, c.ok, violation(c.pkg, c.imp) == "", "%s imports %s: %q", c.pkg, c.imp, violation(c.pkg, c.imp))
	}
}

// Only package store (and the packages under it) talks to PostgreSQL through pgx: every other
// package passes store's executor along and checks store's sentinel errors, so a transaction
// can be seen and bounded in one place. Only package bot (and its emulator) uses the Lark
// SDK: its types never leave bot/. Test files may use pgx to inspect the database.
func TestOnlyStoreImportsPgxAndOnlyBotTheLarkSDK(t *testing.T) {
	t.Parallel()
	var leaks []string
	for _, p := range goList(t, "") {
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/jackc/pgx") && !under(p.ImportPath, "loopx/store") {
				leaks = append(leaks, p.ImportPath+" imports "+imp)
			}
			if strings.HasPrefix(imp, "github.com/larksuite/") && !under(p.ImportPath, "loopx/bot") {
				leaks = append(leaks, p.ImportPath+" imports "+imp)
			}
		}
	}
	require.Empty(t, leaks)
}

package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// repoRoot is the repository, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "the repository root holds go.mod")
	return root
}

// docFiles are the repository's documents: docs/**/*.md and every README*.md.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") && (strings.HasPrefix(rel, "docs"+string(filepath.Separator)) || strings.HasPrefix(d.Name(), "README")) {
			files = append(files, rel)
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, files, "README.md")
	return files
}

var (
	mdFence     = regexp.MustCompile("^\\s*```")
	mdLinkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdCodeSpan  = regexp.MustCompile("`([^`]+)`")
	mdBareFile  = regexp.MustCompile(`(?:^|[\s(])([A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md)\b`)
	mdHeadingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	placeholder = regexp.MustCompile(`<[^>]*>|\{[^}]*\}|N{3,}`)
	apiVersion  = regexp.MustCompile(`/v[0-9]+/`)
)

// anchors are the heading anchors of a markdown file, made as GitHub makes them.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if mdFence.MatchString(line) {
			inFence = !inFence
			continue
		}
		m := mdHeadingRE.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestDocsLinksAndCitedFilesExist: every relative link in docs/ and the READMEs leads to a
// file (and heading) of the repository, and every repository file they cite (`bot/x.go`,
// examples/demo-agent.sh, DESIGN.md ...) exists: the docs stand alone.
func TestDocsLinksAndCitedFilesExist(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	top := map[string]bool{}
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range entries {
		// Build output (bin/, made by make build or make chaos) is not the repository's.
		top[e.Name()] = e.Name() != "bin"
	}
	exists := func(p string) bool {
		if placeholder.MatchString(p) {
			matches, _ := filepath.Glob(placeholder.ReplaceAllString(p, "*"))
			return len(matches) > 0
		}
		if strings.Contains(p, "*") {
			matches, _ := filepath.Glob(p)
			return len(matches) > 0
		}
		_, err := os.Stat(p)
		return err == nil
	}
	var problems []string
	checked := 0
	for _, doc := range docFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, doc))
		require.NoError(t, err)
		dir := filepath.Join(root, filepath.Dir(doc))
		inFence := false
		for i, line := range strings.Split(string(b), "\n") {
			where := doc + ":" + strconv.Itoa(i+1)
			if mdFence.MatchString(line) {
				inFence = !inFence
				continue
			}
			if !inFence {
				for _, m := range mdLinkRE.FindAllStringSubmatch(line, -1) {
					target := m[1]
					if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
						continue
					}
					checked++
					file, anchor, _ := strings.Cut(target, "#")
					path := filepath.Join(dir, file)
					if file == "" {
						path = filepath.Join(root, doc)
					}
					if !exists(path) {
						problems = append(problems, where+": link to "+target+": no such file")
						continue
					}
					if anchor != "" && strings.HasSuffix(path, ".md") {
						tb, err := os.ReadFile(path)
						require.NoError(t, err)
						if !anchors(string(tb))[anchor] {
							problems = append(problems, where+": link to "+target+": no heading #"+anchor+" there")
						}
					}
				}
			}
			// Cited files: code spans that name a path of the repository, and bare *.md names.
			var cited []string
			for _, m := range mdCodeSpan.FindAllStringSubmatch(line, -1) {
				for _, word := range strings.Fields(m[1]) {
					cited = append(cited, word)
				}
			}
			if inFence {
				cited = append(cited, strings.Fields(line)...)
			}
			prose := mdCodeSpan.ReplaceAllString(mdLinkRE.ReplaceAllString(line, "]"), "")
			for _, m := range mdBareFile.FindAllStringSubmatch(prose, -1) {
				if !strings.Contains(m[1], "://") {
					cited = append(cited, m[1])
				}
			}
			for _, c := range cited {
				c = strings.Trim(c, `"',;:()`)
				if hostFiles[c] {
					continue // a file the host installers write into a user's project
				}
				first, rest, nested := strings.Cut(c, "/")
				isRepoPath := nested && top[first] && first != "." || !nested && strings.HasSuffix(c, ".md")
				if nested && apiVersion.MatchString("/"+rest+"/") {
					continue // an API path such as Lark's bot/v3/info, not a file
				}
				if !isRepoPath {
					continue
				}
				checked++
				if !exists(filepath.Join(root, c)) && !exists(filepath.Join(dir, c)) {
					problems = append(problems, where+": cites "+c+", which is not in the repository")
				}
			}
		}
	}
	require.Greater(t, checked, 20, "the test found the links and citations")
	require.Empty(t, problems, "the docs must stand alone")
}

// hostFiles are files of the agent hosts (docs/hosts.md) that the docs name but that live in
// a user's project, not in this repository.
var hostFiles = map[string]bool{"AGENTS.md": true, "CLAUDE.md": true, "SKILL.md": true}

// metric is one Prometheus series family the code defines.
type metric struct {
	name   string
	labels []string
	at     string
}

// codeMetrics reads every loopx_* metric and its label names from the Go source (tests
// excluded): prometheus.*Opts literals, with the labels of the *Vec call they are given to,
// and prometheus.NewDesc calls.
func codeMetrics(t *testing.T, root string) []metric {
	t.Helper()
	var out []metric
	fset := token.NewFileSet()
	strLit := func(e ast.Expr) (string, bool) {
		bl, ok := e.(*ast.BasicLit)
		if !ok || bl.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(bl.Value)
		return s, err == nil
	}
	labelsOf := func(e ast.Expr) []string {
		cl, ok := e.(*ast.CompositeLit)
		if !ok {
			return nil
		}
		var ls []string
		for _, el := range cl.Elts {
			if s, ok := strLit(el); ok {
				ls = append(ls, s)
			}
		}
		return ls
	}
	isProm := func(e ast.Expr, names ...string) (string, bool) {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		pkg, ok := sel.X.(*ast.Ident)
		return sel.Sel.Name, ok && pkg.Name == "prometheus" && slices.Contains(names, sel.Sel.Name)
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		vecLabels := map[*ast.CompositeLit][]string{}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if _, ok := isProm(call.Fun, "NewCounterVec", "NewGaugeVec", "NewHistogramVec", "NewSummaryVec"); ok && len(call.Args) == 2 {
				if opts, ok := call.Args[0].(*ast.CompositeLit); ok {
					vecLabels[opts] = labelsOf(call.Args[1])
				}
			}
			if _, ok := isProm(call.Fun, "NewDesc"); ok && len(call.Args) >= 3 {
				name, ok := strLit(call.Args[0])
				require.True(t, ok, "%s: a metric name that is not a literal: the docs test cannot read it", fset.Position(call.Pos()))
				out = append(out, metric{name: name, labels: labelsOf(call.Args[2]), at: fset.Position(call.Pos()).String()})
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if _, ok := isProm(cl.Type, "CounterOpts", "GaugeOpts", "HistogramOpts", "SummaryOpts"); !ok {
				return true
			}
			for _, el := range cl.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok || kv.Key.(*ast.Ident).Name != "Name" {
					continue
				}
				name, ok := strLit(kv.Value)
				require.True(t, ok, "%s: a metric name that is not a literal: the docs test cannot read it", fset.Position(kv.Pos()))
				out = append(out, metric{name: name, labels: vecLabels[cl], at: fset.Position(cl.Pos()).String()})
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	return out
}

var (
	docMetricRE  = regexp.MustCompile(`\b(loopx_[a-z0-9_]+)(\{[a-z_, ]*\})?`)
	metricSuffix = regexp.MustCompile(`_(total|seconds|bytes|rows|depth|pending|count|info)$`)
)

// TestOperationsListsEveryMetric: docs/operations.md names every metric the code defines
// with its real labels (`name{label,label}`), and no page names a metric that does not
// exist or gives one labels it does not have.
func TestOperationsListsEveryMetric(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	metrics := codeMetrics(t, root)
	require.GreaterOrEqual(t, len(metrics), 20, "the source scan found the metrics")
	byName := map[string]metric{}
	for _, m := range metrics {
		byName[m.name] = m
	}
	spelled := func(m metric) string {
		if len(m.labels) == 0 {
			return "`" + m.name + "`"
		}
		return "`" + m.name + "{" + strings.Join(m.labels, ",") + "}`"
	}
	ops, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	require.NoError(t, err)
	var problems []string
	for _, m := range metrics {
		if !strings.Contains(string(ops), spelled(m)) {
			problems = append(problems, "docs/operations.md does not list "+spelled(m)+" ("+m.at+")")
		}
	}
	for _, doc := range docFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, doc))
		require.NoError(t, err)
		for _, m := range docMetricRE.FindAllStringSubmatch(string(b), -1) {
			code, known := byName[m[1]]
			switch {
			case !known && m[2] == "" && !metricSuffix.MatchString(m[1]):
				// not a metric: a JSON field (loopx_token), a channel (loopx_outbox), a prefix
			case !known:
				problems = append(problems, doc+" names "+m[1]+", which the code does not define")
			case m[2] != "" && strings.ReplaceAll(m[2], " ", "") != "{"+strings.Join(code.labels, ",")+"}":
				problems = append(problems, doc+" gives "+m[1]+" the labels "+m[2]+"; the code has {"+strings.Join(code.labels, ",")+"}")
			}
		}
	}
	require.Empty(t, problems)
}

// chinesePages are the pages Feishu users read in Chinese, each beside its English original.
var chinesePages = map[string]string{
	"README.md":          "README.zh.md",
	"docs/chat.md":       "docs/chat.zh.md",
	"docs/lark-setup.md": "docs/lark-setup.zh.md",
	"docs/sandbox.md":    "docs/sandbox.zh.md",
	"docs/workspace.md":  "docs/workspace.zh.md",
	"docs/hosts.md":      "docs/hosts.zh.md",
	"docs/agents.md":     "docs/agents.zh.md",
	"docs/api.md":        "docs/api.zh.md",
	"docs/operations.md": "docs/operations.zh.md",
	"docs/deploy.md":     "docs/deploy.zh.md",
	"docs/contract.md":   "docs/contract.zh.md",
}

// shape counts what a translation must keep: headings by level, code blocks, table rows.
func shape(text string) map[string]int {
	out := map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if mdFence.MatchString(line) {
			inFence = !inFence
			out["code blocks"]++
			continue
		}
		switch {
		case inFence:
		case mdHeadingRE.MatchString(line):
			out["h"+strconv.Itoa(len(line)-len(strings.TrimLeft(line, "#")))]++
		case strings.HasPrefix(line, "|"):
			out["table rows"]++
		}
	}
	return out
}

// hanShare is the share of Han characters among the letters of the prose (code and link
// targets left out).
func hanShare(text string) float64 {
	var han, latin int
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if mdFence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, r := range mdCodeSpan.ReplaceAllString(mdLinkRE.ReplaceAllString(line, "]"), "") {
			switch {
			case unicode.Is(unicode.Han, r):
				han++
			case r < unicode.MaxASCII && unicode.IsLetter(r):
				latin++
			}
		}
	}
	if han+latin == 0 {
		return 0
	}
	return float64(han) / float64(han+latin)
}

// TestChinesePagesForFeishuUsers: every page people read (README, chat, lark-setup, sandbox,
// workspace, hosts, agents, api, operations, deploy) has a Chinese version, linked both ways
// and from the Chinese README, written in Chinese, with the structure of the English page (so
// a section added to one and not the other shows).
func TestChinesePagesForFeishuUsers(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	linksTo := func(from, to string) bool {
		b, err := os.ReadFile(filepath.Join(root, from))
		require.NoError(t, err)
		for _, m := range mdLinkRE.FindAllStringSubmatch(string(b), -1) {
			file, _, _ := strings.Cut(m[1], "#")
			if filepath.Join(filepath.Dir(from), file) == filepath.Clean(to) {
				return true
			}
		}
		return false
	}
	for en, zh := range chinesePages {
		zb, err := os.ReadFile(filepath.Join(root, zh))
		require.NoError(t, err, "%s has no Chinese version %s", en, zh)
		eb, err := os.ReadFile(filepath.Join(root, en))
		require.NoError(t, err)
		require.True(t, linksTo(en, zh), "%s links to %s", en, zh)
		require.True(t, linksTo(zh, en), "%s links back to %s", zh, en)
		require.Greater(t, hanShare(string(zb)), 0.5, "%s is written in Chinese", zh)
		require.Less(t, hanShare(string(eb)), 0.05, "%s is the English page", en)
		require.Equal(t, shape(string(eb)), shape(string(zb)), "%s keeps the sections, code blocks and tables of %s", zh, en)
		require.True(t, zh == "README.zh.md" || linksTo("README.zh.md", zh), "README.zh.md links to %s", zh)
	}
}

// TestCLIHelpStaysEnglish: the Chinese docs do not leak into the command line's help.
func TestCLIHelpStaysEnglish(t *testing.T) {
	t.Parallel()
	a := &app{getenv: func(string) string { return "" }}
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		n++
		text := c.Use + c.Short + c.Long + c.Example
		c.Flags().VisitAll(func(f *pflag.Flag) { text += f.Usage })
		for _, r := range text {
			require.False(t, unicode.Is(unicode.Han, r), "loopx %s --help has Chinese text: %q", c.CommandPath(), text)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(a.rootCommand())
	require.Greater(t, n, 20)
}

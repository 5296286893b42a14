package hosts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"loopx/hosts/project"
)

// ConflictError: a file holds something of the same name that the install did not write;
// the install changes nothing and says how to resolve it.
type ConflictError struct{ Msg string }

func (e *ConflictError) Error() string { return e.Msg }

func conflict(format string, args ...any) error {
	return &ConflictError{Msg: fmt.Sprintf(format, args...)}
}

// Change is one file an install or uninstall writes.
type Change struct {
	Path string
	Old  []byte // nil: the file does not exist
	New  []byte // nil: the file is removed
	mode os.FileMode
}

// Plan is what an install or uninstall does: the file changes, and the manifest after them.
type Plan struct {
	Host, Scope string
	Changes     []Change
	// Kept lists what an uninstall leaves because it changed since the install.
	Kept     []string
	project  string
	manifest *Manifest
	record   *Record // the install's record after the plan; nil after an uninstall
	dirs     []string
}

// Install plans the install of p.Host's files. A second install with the same parameters
// plans no change.
func Install(p Params, m *Manifest) (*Plan, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	plan := &Plan{Host: p.Host, Scope: p.scope(), manifest: m}
	prev := m.find(p.Host, p.scope(), p.Project)
	rec := &Record{Host: p.Host, Scope: p.scope(), Project: p.Project, Command: p.Command}
	for _, spec := range specs(p) {
		var prevFile *FileRecord
		if prev != nil {
			prevFile = prev.file(spec.path)
		}
		old, err := readFile(spec.path)
		if err != nil {
			return nil, err
		}
		fr := FileRecord{Path: spec.path, CreatedFile: old == nil || (prevFile != nil && prevFile.CreatedFile)}
		if prevFile != nil {
			fr.CreatedDirs = prevFile.CreatedDirs
		}
		if old == nil {
			fr.CreatedDirs = append(fr.CreatedDirs, missingDirs(filepath.Dir(spec.path))...)
		}
		next, items, err := apply(spec, old, prevFile)
		if err != nil {
			return nil, err
		}
		fr.Items = items
		rec.Files = append(rec.Files, fr)
		if !bytes.Equal(old, next) {
			plan.Changes = append(plan.Changes, Change{Path: spec.path, Old: old, New: next, mode: spec.mode})
		}
	}
	// Files of an earlier install that this one no longer writes (an older loopx wrote
	// elsewhere) stay in the record, so uninstall still removes what was added there.
	if prev != nil {
		for _, f := range prev.Files {
			if rec.file(f.Path) == nil {
				rec.Files = append(rec.Files, f)
			}
		}
	}
	plan.record = rec
	return plan, nil
}

// Uninstall plans the removal of exactly what the install of host (scope, project) added.
func Uninstall(host, scope, projectDir string, m *Manifest) (*Plan, error) {
	if scope == "" {
		scope = DefaultScope(host)
	}
	plan := &Plan{Host: host, Scope: scope, project: projectDir, manifest: m}
	rec := m.find(host, scope, projectDir)
	if rec == nil {
		return plan, nil
	}
	for _, fr := range rec.Files {
		old, err := readFile(fr.Path)
		if err != nil {
			return nil, err
		}
		if old == nil {
			continue
		}
		next, kept, err := remove(fr, old)
		if err != nil {
			return nil, err
		}
		plan.Kept = append(plan.Kept, kept...)
		if !bytes.Equal(old, next) || next == nil {
			plan.Changes = append(plan.Changes, Change{Path: fr.Path, Old: old, New: next})
		}
		plan.dirs = append(plan.dirs, fr.CreatedDirs...)
	}
	return plan, nil
}

// Empty reports whether the plan changes no file.
func (p *Plan) Empty() bool { return len(p.Changes) == 0 }

// Apply writes the plan's files, then the manifest. A file's content is replaced
// atomically.
func (p *Plan) Apply() error {
	for _, c := range p.Changes {
		if c.New == nil {
			if err := os.Remove(c.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove %s: %w", c.Path, err)
			}
			continue
		}
		mode := c.mode
		if mode == 0 {
			mode = 0o644
		}
		if _, err := project.WriteFile(c.Path, c.New, mode); err != nil {
			return err
		}
	}
	// Folders the install created go when they are empty, deepest first.
	dirs := slices.Clone(p.dirs)
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	for _, d := range dirs {
		_ = os.Remove(d) // fails, as it should, when the folder is not empty
	}
	if p.record != nil {
		p.manifest.put(*p.record)
	} else {
		p.manifest.drop(p.Host, p.Scope, p.project)
	}
	return p.manifest.save()
}

// Diff is the plan as a unified diff, one file after another.
func (p *Plan) Diff() string {
	var b strings.Builder
	for _, c := range p.Changes {
		b.WriteString(unifiedDiff(c.Path, c.Old, c.New))
	}
	return b.String()
}

func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// missingDirs lists dir and its parents that do not exist yet, deepest first.
func missingDirs(dir string) []string {
	var out []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			return out
		}
		out = append(out, d)
	}
}

// apply merges spec's items into old and returns the new content and the items as
// recorded (Mine: added by this install or an earlier one).
func apply(spec fileSpec, old []byte, prev *FileRecord) ([]byte, []Item, error) {
	// earlier returns this item as an earlier install recorded it, when that install added it.
	earlier := func(it Item) *Item {
		if prev == nil {
			return nil
		}
		for i, p := range prev.Items {
			if p.Kind == it.Kind && slices.Equal(p.Keys, it.Keys) && p.Mine {
				return &prev.Items[i]
			}
		}
		return nil
	}
	switch spec.kind {
	case kindJSON:
		return applyJSON(spec, old, earlier)
	case kindTOML, kindMarkdown:
		it := spec.items[0]
		next, err := putBlock(spec, old, it.Text)
		if err != nil {
			return nil, nil, err
		}
		it.Mine = true
		return next, []Item{it}, nil
	case kindOwned:
		it := spec.items[0]
		if old != nil && !bytes.Contains(old, []byte(Marker)) {
			return nil, nil, conflict("%s exists and was not written by loopx hosts install: move it away (or merge it by hand) and run the install again", spec.path)
		}
		it.Mine = true
		return []byte(it.Text), []Item{it}, nil
	}
	return nil, nil, fmt.Errorf("unknown file kind %q", spec.kind)
}

func applyJSON(spec fileSpec, old []byte, earlier func(Item) *Item) ([]byte, []Item, error) {
	// keep marks it as added by an earlier install, with what that install created.
	keep := func(it Item) (Item, bool) {
		e := earlier(it)
		if e == nil {
			return it, false
		}
		it.Mine, it.Created, it.CreatedList = true, e.Created, e.CreatedList
		return it, true
	}
	doc := &node{isObj: true}
	unit := "  "
	if len(bytes.TrimSpace(old)) > 0 {
		var err error
		if doc, err = parseJSON(old); err != nil {
			return nil, nil, conflict("%s is not plain JSON (%v): loopx merges only plain JSON, without comments. Add this by hand (or remove the comments and run the install again):\n%s",
				spec.path, err, byHand(spec))
		}
		if !doc.isObj {
			return nil, nil, conflict("%s does not hold a JSON object", spec.path)
		}
		unit = indentUnit(old)
	}
	var items []Item
	for _, it := range spec.items {
		if it.OnlyNew && old != nil {
			if it, ok := keep(it); ok { // written when this install created the file: still ours
				items = append(items, it)
			}
			continue
		}
		parent, created, err := walk(doc, it.Keys[:len(it.Keys)-1], spec.path)
		if err != nil {
			return nil, nil, err
		}
		last := it.Keys[len(it.Keys)-1]
		val, err := parseJSON(it.Value)
		if err != nil {
			return nil, nil, err
		}
		cur := parent.get(last)
		switch it.Kind {
		case itemSet:
			switch {
			case cur == nil:
				parent.set(last, val)
				it.Mine, it.Created = true, created
			case cur.canonical() == val.canonical():
				it, _ = keep(it)
			case earlier(it) != nil:
				parent.set(last, val) // ours from an earlier install: update it (a new binary path)
				it, _ = keep(it)
			default:
				return nil, nil, conflict("%s already has %s, not written by loopx hosts install: remove or rename it, then run the install again", spec.path, strings.Join(it.Keys, "."))
			}
		case itemAppend:
			newList := cur == nil
			if newList {
				cur = &node{isArr: true}
				parent.set(last, cur)
			}
			if !cur.isArr {
				return nil, nil, conflict("%s: %s is not a list", spec.path, strings.Join(it.Keys, "."))
			}
			if e := earlier(it); e != nil {
				// Ours from an earlier install with another value (a new binary path): replace it.
				if old, err := parseJSON(e.Value); err == nil && old.canonical() != val.canonical() {
					cur.arr = slices.DeleteFunc(cur.arr, func(n *node) bool { return n.canonical() == old.canonical() })
				}
			}
			present := slices.ContainsFunc(cur.arr, func(n *node) bool { return n.canonical() == val.canonical() })
			if present {
				it, _ = keep(it)
			} else {
				cur.arr = append(cur.arr, val)
				it.Mine, it.Created, it.CreatedList = true, created, newList
			}
		}
		items = append(items, it)
	}
	return append(doc.format(unit), '\n'), items, nil
}

// byHand is what spec puts in a JSON file, as the members to add by hand.
func byHand(spec fileSpec) string {
	var b strings.Builder
	for _, it := range spec.items {
		if it.OnlyNew {
			continue
		}
		val := string(it.Value)
		if v, err := parseJSON(it.Value); err == nil {
			val = string(v.format("  "))
		}
		verb := "set"
		if it.Kind == itemAppend {
			verb = "add to the list"
		}
		fmt.Fprintf(&b, "  %s %s: %s\n", verb, strings.Join(it.Keys, " > "), val)
	}
	return strings.TrimRight(b.String(), "\n")
}

// walk follows keys from doc, creating missing objects; it returns the last object and how
// many of the keys, counted from the end, it created.
func walk(doc *node, keys []string, path string) (*node, int, error) {
	cur, created := doc, 0
	for i, k := range keys {
		next := cur.get(k)
		if next == nil {
			next = &node{isObj: true}
			cur.set(k, next)
			if created == 0 {
				created = len(keys) - i // everything below a new object is new
			}
		}
		if !next.isObj {
			return nil, 0, conflict("%s: %s is not an object", path, strings.Join(keys[:i+1], "."))
		}
		cur = next
	}
	return cur, created, nil
}

// remove takes fr's items out of content old; nil means the file goes. kept lists what
// changed since the install and stays.
func remove(fr FileRecord, old []byte) ([]byte, []string, error) {
	var kept []string
	switch {
	case len(fr.Items) > 0 && fr.Items[0].Kind == itemFile:
		if string(old) != fr.Items[0].Text {
			return old, []string{fr.Path + " (changed since the install)"}, nil
		}
		return nil, nil, nil
	case len(fr.Items) > 0 && fr.Items[0].Kind == itemBlock:
		st := blockStyle(fr.Path)
		if i, end, ok := findBlock(old, st); ok && !bytes.Contains(old[i:end], []byte(strings.TrimRight(fr.Items[0].Text, "\n"))) {
			return old, []string{fr.Path + " (the loopx block was edited since the install: remove it by hand, from " + st.begin + " to the END loopx line)"}, nil
		}
		next := dropBlock(old, st)
		if fr.CreatedFile && len(bytes.TrimSpace(next)) == 0 {
			return nil, nil, nil
		}
		return next, nil, nil
	}
	doc, err := parseJSON(old)
	if err != nil || !doc.isObj {
		return old, []string{fr.Path + " (no longer plain JSON: remove the loopx entries by hand)"}, nil
	}
	for _, it := range fr.Items {
		if !it.Mine {
			continue
		}
		chain := []*node{doc}
		for _, k := range it.Keys[:len(it.Keys)-1] {
			n := chain[len(chain)-1].get(k)
			if n == nil || !n.isObj {
				chain = nil
				break
			}
			chain = append(chain, n)
		}
		if chain == nil {
			continue
		}
		parent, last := chain[len(chain)-1], it.Keys[len(it.Keys)-1]
		cur := parent.get(last)
		if cur == nil {
			continue
		}
		val, err := parseJSON(it.Value)
		if err != nil {
			return nil, nil, err
		}
		switch it.Kind {
		case itemSet:
			if cur.canonical() != val.canonical() {
				kept = append(kept, fr.Path+": "+strings.Join(it.Keys, ".")+" (changed since the install)")
				continue
			}
			parent.del(last)
		case itemAppend:
			if !cur.isArr {
				continue
			}
			if i := slices.IndexFunc(cur.arr, func(n *node) bool { return n.canonical() == val.canonical() }); i >= 0 {
				cur.arr = append(cur.arr[:i], cur.arr[i+1:]...)
			}
			if cur.empty() && it.CreatedList {
				parent.del(last)
			}
		}
		// Objects the install created go when empty, innermost first.
		parents := len(it.Keys) - 1
		for j := parents - 1; j >= parents-it.Created && j >= 0; j-- {
			if !chain[j+1].empty() {
				break
			}
			chain[j].del(it.Keys[j])
		}
	}
	if fr.CreatedFile && doc.empty() {
		return nil, kept, nil
	}
	return append(doc.format(indentUnit(old)), '\n'), kept, nil
}

// Block markers, in each file kind's comment syntax. The begin line is short (a model reads
// AGENTS.md from the top); the end line carries the marker. Blocks an older install wrote
// begin with the marker (legacyBegin) and end with a bare end line: both are found.
type style struct{ begin, end, legacy, legacyEnd string }

func blockStyle(path string) style {
	if strings.HasSuffix(path, ".toml") {
		return style{begin: "# BEGIN loopx", end: "# END loopx (" + Marker + ")",
			legacy: "# BEGIN loopx (" + Marker + ")", legacyEnd: "# END loopx"}
	}
	return style{begin: "<!-- BEGIN loopx -->", end: "<!-- END loopx (" + Marker + ") -->",
		legacy: "<!-- BEGIN loopx (" + Marker + ") -->", legacyEnd: "<!-- END loopx -->"}
}

func blockBegin(path string) string  { return blockStyle(path).begin }
func legacyBegin(path string) string { return blockStyle(path).legacy }

// findBlock locates the marked block in b: its start and the end of its end line (with the
// newline after it); ok false when there is none.
func findBlock(b []byte, st style) (i, end int, ok bool) {
	for _, m := range [][2]string{{st.legacy, st.legacyEnd}, {st.begin, st.end}} {
		i := bytes.Index(b, []byte(m[0]+"\n"))
		if i < 0 || (i > 0 && b[i-1] != '\n') {
			continue
		}
		j := bytes.Index(b[i:], []byte(m[1]))
		if j < 0 {
			continue
		}
		end := i + j + len(m[1])
		if end < len(b) && b[end] == '\n' {
			end++
		}
		return i, end, true
	}
	return 0, 0, false
}

// putBlock puts text between the markers: in place of an earlier block, else at the end.
func putBlock(spec fileSpec, old []byte, text string) ([]byte, error) {
	st := blockStyle(spec.path)
	block := st.begin + "\n" + strings.TrimRight(text, "\n") + "\n" + st.end + "\n"
	rest := dropBlock(old, st)
	if spec.kind == kindTOML {
		if err := checkTOML(spec.path, rest); err != nil {
			return nil, err
		}
	}
	var next []byte
	if i, end, ok := findBlock(old, st); ok {
		next = append(append(append([]byte{}, old[:i]...), block...), old[end:]...)
	} else {
		next = append([]byte{}, old...)
		if len(next) > 0 && !bytes.HasSuffix(next, []byte("\n")) {
			next = append(next, '\n')
		}
		if len(bytes.TrimSpace(next)) > 0 && !bytes.HasSuffix(next, []byte("\n\n")) {
			next = append(next, '\n')
		}
		next = append(next, block...)
	}
	if spec.kind == kindTOML {
		var v map[string]any
		if _, err := toml.Decode(string(next), &v); err != nil {
			return nil, conflict("%s would not parse after adding the loopx table (%v): fix the file and run the install again", spec.path, err)
		}
	}
	return next, nil
}

// dropBlock removes the marked block (and the blank line before it that putBlock added).
func dropBlock(old []byte, st style) []byte {
	i, end, ok := findBlock(old, st)
	if !ok {
		return old
	}
	head := old[:i]
	if bytes.HasSuffix(head, []byte("\n\n")) {
		head = head[:len(head)-1]
	}
	return append(append([]byte{}, head...), old[end:]...)
}

// checkTOML refuses a Codex config that does not parse, or that defines the loopx server
// itself: a second table of the same name would break every codex command.
func checkTOML(path string, rest []byte) error {
	var v map[string]any
	if _, err := toml.Decode(string(rest), &v); err != nil {
		return conflict("%s does not parse as TOML (%v): codex cannot read it either; fix it and run the install again", path, err)
	}
	if servers, ok := v["mcp_servers"].(map[string]any); ok {
		if _, ok := servers[ServerName]; ok {
			return conflict("%s already defines [mcp_servers.%s], not written by loopx hosts install: remove that table (or `codex mcp remove %s`), then run the install again", path, ServerName, ServerName)
		}
	}
	return nil
}

// FileRecord is one file of an install in the manifest.
type FileRecord struct {
	Path        string   `json:"path"`
	CreatedFile bool     `json:"created_file"`
	CreatedDirs []string `json:"created_dirs,omitempty"`
	Items       []Item   `json:"items"`
}

// Record is one install in the manifest.
type Record struct {
	Host    string       `json:"host"`
	Scope   string       `json:"scope"`
	Project string       `json:"project"` // the project folder (project scope) or where it was run
	Command []string     `json:"command"`
	Files   []FileRecord `json:"files"`
}

func (r *Record) file(path string) *FileRecord {
	for i := range r.Files {
		if r.Files[i].Path == path {
			return &r.Files[i]
		}
	}
	return nil
}

// Manifest records what each install added, so an uninstall removes exactly that. It lives
// in the user's config directory (hosts.json), never in a project.
type Manifest struct {
	Installs []Record `json:"installs"`
	path     string
}

// LoadManifest reads the manifest in the config directory dir (empty when there is none).
func LoadManifest(dir string) (*Manifest, error) {
	m := &Manifest{path: filepath.Join(dir, "hosts.json")}
	b, err := readFile(m.path)
	if err != nil || b == nil {
		return m, err
	}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("read %s: %w (remove it to start over; installed files then have to be removed by hand)", m.path, err)
	}
	return m, nil
}

// Path is the manifest's file.
func (m *Manifest) Path() string { return m.path }

// matches: user-scope installs are one per host; project ones one per host and project.
func matches(r Record, host, scope, projectDir string) bool {
	return r.Host == host && r.Scope == scope && (scope == ScopeUser || r.Project == projectDir)
}

func (m *Manifest) find(host, scope, projectDir string) *Record {
	for i := range m.Installs {
		if matches(m.Installs[i], host, scope, projectDir) {
			return &m.Installs[i]
		}
	}
	return nil
}

func (m *Manifest) put(r Record) {
	if cur := m.find(r.Host, r.Scope, r.Project); cur != nil {
		*cur = r
		return
	}
	m.Installs = append(m.Installs, r)
}

func (m *Manifest) drop(host, scope, projectDir string) {
	m.Installs = slices.DeleteFunc(m.Installs, func(r Record) bool { return matches(r, host, scope, projectDir) })
}

func (m *Manifest) save() error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.path, err)
	}
	if err := os.MkdirAll(filepath.Dir(m.path), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(m.path), err)
	}
	_, err = project.WriteFile(m.path, append(b, '\n'), 0o600)
	return err
}

// Installed is one install as status shows it.
type Installed struct {
	Host    string   `json:"host"`
	Scope   string   `json:"scope"`
	Project string   `json:"project,omitempty"`
	Command []string `json:"command"`
	Files   []string `json:"files"`
	// Missing lists what the install wrote that is gone since (a removed file or entry).
	Missing []string `json:"missing,omitempty"`
	// Changed lists what the install wrote that is there but changed since.
	Changed []string `json:"changed,omitempty"`
}

// Status lists the installs that apply to projectDir: its project-scope ones and every
// user-scope one, each checked against the files as they are now.
func Status(m *Manifest, projectDir string) []Installed {
	var out []Installed
	for _, host := range Hosts() {
		for _, r := range m.Installs {
			if r.Host != host || (r.Scope == ScopeProject && r.Project != projectDir) {
				continue
			}
			in := Installed{Host: r.Host, Scope: r.Scope, Command: r.Command}
			if r.Scope == ScopeProject {
				in.Project = r.Project
			}
			for _, f := range r.Files {
				in.Files = append(in.Files, f.Path)
				gone, changed := drift(f)
				in.Missing = append(in.Missing, gone...)
				in.Changed = append(in.Changed, changed...)
			}
			out = append(out, in)
		}
	}
	return out
}

// drift lists f's items that are gone, and those changed, since the install wrote them.
func drift(f FileRecord) (gone, changed []string) {
	b, err := readFile(f.Path)
	if err != nil || b == nil {
		return []string{f.Path}, nil
	}
	for _, it := range f.Items {
		switch it.Kind {
		case itemFile:
			if string(b) != it.Text {
				changed = append(changed, f.Path)
			}
		case itemBlock:
			switch {
			case !bytes.Contains(b, []byte(blockBegin(f.Path))) && !bytes.Contains(b, []byte(legacyBegin(f.Path))):
				gone = append(gone, f.Path+" (the loopx block)")
			case !bytes.Contains(b, []byte(strings.TrimRight(it.Text, "\n"))):
				changed = append(changed, f.Path+" (the loopx block)")
			}
		case itemSet, itemAppend:
			doc, err := parseJSON(b)
			if err != nil {
				return gone, append(changed, f.Path+" (no longer plain JSON)")
			}
			cur := doc
			for _, k := range it.Keys {
				if cur = cur.get(k); cur == nil {
					break
				}
			}
			val, _ := parseJSON(it.Value)
			where := f.Path + ": " + strings.Join(it.Keys, ".")
			switch {
			case cur == nil:
				gone = append(gone, where)
			case val == nil:
			case it.Kind == itemSet && cur.canonical() != val.canonical():
				changed = append(changed, where)
			case it.Kind == itemAppend && (!cur.isArr || !slices.ContainsFunc(cur.arr, func(n *node) bool { return n.canonical() == val.canonical() })):
				gone = append(gone, where+" ("+string(it.Value)+")")
			}
		}
	}
	return gone, changed
}

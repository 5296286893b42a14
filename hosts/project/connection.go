package project

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Dir is the folder in a project's root that holds its LoopX connection.
const Dir = ".loopx"

// connectionFile is the connection's file name inside Dir.
const connectionFile = "connection.json"

// ErrNotConnected: no folder from the start up to the file system root holds a connection.
var ErrNotConnected = errors.New("not connected to LoopX")

// Connection is what a project stores about its link to LoopX. It holds no secret.
type Connection struct {
	ServerURL string `json:"server_url"`
	GoalID    string `json:"goal_id"`
	AgentID   string `json:"agent_id"`
}

// Path is the connection file of the project rooted at root.
func Path(root string) string { return filepath.Join(root, Dir, connectionFile) }

// Find returns the nearest folder, from dir up, whose .loopx holds a connection, and the
// connection. ErrNotConnected when there is none; a file that does not parse is an error
// naming it.
func Find(dir string) (root string, c Connection, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return "", Connection{}, fmt.Errorf("find the project's connection: %w", err)
	}
	for {
		c, err := Load(dir)
		if err == nil {
			return dir, c, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", Connection{}, err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", Connection{}, ErrNotConnected
		}
		dir = parent
	}
}

// Load reads the connection of the project rooted at root; fs.ErrNotExist when it has none.
func Load(root string) (Connection, error) {
	b, err := os.ReadFile(Path(root))
	if err != nil {
		return Connection{}, err
	}
	var c Connection
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Connection{}, fmt.Errorf("read %s: %w (fix the file or run loopx connect again after removing it)", Path(root), err)
	}
	if c.ServerURL == "" || c.GoalID == "" || c.AgentID == "" {
		return Connection{}, fmt.Errorf("read %s: server_url, goal_id and agent_id are all required (run loopx connect again after removing it)", Path(root))
	}
	return c, nil
}

// Save writes the connection of the project rooted at root; it reports whether the file
// changed (an identical one is left alone).
func Save(root string, c Connection) (bool, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return false, fmt.Errorf("encode connection: %w", err)
	}
	return WriteFile(Path(root), append(b, '\n'), 0o644)
}

// WriteFile replaces path with data atomically (a temporary file renamed into place),
// creating its folder; it reports whether anything changed. An existing file keeps its mode;
// a new one gets perm.
func WriteFile(path string, data []byte, perm fs.FileMode) (bool, error) {
	old, err := os.ReadFile(path)
	if err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if st, err := os.Stat(path); err == nil {
		perm = st.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
}

// GitignoreHint returns the line to add to the project's .gitignore so .loopx/ stays out of
// git, or "" when .gitignore already ignores it.
func GitignoreHint(root string) string {
	b, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			switch strings.TrimSpace(line) {
			case ".loopx", ".loopx/", "/.loopx", "/.loopx/":
				return ""
			}
		}
	}
	return Dir + "/"
}

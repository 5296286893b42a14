package project

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ConfigDir is the user's LoopX config directory: LOOPX_CONFIG_DIR, else
// $XDG_CONFIG_HOME/loopx, else $HOME/.config/loopx.
func ConfigDir(getenv func(string) string) (string, error) {
	if d := getenv("LOOPX_CONFIG_DIR"); d != "" {
		return filepath.Abs(d)
	}
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "loopx"), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "loopx"), nil
	}
	return "", errors.New("no config directory: set HOME, XDG_CONFIG_HOME or LOOPX_CONFIG_DIR")
}

// credentialsFile is the token file's name in the config directory.
const credentialsFile = "credentials.json"

// Credentials are the agent tokens this user keeps, one per (server, goal, agent), in the
// config directory with mode 0600.
type Credentials struct {
	dir string
}

// NewCredentials keeps tokens in the config directory dir.
func NewCredentials(dir string) *Credentials { return &Credentials{dir: dir} }

// Path is the credentials file.
func (c *Credentials) Path() string { return filepath.Join(c.dir, credentialsFile) }

type credentialsDoc struct {
	Tokens []storedToken `json:"tokens"`
}

type storedToken struct {
	ServerURL string `json:"server_url"`
	GoalID    string `json:"goal_id"`
	AgentID   string `json:"agent_id"`
	Token     string `json:"token"`
}

// NormalizeURL is the form server URLs are compared in: no trailing slash, lower-case
// scheme and host.
func NormalizeURL(u string) string {
	u = strings.TrimRight(strings.TrimSpace(u), "/")
	if scheme, rest, ok := strings.Cut(u, "://"); ok {
		host, path, _ := strings.Cut(rest, "/")
		u = strings.ToLower(scheme) + "://" + strings.ToLower(host)
		if path != "" {
			u += "/" + path
		}
	}
	return u
}

func (c *Credentials) read() (credentialsDoc, error) {
	var doc credentialsDoc
	b, err := os.ReadFile(c.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return doc, fmt.Errorf("read %s: %w", c.Path(), err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return doc, fmt.Errorf("read %s: %w (fix or remove it; loopx connect stores tokens again)", c.Path(), err)
	}
	return doc, nil
}

// Token returns the stored token of the agent on that server, or "" when there is none.
func (c *Credentials) Token(serverURL, goalID, agentID string) (string, error) {
	doc, err := c.read()
	if err != nil {
		return "", err
	}
	u := NormalizeURL(serverURL)
	for _, t := range doc.Tokens {
		if NormalizeURL(t.ServerURL) == u && t.GoalID == goalID && t.AgentID == agentID {
			return t.Token, nil
		}
	}
	return "", nil
}

// SaveToken stores (or replaces) the token of the agent on that server. The file is mode
// 0600 in a 0700 directory; it reports whether the file changed.
func (c *Credentials) SaveToken(serverURL, goalID, agentID, token string) (bool, error) {
	doc, err := c.read()
	if err != nil {
		return false, err
	}
	u := NormalizeURL(serverURL)
	found := false
	for i, t := range doc.Tokens {
		if NormalizeURL(t.ServerURL) == u && t.GoalID == goalID && t.AgentID == agentID {
			doc.Tokens[i].Token, found = token, true
		}
	}
	if !found {
		doc.Tokens = append(doc.Tokens, storedToken{ServerURL: u, GoalID: goalID, AgentID: agentID, Token: token})
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return false, fmt.Errorf("encode credentials: %w", err)
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return false, fmt.Errorf("create %s: %w", c.dir, err)
	}
	if err := os.Chmod(c.dir, 0o700); err != nil {
		return false, fmt.Errorf("protect %s: %w", c.dir, err)
	}
	changed, err := WriteFile(c.Path(), append(b, '\n'), 0o600)
	if err != nil {
		return false, err
	}
	// WriteFile keeps an existing file's mode: a token file is never readable by others.
	if err := os.Chmod(c.Path(), 0o600); err != nil {
		return false, fmt.Errorf("protect %s: %w", c.Path(), err)
	}
	return changed, nil
}

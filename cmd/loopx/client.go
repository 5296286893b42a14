package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"loopx/api/client"
	"loopx/hosts/project"
	"loopx/server"
)

// serverURL is where the CLI calls: LOOPX_URL, else the project's connection, else the
// local default. local reports the last case (or LOOPX_URL naming the default).
func (a *app) serverURL() (base string, local bool, err error) {
	if u := a.getenv("LOOPX_URL"); u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return "", false, usageError{fmt.Errorf("LOOPX_URL: %q is not an http(s) URL like http://%s", u, server.DefaultListen)}
		}
		return strings.TrimRight(u, "/"), project.NormalizeURL(u) == "http://"+server.DefaultListen, nil
	}
	if _, conn, found, err := a.connection(); err != nil {
		return "", false, err
	} else if found {
		return conn.ServerURL, project.NormalizeURL(conn.ServerURL) == "http://"+server.DefaultListen, nil
	}
	return "http://" + server.DefaultListen, true, nil
}

// newClient is the client a person's command uses: LOOPX_TOKEN, else (for the local server)
// the admin token `loopx serve` keeps under LOOPX_HOME, else the connected agent's stored
// token.
func (a *app) newClient() (*client.Client, error) {
	if err := checkIdempotencyFlag(a.idemKey); err != nil {
		return nil, err
	}
	base, local, err := a.serverURL()
	if err != nil {
		return nil, err
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{fmt.Errorf("LOOPX_URL: %q is not an http(s) URL like http://%s", base, server.DefaultListen)}
	}
	token := a.getenv("LOOPX_TOKEN")
	if token == "" && local {
		if home := a.serverHome(); home != "" {
			token, _ = server.ReadAdminToken(home)
		}
	}
	if token == "" {
		token, err = a.storedToken(base)
		if err != nil {
			return nil, err
		}
	}
	if token == "" {
		return nil, usageError{errors.New("LOOPX_TOKEN: not set; set it to the admin token or an agent token (loopx agent register prints one), or run loopx connect in the project")}
	}
	return a.clientFor(base, token)
}

// storedToken is the connected agent's token kept in the user's config directory, or "".
func (a *app) storedToken(base string) (string, error) {
	_, conn, found, err := a.connection()
	if err != nil || !found || project.NormalizeURL(conn.ServerURL) != project.NormalizeURL(base) {
		return "", err
	}
	creds, err := a.credentials()
	if err != nil {
		return "", usageError{err}
	}
	return creds.Token(base, conn.GoalID, conn.AgentID)
}

func (a *app) clientFor(base, token string) (*client.Client, error) {
	c, err := client.New(client.Options{BaseURL: base, Token: token})
	if err != nil {
		return nil, usageError{fmt.Errorf("LOOPX_URL: %w", err)}
	}
	return c, nil
}

// serverHome is LOOPX_HOME, default ~/.loopx; "" when neither is known.
func (a *app) serverHome() string {
	if home := a.getenv("LOOPX_HOME"); home != "" {
		return home
	}
	if h := a.getenv("HOME"); h != "" {
		return filepath.Join(h, ".loopx")
	}
	return ""
}

func (a *app) credentials() (*project.Credentials, error) {
	dir, err := project.ConfigDir(a.getenv)
	if err != nil {
		return nil, err
	}
	return project.NewCredentials(dir), nil
}

// key is the Idempotency-Key of one mutating call: --idempotency-key, else a fresh random
// one per invocation.
func (a *app) key() string {
	if a.idemKey != "" {
		return a.idemKey
	}
	if a.randomKey == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		a.randomKey = hex.EncodeToString(b)
	}
	return a.randomKey
}

// workDir is the folder the command runs in.
func (a *app) workDir() (string, error) {
	if a.dir != "" {
		return a.dir, nil
	}
	d, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("read the current folder: %w", err)
	}
	return d, nil
}

// connection is the project connection found from the working folder up (read once).
func (a *app) connection() (root string, c project.Connection, found bool, err error) {
	if !a.conn.read {
		a.conn.read = true
		dir, err := a.workDir()
		if err != nil {
			return "", project.Connection{}, false, err
		}
		a.conn.root, a.conn.c, a.conn.err = project.Find(dir)
		if errors.Is(a.conn.err, project.ErrNotConnected) {
			a.conn.err = nil
		} else if a.conn.err == nil {
			a.conn.found = true
		}
	}
	if a.conn.err != nil {
		return "", project.Connection{}, false, usageError{a.conn.err}
	}
	return a.conn.root, a.conn.c, a.conn.found, nil
}

// fromConnectionExceptions lists the flags a command does not take from the project's connection: a
// goal or agent being created, and filters.
var fromConnectionExceptions = map[string]bool{
	"loopx goal create goal-id":     true,
	"loopx agent register agent-id": true,
	"loopx evidence list agent-id":  true,
	"loopx audit goal-id":           true,
	"loopx connect goal-id":         true,
	"loopx connect agent-id":        true,
}

// fillFromConnection sets --goal-id and --agent-id, when the command has them and they were
// not given, from the project's connection (.loopx/ in this folder or a parent).
func (a *app) fillFromConnection(c *cobra.Command) error {
	if f := c.Flags().Lookup("project"); f != nil && f.Changed {
		if err := a.useProjectDir(f.Value.String()); err != nil {
			return err
		}
	}
	var missing []string
	for _, name := range []string{"goal-id", "agent-id"} {
		f := c.Flags().Lookup(name)
		if f == nil || f.Changed || fromConnectionExceptions[c.CommandPath()+" "+name] {
			continue
		}
		missing = append(missing, name)
	}
	if len(missing) == 0 {
		return nil
	}
	_, conn, found, err := a.connection()
	if err != nil || !found {
		return err
	}
	for _, name := range missing {
		v := conn.GoalID
		if name == "agent-id" {
			v = conn.AgentID
		}
		if err := c.Flags().Set(name, v); err != nil {
			return usageError{fmt.Errorf("--%s from %s: %w", name, project.Path(a.conn.root), err)}
		}
	}
	return nil
}

// checkIdempotencyFlag refuses an --idempotency-key the server would refuse (or that could
// not even travel in a header) as a usage error, before anything is sent.
func checkIdempotencyFlag(k string) error {
	switch {
	case len(k) > 200:
		return usageError{fmt.Errorf("--idempotency-key: is %d characters; at most 200", len(k))}
	case !utf8.ValidString(k):
		return usageError{errors.New("--idempotency-key: is not UTF-8 text; use printable characters")}
	case strings.IndexFunc(k, unicode.IsControl) >= 0:
		return usageError{errors.New("--idempotency-key: contains a control character; use printable characters")}
	}
	return nil
}

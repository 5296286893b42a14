package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"loopx/api/client"
	"loopx/hosts/project"
)

// serverURL is the API the command calls (clientSettings.Server).
func (a *app) serverURL() (string, error) {
	s := a.settings()
	return s.Server, s.serverErr
}

// newClient is the client a person's command uses, with the server and token of the client
// settings.
func (a *app) newClient() (*client.Client, error) {
	if err := checkIdempotencyFlag(a.idemKey); err != nil {
		return nil, err
	}
	s := a.settings()
	if s.serverErr != nil {
		return nil, s.serverErr
	}
	if s.tokenErr != nil {
		return nil, s.tokenErr
	}
	return a.clientFor(s.Server, s.Token)
}

func (a *app) clientFor(base, token string) (*client.Client, error) {
	c, err := client.New(client.Options{BaseURL: base, Token: token})
	if err != nil {
		return nil, usageError{fmt.Errorf("LOOPX_URL: %w", err)}
	}
	return c, nil
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

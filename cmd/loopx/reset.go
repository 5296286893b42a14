package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"loopx/server"
	"loopx/store/devpg"
)

// resetTarget is one directory `loopx reset --sandbox` deletes.
type resetTarget struct {
	Path string `json:"path"`
	What string `json:"what"`
}

func (a *app) resetCommand() *cobra.Command {
	var sandbox, yes bool
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Start over: delete the private database and the sandbox's chats (asks first)",
		Long: `Start over with a fresh private database and a fresh sandbox, as on the first make run.

loopx reset --sandbox deletes, after asking, the private PostgreSQL cluster of LOOPX_HOME
(under LOOPX_HOME/pg, or where loopx serve and loopx doctor say it lives when the postgres
user cannot reach LOOPX_HOME) together with the sandbox's persisted chats, messages and cards
(LOOPX_HOME/sandbox, or LOOPX_SANDBOX_STATE): the two go together, since the database's rows
point at the sandbox's messages. The admin token is kept. loopx serve must be stopped first;
a database named by DATABASE_URL is never touched.`,
		Example: `  loopx reset --sandbox
  loopx reset --sandbox --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !sandbox {
				return usageError{errors.New("say what to start over: --sandbox (the private database and the sandbox's chats under LOOPX_HOME)")}
			}
			cfg, err := server.LoadConfig(a.getenv)
			if err != nil {
				return usageError{fmt.Errorf("load config: %w", err)}
			}
			if cfg.DatabaseURL != "" {
				return usageError{errors.New("DATABASE_URL is set: loopx reset deletes only the private database it made under LOOPX_HOME, never one it was given; unset DATABASE_URL, or reset that database yourself")}
			}
			// The lock of a running serve (or migrate) on this home keeps its cluster safe.
			unlock, err := server.LockHome(cfg, "reset")
			if err != nil {
				return err
			}
			defer unlock()
			targets, err := resetTargets(cfg)
			if err != nil {
				return err
			}
			if len(targets) == 0 {
				return a.resetDone(nil, "nothing to delete: LOOPX_HOME "+cfg.Home+" has no private database or sandbox state")
			}
			fmt.Fprintln(a.stderr, "This deletes, for good:")
			for _, t := range targets {
				fmt.Fprintf(a.stderr, "  %s  (%s)\n", t.Path, t.What)
			}
			if !yes {
				fmt.Fprint(a.stderr, "The admin token is kept. Type yes to delete them: ")
				line, _ := bufio.NewReader(a.stdin).ReadString('\n')
				if strings.TrimSpace(line) != "yes" {
					return errors.New("not confirmed: nothing was deleted")
				}
			}
			for _, t := range targets {
				if err := os.RemoveAll(t.Path); err != nil {
					return fmt.Errorf("delete %s: %w", t.Path, err)
				}
			}
			return a.resetDone(targets, "the next loopx serve (make run) starts with a fresh database and sandbox")
		},
	}
	cmd.Flags().BoolVar(&sandbox, "sandbox", false, "delete the private database and the sandbox's chats under LOOPX_HOME")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}

func (a *app) resetDone(deleted []resetTarget, note string) error {
	if deleted == nil {
		deleted = []resetTarget{}
	}
	if a.format == "json" {
		writeJSONTo(a.stdout, map[string]any{"deleted": deleted, "note": note})
		return nil
	}
	for _, t := range deleted {
		fmt.Fprintf(a.stdout, "deleted %s (%s)\n", t.Path, t.What)
	}
	fmt.Fprintln(a.stdout, note)
	return nil
}

// resetTargets lists what exists of the home's private database and sandbox state.
func resetTargets(cfg server.Config) ([]resetTarget, error) {
	home := filepath.Join(cfg.Home, "pg")
	cluster, moved, err := devpg.Locate(devpg.Options{Dir: home})
	if err != nil {
		return nil, err
	}
	candidates := []resetTarget{{cluster, "the private database"}}
	if moved {
		candidates = append(candidates, resetTarget{home, "where LOOPX_HOME records the private database's place"})
	}
	if cfg.SandboxState != "" {
		candidates = append(candidates, resetTarget{cfg.SandboxState, "the sandbox's chats, messages and cards"})
	}
	var out []resetTarget
	for _, c := range candidates {
		if _, err := os.Stat(c.Path); err == nil {
			out = append(out, c)
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("inspect %s: %w", c.Path, err)
		}
	}
	return out, nil
}

// privateDatabaseCheck says where the private database of this machine's server lives (a
// line of loopx doctor): under LOOPX_HOME, or elsewhere when the postgres user cannot reach it.
func privateDatabaseCheck(_ context.Context, e doctorEnv) check {
	c := check{Name: "private-db", OK: true}
	cfg, err := server.LoadConfig(e.getenv)
	switch {
	case err != nil:
		c.Detail = "not checked: the settings are wrong (see settings)"
		return c
	case cfg.DatabaseURL != "":
		c.Detail = "DATABASE_URL is set: the server uses that database, no private one"
		return c
	case !e.client.Local:
		c.Detail = "not checked: " + e.client.Server + " is not this machine's loopx serve, whose home this machine may not have"
		return c
	}
	dir, moved, err := devpg.Locate(devpg.Options{Dir: filepath.Join(cfg.Home, "pg")})
	switch {
	case err != nil:
		c.OK, c.Detail = false, err.Error()
	case moved:
		c.Detail = fmt.Sprintf("cluster at %s, outside LOOPX_HOME (the postgres user cannot reach %s); loopx reset --sandbox starts over", dir, cfg.Home)
	default:
		c.Detail = fmt.Sprintf("cluster at %s; loopx reset --sandbox starts over", dir)
	}
	return c
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"loopx/server"
)

func (a *app) secretsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Manage the key that seals runner secrets at rest",
		Example: `  loopx secrets rotate-key
  LOOPX_SECRET_KEY=$NEW LOOPX_SECRET_KEY_PREVIOUS=$OLD DATABASE_URL=... loopx secrets rotate-key`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "rotate-key",
		Short: "Seal every runner secret again under a new key",
		Long: `Seal every stored runner secret (webhook signing secrets, exec env values) again under the
primary key, in one transaction, opening each with any key given.

With the key kept under LOOPX_HOME (LOOPX_SECRET_KEY unset), it makes a new key first: the
new one goes to LOOPX_HOME/secret-key, the old one to LOOPX_HOME/secret-key.previous, and
every secret is sealed again under the new one. Stop loopx serve first (it holds the home);
start it again afterwards.

With LOOPX_SECRET_KEY set, the operator brings the new key: set LOOPX_SECRET_KEY to the new
key and LOOPX_SECRET_KEY_PREVIOUS to the old one on every replica (restart them: they then
read both), run this command with the same two variables, then drop
LOOPX_SECRET_KEY_PREVIOUS. A secret that no key given opens stops the command with nothing
changed, naming the secret. docs/operations.md walks through both.`,
		Example: `  loopx secrets rotate-key
  LOOPX_SECRET_KEY=$(openssl rand -base64 32) LOOPX_SECRET_KEY_PREVIOUS=$OLD loopx secrets rotate-key`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := server.LoadConfig(a.getenv)
			if err != nil {
				return usageError{fmt.Errorf("load config: %w", err)}
			}
			cfg.Logger = server.NewLogger(a.stderr, cfg.LogFormat, cfg.LogLevel)
			n, keyID, err := server.RotateKey(c.Context(), cfg)
			if err != nil {
				return err
			}
			if a.format == "json" {
				writeJSONTo(a.stdout, map[string]any{"resealed": n, "key_id": keyID})
				return nil
			}
			fmt.Fprintf(a.stdout, "sealed %d runner secrets again under key %s\n", n, keyID)
			return nil
		},
	})
	return cmd
}

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"loopx/store"
)

// Files under LOOPX_HOME that hold the secret key when LOOPX_SECRET_KEY is unset.
const (
	secretKeyFile         = "secret-key"
	secretKeyPreviousFile = "secret-key.previous"
)

// secretKeyring is the keyring runner secrets are sealed with: LOOPX_SECRET_KEY (and
// LOOPX_SECRET_KEY_PREVIOUS), else LOOPX_HOME/secret-key (created once, mode 0600, like the
// admin token) and LOOPX_HOME/secret-key.previous.
func secretKeyring(cfg Config) (*store.Keyring, error) {
	if cfg.SecretKey != nil {
		return store.NewKeyring(cfg.SecretKey, cfg.SecretKeyPrevious...)
	}
	primary, err := homeSecretKey(cfg.Home)
	if err != nil {
		return nil, err
	}
	previous, err := readKeyFile(filepath.Join(cfg.Home, secretKeyPreviousFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return store.NewKeyring(primary, append(previous, cfg.SecretKeyPrevious...)...)
}

// homeSecretKey reads LOOPX_HOME/secret-key, creating it the first time. Two processes
// starting at once on one home agree on the first key written (link fails when it exists).
func homeSecretKey(home string) ([]byte, error) {
	path := filepath.Join(home, secretKeyFile)
	keys, err := readKeyFile(path)
	if err == nil {
		if len(keys) != 1 {
			return nil, fmt.Errorf("read %s: want one key, found %d", path, len(keys))
		}
		return keys[0], nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", home, err)
	}
	k := store.NewSecretKey()
	if err := writeKeyFile(home, path, [][]byte{k}, false); errors.Is(err, fs.ErrExist) {
		return homeSecretKey(home)
	} else if err != nil {
		return nil, err
	}
	return k, nil
}

// readKeyFile reads keys written one per line (base64).
func readKeyFile(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	for i, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		k, err := store.ParseSecretKey(line)
		if err != nil {
			return nil, fmt.Errorf("read %s: line %d %w", path, i+1, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// writeKeyFile writes keys aside and moves them into place: with replace false it links
// (failing with fs.ErrExist when the file exists), else it renames over the old file.
func writeKeyFile(dir, path string, keys [][]byte, replace bool) error {
	f, err := os.CreateTemp(dir, ".secret-key-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	for _, k := range keys {
		if _, err := f.WriteString(store.FormatSecretKey(k) + "\n"); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if replace {
		if err := os.Rename(f.Name(), path); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fs.ErrExist
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

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
			cfg, err := loadConfig(a.getenv)
			if err != nil {
				return usageError{fmt.Errorf("load config: %w", err)}
			}
			ctx := c.Context()
			logger := newLogger(a.stderr, cfg.LogFormat, cfg.LogLevel)
			unlock, err := lockHome(cfg, "secrets rotate-key")
			if err != nil {
				return err
			}
			defer unlock()
			if cfg.SecretKey == nil {
				// Home keys: the new key is written (old one kept as previous) before any row
				// is sealed under it, so a failure in between leaves every secret readable.
				old, err := homeSecretKey(cfg.Home)
				if err != nil {
					return err
				}
				prev, err := readKeyFile(filepath.Join(cfg.Home, secretKeyPreviousFile))
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				if err := writeKeyFile(cfg.Home, filepath.Join(cfg.Home, secretKeyPreviousFile), append([][]byte{old}, prev...), true); err != nil {
					return err
				}
				if err := writeKeyFile(cfg.Home, filepath.Join(cfg.Home, secretKeyFile), [][]byte{store.NewSecretKey()}, true); err != nil {
					return err
				}
			}
			keys, err := secretKeyring(cfg)
			if err != nil {
				return err
			}
			url, stopDB, err := openDatabase(ctx, cfg, logger)
			if err != nil {
				return err
			}
			defer stopDB()
			opened, err := store.OpenWith(ctx, url, store.OpenOptions{Pooler: cfg.PgBouncer})
			if err != nil {
				return fmt.Errorf("connect to database: %w", err)
			}
			defer opened.Pool.Close()
			st := store.New(opened.Pool, store.Options{Keyring: keys, TransactionPooling: opened.TransactionPooling})
			n, err := st.ReencryptSecrets(ctx)
			if err != nil {
				return err
			}
			if a.format == "json" {
				writeJSONTo(a.stdout, map[string]any{"resealed": n, "key_id": keys.PrimaryID()})
				return nil
			}
			fmt.Fprintf(a.stdout, "sealed %d runner secrets again under key %s\n", n, keys.PrimaryID())
			return nil
		},
	})
	return cmd
}

package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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

// RotateKey seals every runner secret again under the primary key, in one transaction. With
// the key kept under LOOPX_HOME (no LOOPX_SECRET_KEY) it makes a new key first, keeping the
// old one as previous. It holds the home's lock meanwhile. It returns how many secrets were
// sealed again and the primary key's id.
func RotateKey(ctx context.Context, cfg Config) (n int, keyID string, err error) {
	logger := cmp.Or(cfg.Logger, NewLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel))
	unlock, err := LockHome(cfg, "secrets rotate-key")
	if err != nil {
		return 0, "", err
	}
	defer unlock()
	if cfg.SecretKey == nil {
		// Home keys: the new key is written (old one kept as previous) before any row
		// is sealed under it, so a failure in between leaves every secret readable.
		old, err := homeSecretKey(cfg.Home)
		if err != nil {
			return 0, "", err
		}
		prev, err := readKeyFile(filepath.Join(cfg.Home, secretKeyPreviousFile))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, "", err
		}
		if err := writeKeyFile(cfg.Home, filepath.Join(cfg.Home, secretKeyPreviousFile), append([][]byte{old}, prev...), true); err != nil {
			return 0, "", err
		}
		if err := writeKeyFile(cfg.Home, filepath.Join(cfg.Home, secretKeyFile), [][]byte{store.NewSecretKey()}, true); err != nil {
			return 0, "", err
		}
	}
	keys, err := secretKeyring(cfg)
	if err != nil {
		return 0, "", err
	}
	url, stopDB, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return 0, "", err
	}
	defer stopDB()
	opened, err := store.OpenWith(ctx, url, store.OpenOptions{Pooler: cfg.PgBouncer})
	if err != nil {
		return 0, "", fmt.Errorf("connect to database: %w", err)
	}
	defer opened.Pool.Close()
	st := store.New(opened.Pool, store.Options{Keyring: keys, TransactionPooling: opened.TransactionPooling})
	n, err = st.ReencryptSecrets(ctx)
	if err != nil {
		return 0, "", err
	}
	return n, keys.PrimaryID(), nil
}

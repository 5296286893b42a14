package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

const tokenFile = "admin-token"

// AdminTokenPath is the file under home that holds the admin token serve generated when
// LOOPX_ADMIN_TOKEN is unset; clients on the same machine read it (ReadAdminToken).
func AdminTokenPath(home string) string { return filepath.Join(home, tokenFile) }

// ReadAdminToken reads the admin token serve keeps under home.
func ReadAdminToken(home string) (string, error) { return readToken(AdminTokenPath(home)) }

// AdminToken returns the configured admin token, or the one stored under home, generating
// and storing it (0600) on first use.
func AdminToken(cfg Config) (string, error) {
	if cfg.AdminToken != "" {
		return string(cfg.AdminToken), nil
	}
	path := filepath.Join(cfg.Home, tokenFile)
	if t, err := readToken(path); err == nil {
		return t, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", cfg.Home, err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate admin token: %w", err)
	}
	t := hex.EncodeToString(b)
	// Write aside, then link into place: link fails when the name exists, so two replicas
	// starting at once on one home agree on the first token, and nobody reads a half file.
	f, err := os.CreateTemp(cfg.Home, ".admin-token-*")
	if err != nil {
		return "", fmt.Errorf("write admin token: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(t + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("write admin token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write admin token: %w", err)
	}
	if err := os.Link(f.Name(), path); errors.Is(err, fs.ErrExist) {
		return readToken(path)
	} else if err != nil {
		return "", fmt.Errorf("write admin token: %w", err)
	}
	return t, nil
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if len(t) < 16 {
		return "", fmt.Errorf("read admin token: %s holds fewer than 16 characters; delete it and restart loopx serve", path)
	}
	return t, nil
}

package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// servingFile is the record, under LOOPX_HOME, of where the running `loopx serve` can be
// reached.
const servingFile = "serving.json"

// Serving is where this machine's `loopx serve` on a LOOPX_HOME can be reached: clients on
// the same machine (the CLI, `loopx chat`, `loopx doctor`, `loopx mcp`) find the server
// there when LOOPX_LISTEN or LOOPX_SANDBOX_ADDR moved it off the default ports. It never
// holds a secret: the admin token stays in its own file (AdminTokenPath).
//
// Replicas that share a home (each with the DATABASE_URL) overwrite each other's record; the
// last one to start is the one recorded, which is fine: any of them serves the same state.
type Serving struct {
	PID        int       `json:"pid"`                   // the serving process
	URL        string    `json:"url"`                   // the API, e.g. http://127.0.0.1:7377
	SandboxURL string    `json:"sandbox_url,omitempty"` // the Lark sandbox, when serve runs it
	Since      time.Time `json:"since"`
}

// ServingPath is the file under home that records the running serve (WriteServing).
func ServingPath(home string) string { return filepath.Join(home, servingFile) }

// WriteServing records s under home, atomically (written aside, then renamed into place), so
// a reader sees the old record or the new one, never half of one.
func WriteServing(home string, s Serving) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("record the serving address: %w", err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("record the serving address: %w", err)
	}
	f, err := os.CreateTemp(home, "."+servingFile+".*")
	if err != nil {
		return fmt.Errorf("record the serving address: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("record the serving address: write %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record the serving address: write %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), ServingPath(home)); err != nil {
		return fmt.Errorf("record the serving address: %w", err)
	}
	return nil
}

// ReadServing reads the record of the serve running on home. found is false when there is
// none, or when its process is gone (a serve that was killed leaves its record behind). A
// record that does not parse is an error naming the file.
//
// A process id can be reused after a crash: a record naming a reused id passes for live, and
// a client then fails to reach its URL with an error that names the URL.
func ReadServing(home string) (s Serving, found bool, err error) {
	path := ServingPath(home)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Serving{}, false, nil
	}
	if err != nil {
		return Serving{}, false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &s); err != nil || s.PID <= 0 || !isHTTPURL(s.URL) || (s.SandboxURL != "" && !isHTTPURL(s.SandboxURL)) {
		return Serving{}, false, fmt.Errorf("read %s: not a record of a running loopx serve (delete it: loopx serve writes it again when it starts)", path)
	}
	if !processAlive(s.PID) {
		return Serving{}, false, nil
	}
	return s, true, nil
}

// RemoveServing deletes the record under home when it still names pid (a clean stop); a
// replica that started since on the same home keeps its own.
func RemoveServing(home string, pid int) error {
	path := ServingPath(home)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	var s Serving
	if json.Unmarshal(b, &s) == nil && s.PID != pid {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// servingURL is the http URL a client on this machine reaches a listener on: a wildcard
// host (":7377", "0.0.0.0:7377", "[::]:7377") becomes the loopback address.
func servingURL(addr string) string { return "http://" + loopbackAddr(addr) }

// hostOf is the host:port of an http URL, or u itself when it does not parse.
func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return u
	}
	return p.Host
}

func isHTTPURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}

// processAlive reports whether a process with this id exists (signal 0 checks without
// sending; EPERM means it exists under another user).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// recordServing writes where this serve can be reached and returns the func that removes the
// record at a clean stop. A home it cannot write is logged, not fatal: clients then need
// LOOPX_URL (a container may run with a read-only home and every secret given).
func recordServing(d *deps, lis net.Listener) func() {
	s := Serving{PID: os.Getpid(), URL: servingURL(lis.Addr().String()), Since: d.now().UTC()}
	if d.sandboxURL != "" {
		s.SandboxURL = servingURL(hostOf(d.sandboxURL))
	}
	if err := WriteServing(d.cfg.Home, s); err != nil {
		d.logger.Warn("clients on this machine will not find this server by its LOOPX_HOME; they need LOOPX_URL", "err", err)
		return func() {}
	}
	return func() {
		if err := RemoveServing(d.cfg.Home, s.PID); err != nil {
			d.logger.Warn("remove the serving record", "err", err)
		}
	}
}

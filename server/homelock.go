package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// homeLockFile is the lock a process holds on LOOPX_HOME while it runs the private PostgreSQL
// cluster there.
const homeLockFile = "loopx.lock"

// homeHolder describes the process holding LOOPX_HOME; it is written into the lock file so
// that a second process can say who is in the way.
type homeHolder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`          // "serve" or "migrate"
	Listen  string    `json:"listen,omitempty"` // the API listener of a serve
	Since   time.Time `json:"since"`
}

// homeBusyError says that another LoopX process holds LOOPX_HOME.
type homeBusyError struct {
	home   string
	holder homeHolder // zero when the lock file could not be read
}

func (e *homeBusyError) Error() string {
	who := "another LoopX process"
	if h := e.holder; h.PID > 0 {
		who = fmt.Sprintf("another LoopX (loopx %s, pid %d", h.Command, h.PID)
		if h.Listen != "" {
			who += ", listening on " + h.Listen
		}
		who += ")"
	}
	return fmt.Sprintf("%s is running on LOOPX_HOME %s and its private database: stop it first, "+
		"or give this one another LOOPX_HOME, or a DATABASE_URL to share", who, e.home)
}

// LockHome takes the lock on home for a process that is about to run the private cluster
// there (nothing is locked when cfg.DatabaseURL is set: replicas may share a home then). It
// fails with a *homeBusyError naming the holder when another process has it. The kernel
// drops the lock when the process exits, so a crash never leaves a stale one; the returned
// func releases it earlier.
func LockHome(cfg Config, command string) (func(), error) {
	if cfg.DatabaseURL != "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return nil, fmt.Errorf("lock LOOPX_HOME: %w", err)
	}
	path := filepath.Join(cfg.Home, homeLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock LOOPX_HOME: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			busy := &homeBusyError{home: cfg.Home}
			if b, rerr := os.ReadFile(path); rerr == nil {
				_ = json.Unmarshal([]byte(strings.TrimSpace(string(b))), &busy.holder)
			}
			return nil, busy
		}
		return nil, fmt.Errorf("lock LOOPX_HOME %s: %w", path, err)
	}
	me, err := json.Marshal(homeHolder{PID: os.Getpid(), Command: command, Listen: listenOf(cfg, command), Since: time.Now().UTC()})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock LOOPX_HOME: %w", err)
	}
	// The holder is written only once the lock is ours, so the file never names a process
	// that lost the race.
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(append(me, '\n'), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock LOOPX_HOME: write %s: %w", path, err)
	}
	return func() {
		// The file stays: removing it would let a process that opened it meanwhile lock a
		// name nobody else sees.
		_ = f.Truncate(0)
		_ = f.Close()
	}, nil
}

func listenOf(cfg Config, command string) string {
	if command != "serve" {
		return ""
	}
	return cfg.Listen
}

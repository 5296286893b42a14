package server

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"loopx/store"
)

// Build says which loopx this is: the release version, the commit it was built from and that
// commit's time, the Go release that compiled it, and the newest database migration it knows.
// `loopx version`, `loopx doctor`, /healthz and serve's first log line show it.
type Build struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	// Date is the commit's time (RFC 3339, UTC): a release is dated by its source, so that
	// building it again gives the same bytes.
	Date string `json:"date,omitempty"`
	// Modified: built from a working tree with changes that are not committed.
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	Schema   int64  `json:"schema"`
}

// devVersion is the version of a build that is not a release.
const devVersion = "dev"

// NewBuild describes this binary. A release build sets version, commit and date (make
// release passes them with -ldflags -X); otherwise the commit, its time and whether the tree
// was modified come from the VCS stamp `go build` records, and the version is "dev" (or the
// module version of a `go install` at a tag).
func NewBuild(version, commit, date string) Build {
	b := Build{Version: version, Commit: commit, Date: date, Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, Schema: store.LatestMigration()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				if b.Date == "" {
					b.Date = s.Value
				}
			case "vcs.modified":
				b.Modified = b.Modified || s.Value == "true" && commit == ""
			}
		}
	}
	if b.Version == "" {
		b.Version = devVersion
	}
	return b
}

// String is the one-line description: "v0.2.0 (commit 0123456789ab, 2026-12-04T17:43:13Z,
// go1.26.8 linux/amd64, schema 250)".
func (b Build) String() string {
	parts := []string{}
	if b.Commit != "" {
		c := b.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if b.Modified {
			c += " with uncommitted changes"
		}
		parts = append(parts, "commit "+c)
	}
	if b.Date != "" {
		parts = append(parts, b.Date)
	}
	parts = append(parts, b.Go+" "+b.Platform, fmt.Sprintf("schema %d", b.Schema))
	return b.Version + " (" + strings.Join(parts, ", ") + ")"
}

// newerSchemaError is the refusal of a binary older than its database: both versions, and
// the ways back and forward.
func newerSchemaError(b Build, err error) error {
	var newer *store.NewerSchemaError
	if !errors.As(err, &newer) {
		return err
	}
	by, forward := "a later release", "that release"
	if newer.Release != "" {
		by, forward = "loopx "+newer.Release, "loopx "+newer.Release
	}
	down := make([]string, len(newer.Unknown))
	for i, v := range newer.Unknown {
		down[i] = fmt.Sprint(v)
	}
	return wrapped{err: err, msg: fmt.Sprintf("this loopx (%s, schema version %d) is older than its database (schema version %d, migrated by %s) "+
		"and will not run on it. To go back to %s: restore the backup taken before the upgrade (docs/deploy.md, "+
		"Backups and restore), or stop every server and undo the newer migrations with %s: "+
		"`loopx migrate down %s`, then start this one. To go forward instead, run %s or later",
		b.Version, newer.Known, newer.Database, by, b.Version, forward, strings.Join(down, " "), forward)}
}

// wrapped is err told in other words: msg is what a person reads, errors.As still finds err.
type wrapped struct {
	err error
	msg string
}

func (w wrapped) Error() string { return w.msg }
func (w wrapped) Unwrap() error { return w.err }

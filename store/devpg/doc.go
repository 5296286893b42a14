// Package devpg runs a private PostgreSQL cluster from the machine's own PostgreSQL server
// binaries, for `loopx serve` when no DATABASE_URL is configured.
//
// Guarantees:
//   - The binaries are looked up at run time: initdb and postgres on PATH, else the newest
//     /usr/lib/postgresql/<version>/bin. With none, Start returns ErrNoBinaries, whose message
//     names the Debian package to install (postgresql).
//   - The cluster lives under Options.Dir (data in Dir/data) and is reused across runs; it is
//     created with initdb only when Dir/data holds no cluster yet.
//   - The server listens on a free port on 127.0.0.1 only (no Unix socket), with trust
//     authentication for the role "postgres": it is for one developer's machine, not for a
//     shared host.
//   - PostgreSQL refuses to run as root. When the process runs as root, initdb and postgres
//     run as the unprivileged "postgres" system user and the cluster directory is chowned to
//     it. When that user cannot reach Dir (a parent such as /root is closed to it), the
//     cluster lives in <Options.Fallback>/devpg-<hash of Dir> instead (default
//     /var/lib/loopx): Locate says so before anything starts, Cluster.Dir reports it, and Dir
//     holds a file (LocationFile) naming it. Permissions of directories LoopX does not own are
//     never changed.
//   - Deleting Dir starts over: when Dir is gone but its fallback cluster is still there, that
//     cluster is renamed <cluster>.orphaned-<time> (and logged) and a new one is made, so a
//     deleted home never silently gets an old database back.
//   - The server stops when Stop is called or the context given to Start is cancelled, and
//     on Linux the kernel stops it if this process dies (parent-death signal); other systems
//     (macOS) have no such signal, so a loopx killed outright leaves it running until it is
//     stopped (pg_ctl stop -D <dir>/data).
package devpg

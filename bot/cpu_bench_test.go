package bot_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuUse is the CPU time (user + system) of the processes a benchmark phase keeps busy: the
// `loopx serve` child (zero in process), this process (load generator, sandbox, and in
// process the intake and router) and every PostgreSQL process of the machine. Read before
// and after a phase, it splits the phase's CPU per event between them, which tells where an
// ingest ratio is lost. A backend that exits during the phase (pgbench's) is counted too:
// its time moves to the postmaster's reaped-children time, which is read with the rest.
type cpuUse struct{ serve, self, postgres time.Duration }

// clockTick is Linux's USER_HZ, the unit of /proc/<pid>/stat times (100 on every
// architecture Go supports).
const clockTick = 10 * time.Millisecond

func readCPU(servePID int) cpuUse {
	u := cpuUse{self: procCPU("self")}
	if servePID > 0 {
		u.serve = procCPU(strconv.Itoa(servePID))
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if comm, err := os.ReadFile(d + "/comm"); err == nil && strings.TrimSpace(string(comm)) == "postgres" {
			u.postgres += procCPU(filepath.Base(d)) + procChildCPU(filepath.Base(d))
		}
	}
	return u
}

func (u cpuUse) sub(v cpuUse) cpuUse {
	return cpuUse{serve: u.serve - v.serve, self: u.self - v.self, postgres: u.postgres - v.postgres}
}

// procCPU is utime + stime of /proc/<pid>/stat; 0 when the process is gone.
func procCPU(pid string) time.Duration { return statTimes(pid, 11) }

// procChildCPU is cutime + cstime: the time of the process's reaped children.
func procChildCPU(pid string) time.Duration { return statTimes(pid, 13) }

// statTimes sums the two clock-tick fields of /proc/<pid>/stat from index i (counted after
// the command name).
func statTimes(pid string, i int) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after its ')' are fixed.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < i+2 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[i], 10, 64)
	st, _ := strconv.ParseInt(f[i+1], 10, 64)
	return time.Duration(ut+st) * clockTick
}

// perEvent is d per event, in microseconds.
func perEvent(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }

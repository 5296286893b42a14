package devpg

import "syscall"

// postgresAttr runs postgres as cred in a process group of its own. Pdeathsig: if this
// process dies without Stop, the kernel asks postgres for a fast shutdown instead of leaving
// an orphan holding the data directory.
func postgresAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGINT, Setpgid: true}
}

//go:build !linux

package devpg

import "syscall"

// postgresAttr runs postgres as cred in a process group of its own. Systems other than Linux
// have no parent-death signal: postgres stops with Stop or the context (see the package
// guarantees).
func postgresAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}

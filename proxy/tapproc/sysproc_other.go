//go:build unix && !linux

package tapproc

import "syscall"

// sysProcAttr puts the tap process in a process group of its own, so that
// a terminal's ^C reaches only acptap, which ends it in order. Without
// Linux's parent-death signal, the tap process ends when its stdin does,
// which acptap's death closes.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

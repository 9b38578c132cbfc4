//go:build unix && !linux

package stdiotap

import "syscall"

// sysProcAttr puts the agent in a process group of its own, so that
// signals reach the processes it spawns and a terminal's ^C reaches only
// acptap, which forwards it. Without Pdeathsig, an agent outlives an
// acptap killed by SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// blockUntilWaitable reports false: waitid with WNOWAIT is unreliable
// outside Linux (it returns for stopped processes on Darwin).
func blockUntilWaitable(pid int) bool { return false }

// groupHasOthers is never asked outside Linux (see blockUntilWaitable).
func groupHasOthers(pgid int) bool { return false }

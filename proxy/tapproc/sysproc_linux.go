package tapproc

import "syscall"

// sysProcAttr puts the tap process in a process group of its own, so that
// a terminal's ^C reaches only acptap, which ends it in order; and has
// the kernel SIGKILL it if acptap dies without ending it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

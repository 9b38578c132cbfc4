package stdiotap

import (
	"syscall"
	"unsafe"
)

// sysProcAttr puts the agent in a process group of its own, so that
// signals reach the processes it spawns and a terminal's ^C reaches only
// acptap, which forwards it; and has the kernel SIGKILL the agent if
// acptap dies without stopping it (even by SIGKILL).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// pPID is waitid's P_PID id type.
const pPID = 1

// blockUntilWaitable blocks until the child pid has exited, without
// reaping it, and reports whether it could.
func blockUntilWaitable(pid int) bool {
	var siginfo [128]byte // siginfo_t, unused but written by the kernel
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&siginfo)), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return errno == 0
		}
	}
}

package stdiotap

import (
	"bytes"
	"os"
	"strconv"
	"strings"
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

// groupHasOthers reports whether a live process other than pgid itself
// (the agent, a zombie when this is asked) is in process group pgid, by
// the process table of /proc.
func groupHasOthers(pgid int) bool {
	dir, err := os.Open("/proc")
	if err != nil {
		return false
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return false
	}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == pgid {
			continue
		}
		stat, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and ")".
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 3 || fields[0] == "Z" || fields[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(fields[2]); err == nil && g == pgid {
			return true
		}
	}
	return false
}

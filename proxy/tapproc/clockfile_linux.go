package tapproc

import (
	"os"

	"golang.org/x/sys/unix"
)

// clockFile returns a memory file for a SharedClock.
func clockFile() (*os.File, error) {
	fd, err := unix.MemfdCreate("acptap-clock", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "acptap-clock"), nil
}

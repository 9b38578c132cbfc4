package tapproc

import (
	"os"

	"golang.org/x/sys/unix"
)

// counterFile returns a memory file for a Counter.
func counterFile() (*os.File, error) {
	fd, err := unix.MemfdCreate("acptap-seq", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "acptap-seq"), nil
}

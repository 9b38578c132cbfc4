package tapproc

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/acptap/acptap/internal/stamp"
)

// A SharedClock is the word of a stamp.Clock in memory that the tap
// process shares with its parent. The tap process stamps each exchange
// from it as the request arrives: a compare-and-swap, without a system
// call or a word to the parent, on the path of the request. The parent
// stamps its stdio from it too (stdiotap.Config.Clock), so that an
// exchange takes its place among the frames as its request came, and its
// time on the same clock.
type SharedClock struct {
	file  *os.File // backs mem; passed to the tap process, then closed
	mem   []byte   // mapped shared; never unmapped, since the clock may be used for as long as the process lives
	clock *stamp.Clock
}

// NewSharedClock makes a SharedClock at the present time, in a memory
// file (Linux) or an unlinked temporary file, which leaves nothing on
// disk.
func NewSharedClock() (*SharedClock, error) {
	f, err := clockFile()
	if err != nil {
		return nil, fmt.Errorf("making the shared clock: %w", err)
	}
	if err := f.Truncate(8); err != nil {
		f.Close()
		return nil, fmt.Errorf("making the shared clock: %w", err)
	}
	mem, err := mapWord(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("making the shared clock: %w", err)
	}
	return &SharedClock{file: f, mem: mem, clock: stamp.On(wordOf(mem))}, nil
}

// Clock returns the clock.
func (c *SharedClock) Clock() *stamp.Clock { return c.clock }

// Dup returns a file of the clock of the caller's own, for another
// process to map (OpenClock), which the caller closes. Take it before the
// tap process starts, which closes the clock's file here.
func (c *SharedClock) Dup() (*os.File, error) {
	fd, err := syscall.Dup(int(c.file.Fd()))
	if err != nil {
		return nil, fmt.Errorf("sharing the clock: %w", err)
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "acptap-clock"), nil
}

// OpenClock maps the clock of f, a SharedClock's file another process
// passed on, and closes f.
func OpenClock(f *os.File) (*stamp.Clock, error) { return openClock(f) }

// openClock maps the clock of file f, given by the parent, and closes f.
func openClock(f *os.File) (*stamp.Clock, error) {
	mem, err := mapWord(f)
	if err != nil {
		return nil, fmt.Errorf("mapping the shared clock: %w", err)
	}
	f.Close()
	return stamp.On(wordOf(mem)), nil
}

// mapWord maps the word of f shared.
func mapWord(f *os.File) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
}

// wordOf returns the word of a mapping, which is page-aligned, as an
// atomic 64-bit value must be.
func wordOf(mem []byte) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&mem[0]))
}

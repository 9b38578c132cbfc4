package tapproc

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// A Counter is a number in memory that the tap process shares with its
// parent, from which it numbers exchanges as their requests arrive: an
// atomic add, without a system call or a word to the parent, on the path
// of the request. The parent numbers its own events from it too
// (store.Writer.ShareSeq), so that an exchange takes its place among them
// as its request came.
type Counter struct {
	file *os.File // backs mem; passed to the tap process, then closed
	mem  []byte   // mapped shared; never unmapped, since the counter may be used for as long as the process lives
}

// NewCounter makes a Counter at 0, in a memory file (Linux) or an
// unlinked temporary file, which leaves nothing on disk.
func NewCounter() (*Counter, error) {
	f, err := counterFile()
	if err != nil {
		return nil, fmt.Errorf("making the shared counter: %w", err)
	}
	mem, err := mapCounter(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("making the shared counter: %w", err)
	}
	return &Counter{file: f, mem: mem}, nil
}

// mapCounter sizes f for a counter and maps it shared.
func mapCounter(f *os.File) ([]byte, error) {
	if err := f.Truncate(8); err != nil {
		return nil, err
	}
	return syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
}

// openCounter maps the counter of file f, given by the parent.
func openCounter(f *os.File) (*atomic.Uint64, error) {
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the shared counter: %w", err)
	}
	f.Close()
	return (*atomic.Uint64)(unsafe.Pointer(&mem[0])), nil
}

// Uint64 returns the counter. The mapping is page-aligned, as an atomic
// 64-bit value must be.
func (c *Counter) Uint64() *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&c.mem[0]))
}

//go:build linux

package store

import (
	"errors"
	"hash/fnv"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A Writer holds, for as long as it writes its recording, a lock on one
// byte of the store file far past its end, picked by the recording's
// name: an open file description lock (fcntl F_OFD_SETLK), which the
// kernel drops when the process dies, however it dies, and which neither
// bbolt's flock of the same file nor the closing of bbolt's descriptors
// after each operation touches. A reader asks the kernel whether the
// byte is locked: a recording that is not Done and whose byte is not
// locked was interrupted.
//
// Names share 2^40 bytes: two names of one store land on the same byte
// with a chance of one in 10^12 per pair, which would show an interrupted
// recording as live while the other is recorded, and refuse its rm.

// liveBase is where the bytes of the live locks start: past any bbolt
// file, whose pages bbolt addresses with 64-bit offsets it never reaches.
const liveBase = 1 << 62

// liveOffset is the byte of the named recording's live lock.
func liveOffset(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return liveBase + int64(h.Sum64()>>24)
}

// lockLive takes the live lock of the named recording in the store file
// at path and returns the file that holds it, to close when the Writer
// is done. It fails with errLiveHeld if another Writer, of any process,
// holds it.
func lockLive(path, name string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: liveOffset(name), Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, errLiveHeld
		}
		return nil, err
	}
	return f, nil
}

// liveProbe asks whether recordings are live, on a descriptor of its own:
// the kernel answers for the locks of every other descriptor, this
// process's too.
type liveProbe struct{ f *os.File }

func newLiveProbe(path string) (*liveProbe, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &liveProbe{f}, nil
}

// live reports whether a Writer holds the named recording's live lock.
func (p *liveProbe) live(name string) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: liveOffset(name), Len: 1}
	if err := unix.FcntlFlock(p.f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, err
	}
	return lk.Type != unix.F_UNLCK, nil
}

func (p *liveProbe) close() { p.f.Close() }

// turnstileOffset is the byte of the turnstile, before the live locks.
// flock(2) grants a released lock to whichever waiter runs first: with
// busy Writers in several processes each taking the exclusive lock again
// moments after letting go, a reader could wait for seconds. So a reader
// (or a Create, a Delete) holds a shared lock of this byte while it waits
// for the file's lock, and a Writer's commit first tries to lock it
// exclusively, and unlocks it at once: while a reader waits, commits that
// come after it wait behind it.
const turnstileOffset = liveBase - 1

// enterTurnstile marks f's reader as waiting. It waits only for a Writer
// passing through, which takes no time.
func enterTurnstile(f *os.File) error {
	for {
		lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: turnstileOffset, Len: 1}
		err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) {
			return err
		}
		time.Sleep(10 * time.Microsecond)
	}
}

// leaveTurnstile ends enterTurnstile.
func leaveTurnstile(f *os.File) error {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: turnstileOffset, Len: 1}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
}

// passTurnstile fails with EWOULDBLOCK while a reader waits.
func passTurnstile(f *os.File) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: turnstileOffset, Len: 1}
	err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		return unix.EWOULDBLOCK
	}
	if err != nil {
		return err
	}
	return leaveTurnstile(f)
}

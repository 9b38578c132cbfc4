package store

import (
	"errors"
	"math"
	"os"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Several processes write one store file: each opens the bbolt file only
// for the length of one operation (a commit of a Writer, a List, a page
// of Events) and closes it again. bbolt's lock on the file, a flock(2)
// taken by the open, is then held only that long: exclusive for a write,
// shared for a read. Opening costs a few system calls and a look at the
// file's meta pages, small next to the two fdatasyncs of a commit.

// waitForever makes lockFile wait for as long as the lock is held: a
// Writer never gives up on a commit, since giving up would lose events.
const waitForever = time.Duration(math.MaxInt64)

// openDB opens the bbolt file for one operation: with the exclusive lock
// if write, else the shared one, waiting up to wait for it (not at all if
// wait is 0) and failing with bbolt's ErrTimeout after that. Only create
// may create the file. If waited is not nil, it is set to how long the
// lock took; if warning is not nil, it is set to what checkMetaPages
// warns of. It returns the file bbolt uses too, for closeDB.
//
// Once it holds the lock, it checks the meta pages (checkMetaPages) before
// bbolt maps the file, and bbolt's open runs under guard: a damaged
// freelist or meta page makes bbolt panic there.
func openDB(path string, write, create bool, wait time.Duration, waited *time.Duration, warning *error) (*bolt.DB, *os.File, error) {
	var file *os.File
	var db *bolt.DB
	recovered, err := guard(func() error {
		var err error
		db, err = bolt.Open(path, 0o666, &bolt.Options{
			ReadOnly: !write,
			// bbolt polls for the lock every 50ms; the file comes here locked
			// already (bbolt's own flock on it then succeeds at once), by a
			// wait that the kernel ends as soon as the holder lets go.
			OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
				if !create {
					flag &^= os.O_CREATE
				}
				f, err := os.OpenFile(name, flag, perm)
				if err != nil {
					return nil, err
				}
				start := time.Now()
				if err := lockFile(f, write, wait); err != nil {
					return nil, err // lockFile closed f
				}
				if waited != nil {
					*waited = time.Since(start)
				}
				fi, err := f.Stat()
				if err != nil {
					f.Close()
					return nil, err
				}
				if fi.Size() > 0 {
					warn, err := checkMetaPages(f, fi.Size(), write)
					if err != nil {
						f.Close()
						return nil, err
					}
					if warning != nil {
						*warning = warn
					}
				}
				file = f
				return f, nil
			},
		})
		return err
	})
	if recovered {
		// bolt.Open failed: db is not set, and file, if it was opened,
		// may be mapped.
		if file != nil {
			syscall.Flock(int(file.Fd()), syscall.LOCK_UN)
			file.Close()
		}
		return nil, nil, err
	}
	return db, file, err
}

// closeDB closes db, opened by openDB with file. After a panic recovered
// while db was in use, bbolt's own locks may be held, so that its Close
// would wait forever: the file's lock is let go of here, at once (closing
// the file would not do: bbolt's mapping of the file holds it too), and
// bbolt's Close is left to a goroutine, which unmaps the file when
// bbolt's locks are free, and else waits until the process ends.
func closeDB(db *bolt.DB, file *os.File, recovered bool) error {
	if !recovered {
		return db.Close()
	}
	syscall.Flock(int(file.Fd()), syscall.LOCK_UN)
	go db.Close()
	return nil
}

// withDB runs fn with the bbolt file open for one operation (see openDB)
// and closes it after.
func (s *Store) withDB(write bool, wait time.Duration, fn func(*bolt.DB) error) error {
	return s.withDBWaited(write, wait, nil, fn)
}

// withDBWaited is withDB that sets *waited to how long the lock took.
// fn runs under guard.
func (s *Store) withDBWaited(write bool, wait time.Duration, waited *time.Duration, fn func(*bolt.DB) error) error {
	db, file, err := openDB(s.path, write, false, wait, waited, nil)
	if err != nil {
		return openError(s.path, wait, err)
	}
	// guard lets a panic of acptap's own code go on up: the file's lock
	// must not stay held while it does (a program that recovers it would
	// find the store locked by itself).
	returned := false
	defer func() {
		if !returned {
			closeDB(db, file, true)
		}
	}()
	recovered, err := guard(func() error { return fn(db) })
	returned = true
	if cerr := closeDB(db, file, recovered); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// lockFile takes the flock of f, exclusive or shared, waiting up to wait.
// It closes f if it fails.
func lockFile(f *os.File, exclusive bool, wait time.Duration) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	fd := int(f.Fd())
	if exclusive && wait == waitForever {
		return pollExclusive(f, fd)
	}
	err := syscall.Flock(fd, how|syscall.LOCK_NB)
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		if err != nil {
			f.Close()
		}
		return err
	}
	if wait <= 0 {
		f.Close()
		return berrors.ErrTimeout
	}
	// Anything but a Writer's commit (a reader, or a Create, Delete and
	// the like, which a user waits for) holds the turnstile while it
	// waits (see turnstileOffset).
	if err := enterTurnstile(f); err != nil {
		f.Close()
		return err
	}
	// A blocking flock, in a goroutine so that a bounded wait can give up:
	// the goroutine then keeps f and closes it (which unlocks it) when its
	// flock returns.
	result := make(chan error, 1)
	go func() { result <- flockBlocking(fd, how) }()
	var timeout <-chan time.Time
	if wait != waitForever {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case err := <-result:
		leaveTurnstile(f)
		if err != nil {
			f.Close()
		}
		return err
	case <-timeout:
		leaveTurnstile(f)
		go func() {
			<-result
			f.Close()
		}()
		return berrors.ErrTimeout
	}
}

// pollExclusive takes the exclusive lock of f for a Writer's commit,
// trying every few hundred µs for as long as it takes, each time after
// passing the turnstile: a commit never waits in flock(2), where it would
// beat a reader, or a Create, to the lock. It closes f if it fails.
func pollExclusive(f *os.File, fd int) error {
	pause := 50 * time.Microsecond
	for {
		err := passTurnstile(f)
		if err == nil {
			err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				return nil
			}
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
}

// flockBlocking is flock(2) that waits, across signals.
func flockBlocking(fd, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

package store

import (
	"errors"
	"fmt"
)

// Errors returned by this package, always wrapped with the store's path or
// the recording's name; test for them with errors.Is.
var (
	// ErrNotFound means there is no recording of that name.
	ErrNotFound = errors.New("no such recording")

	// ErrExists means a recording of that name exists already.
	ErrExists = errors.New("recording already exists")

	// ErrBusy means the recording is being written by a Writer, of this
	// Store or of another, in this process or another.
	ErrBusy = errors.New("recording is being written")

	// ErrChanged means a recording was replaced, deleted or rewritten
	// while EventsFrom read it.
	ErrChanged = errors.New("recording changed while being read")

	// ErrLocked means another process held the store file's lock for
	// longer than Options.Timeout.
	ErrLocked = errors.New("store is locked by another process")

	// ErrNotStore means the file exists but is not an acptap store.
	ErrNotStore = errors.New("not an acptap store")

	// ErrIsDir means the store's path is a directory.
	ErrIsDir = errors.New("is a directory")

	// ErrNotRegular means the store's path is neither a regular file
	// nor a directory (a FIFO, a device, a file of /proc).
	ErrNotRegular = errors.New("not a regular file")

	// ErrUnknownFormat means the store or a recording was written in a
	// format newer than this package knows. It is never said of damage:
	// a version field larger than known in a value that otherwise reads.
	// A value that does not decode is ErrDamaged.
	ErrUnknownFormat = errors.New("unknown format, written by a newer acptap")

	// ErrDamaged means the store file is damaged: cut short, or bytes of
	// it changed, so that a page, a value or the metadata of a recording
	// does not read. The error is a *DamagedError that says where.
	ErrDamaged = errors.New("store is damaged")

	// ErrNoStore means a read-only open found no store at the path.
	ErrNoStore = errors.New("no store here")

	// ErrClosed means the Store was closed or the Writer finished.
	ErrClosed = errors.New("closed")
)

// errLiveHeld is ErrBusy said of a recording whose Writer is not this
// Store's.
var errLiveHeld = fmt.Errorf("%w by a recorder that is still running", ErrBusy)

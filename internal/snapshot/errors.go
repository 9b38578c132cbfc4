package snapshot

import "errors"

// Errors returned by this package, wrapped with the directory and the
// entry concerned; test for them with errors.Is.
var (
	// ErrTooLarge means the file contents to archive exceed
	// Options.MaxBytes.
	ErrTooLarge = errors.New("file contents over the limit")

	// ErrTooManyFiles means the entries to archive exceed
	// Options.MaxFiles.
	ErrTooManyFiles = errors.New("too many entries")

	// ErrNotEmpty means Restore was given a directory that holds
	// something already.
	ErrNotEmpty = errors.New("directory not empty")

	// ErrUnsafe means an archive entry would land outside the directory:
	// a name that is absolute or climbs with "..", or a symlink whose
	// target leaves it.
	ErrUnsafe = errors.New("unsafe archive entry")

	// ErrFormat means the archive is not a snapshot: bad zstd or tar,
	// or an entry of a kind snapshots never hold.
	ErrFormat = errors.New("malformed snapshot")
)

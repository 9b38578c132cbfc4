// Package store keeps acptap recordings, many to a file, in a crash-safe bbolt database.
package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Layout of the bbolt file:
//
//	acptap/                    the store bucket
//	    format -> storeFormat in decimal
//	recordings/
//	    NAME/                  one bucket per recording
//	        meta -> zstd(JSON of Recording)
//	        events/
//	            Seq as 8 bytes big-endian -> event value or frame block
//	                                   (see eventEncoding), keyed by the Seq
//	                                   of its first event
//
// The format value is the one value not compressed: every version must be
// able to read it. Events of all lanes share one key space, so a cursor
// walks a recording in Seq order; rewriting one lane (replay --update) is
// one transaction that rebuilds the events bucket.
var (
	storeBucket      = []byte("acptap")
	formatKey        = []byte("format")
	recordingsBucket = []byte("recordings")
	metaKey          = []byte("meta")
	eventsBucket     = []byte("events")
)

// storeFormat is the format of the store's layout, the value of the
// format key. It is not FormatVersion: a new encoding of the events of a
// recording, which its metadata announces, leaves the layout as it was
// (see FormatVersion). A store of a larger format is refused as a whole.
const storeFormat = 1

// defaultTimeout is used when Options.Timeout is zero.
const defaultTimeout = time.Second

// Options configure Open. The zero value works.
type Options struct {
	// ReadOnly opens the store with a shared lock and writes nothing. A
	// missing or empty file is ErrNoStore rather than created.
	ReadOnly bool

	// Timeout is how long Open waits for a lock held by another process
	// before it fails with ErrLocked. If zero, 1s is used; if negative,
	// Open does not wait.
	Timeout time.Duration

	// OnError, if not nil, is called when a Writer loses events: once when
	// a commit fails (from the Writer's goroutine, which stops there), and
	// once for the first Append or Update after Finish (from the caller).
	// Writer.Flush and Writer.Finish return commit errors either way.
	OnError func(error)
}

// Store is an open store file. Its methods are safe for concurrent use.
type Store struct {
	db       *bolt.DB
	path     string
	readOnly bool
	onError  func(error)
	closed   atomic.Bool // set once by Close; read without mu by the read paths

	mu      sync.Mutex         // guards writers and serializes Create, Delete and Close
	writers map[string]*Writer // unfinished Writers by recording name
}

// Open opens the store at path, creating it unless opts.ReadOnly; an
// existing empty file becomes a store. A process that opens a store for
// writing locks out every other; read-only opens share the lock. A nil
// opts is the zero Options.
func Open(path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout == 0 {
		o.Timeout = defaultTimeout
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("open store %s: %w", path, ErrIsDir)
	case err == nil && !fi.Mode().IsRegular() || err == nil && isProcFile(path, fi):
		return nil, fmt.Errorf("open store %s: %w", path, ErrNotRegular)
	case err == nil && o.ReadOnly && fi.Size() == 0:
		return nil, fmt.Errorf("open store %s: the file is empty: %w", path, ErrNoStore)
	case errors.Is(err, fs.ErrNotExist) && o.ReadOnly:
		return nil, fmt.Errorf("open store %s: %w", path, ErrNoStore)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("open store: %w", err)
	}

	db, err := bolt.Open(path, 0o666, &bolt.Options{Timeout: o.Timeout, ReadOnly: o.ReadOnly})
	if err != nil {
		return nil, openError(path, o.Timeout, err)
	}
	s := &Store{
		db:       db,
		path:     path,
		readOnly: o.ReadOnly,
		onError:  o.OnError,
		writers:  make(map[string]*Writer),
	}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// openError translates an error of bolt.Open.
func openError(path string, timeout time.Duration, err error) error {
	var pe *fs.PathError
	switch {
	case errors.Is(err, berrors.ErrTimeout) && timeout < 0:
		return fmt.Errorf("open store %s: %w", path, ErrLocked)
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("open store %s: waited %v: %w", path, timeout, ErrLocked)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("open store %s: %w", path, ErrIsDir)
	case errors.As(err, &pe):
		return fmt.Errorf("open store: %w", err)
	case errors.Is(err, berrors.ErrInvalid),
		errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch),
		!looksLikeBbolt(path):
		// bbolt says "file size too small" and more for files that never
		// were bbolt files; its sentinels cover only some.
		return fmt.Errorf("open store %s: %w: %w", path, ErrNotStore, err)
	}
	return fmt.Errorf("open store %s: %w", path, err)
}

// looksLikeBbolt reports whether the file at path starts with a bbolt
// meta page: a page header (id, flags, count, overflow) with the meta
// flag, followed by the magic number.
func looksLikeBbolt(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var page [20]byte
	if _, err := io.ReadFull(f, page[:]); err != nil {
		return false
	}
	const metaPageFlag, magic = 0x04, 0xED0CDAED
	return binary.LittleEndian.Uint16(page[8:])&metaPageFlag != 0 && binary.LittleEndian.Uint32(page[16:]) == magic
}

// init checks the store bucket and, when writable, creates the layout in a
// file that has none yet. The View's answer stands in the Update: the
// Store holds the file's exclusive lock and is not shared yet.
func (s *Store) init() error {
	var empty bool
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		empty, err = s.checkLayout(tx)
		return err
	})
	if err != nil || !empty || s.readOnly {
		return err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(storeBucket)
		if err != nil {
			return err
		}
		if err := b.Put(formatKey, []byte(strconv.Itoa(storeFormat))); err != nil {
			return err
		}
		_, err = tx.CreateBucket(recordingsBucket)
		return err
	})
	if err != nil {
		return fmt.Errorf("create store %s: %w", s.path, err)
	}
	return nil
}

// checkLayout reports whether tx sees a bbolt file without any bucket, and
// fails unless it sees an acptap store of a known format.
func (s *Store) checkLayout(tx *bolt.Tx) (empty bool, err error) {
	b := tx.Bucket(storeBucket)
	if b == nil {
		if k, _ := tx.Cursor().First(); k != nil {
			return false, fmt.Errorf("open store %s: %w: a bbolt file of another program", s.path, ErrNotStore)
		}
		return true, nil
	}
	v := b.Get(formatKey)
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 {
		return false, fmt.Errorf("open store %s: %w: bad format value %q", s.path, ErrNotStore, v)
	}
	if n > storeFormat {
		return false, fmt.Errorf("open store %s: store format %d, this acptap reads up to %d: %w", s.path, n, storeFormat, ErrUnknownFormat)
	}
	return false, nil
}

// Close finishes the Store's unfinished Writers and closes the file. It
// returns their errors too. Calls after the first return nil.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil
	}
	s.closed.Store(true)
	ws := make([]*Writer, 0, len(s.writers))
	for _, w := range s.writers {
		ws = append(ws, w)
	}
	s.mu.Unlock()

	var errs []error
	for _, w := range ws {
		if err := w.Finish(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close store %s: %w", s.path, err))
	}
	return errors.Join(errs...)
}

// Path returns the path the Store was opened with.
func (s *Store) Path() string { return s.path }

// List returns the metadata of every recording, sorted by Created, then
// Name. It includes recordings of a newer format (Format > FormatVersion),
// which Get and Events refuse.
func (s *Store) List() ([]Recording, error) {
	var recs []Recording
	err := s.view("list", "", func(tx *bolt.Tx) error {
		rs := tx.Bucket(recordingsBucket)
		if rs == nil {
			return nil
		}
		c := rs.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			b := rs.Bucket(k)
			if v != nil || b == nil {
				return fmt.Errorf("stray key %q among recordings", k)
			}
			rec, err := readMeta(b, string(k))
			if err != nil {
				return fmt.Errorf("recording %q: %w", k, err)
			}
			recs = append(recs, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(recs, func(a, b Recording) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return recs, nil
}

// Get returns the metadata of the named recording.
func (s *Store) Get(name string) (Recording, error) {
	if err := ValidName(name); err != nil {
		return Recording{}, err
	}
	var rec Recording
	err := s.view("get", name, func(tx *bolt.Tx) error {
		b, err := recording(tx, name)
		if err != nil {
			return err
		}
		rec, err = readKnownMeta(b, name)
		return err
	})
	return rec, err
}

// Events calls fn with each event of the named recording, in Seq order,
// and stops at fn's first error, which it returns. It reads one stored
// value (an event, or a block of up to 256 KiB of frames) at a time inside
// one read transaction: fn may keep an Event, but must not wait for a write
// to this Store, which may wait for the transaction to end. The Data of
// the frames of one block share an array: one kept Event keeps its block's.
func (s *Store) Events(name string, fn func(Event) error) error {
	if err := ValidName(name); err != nil {
		return err
	}
	var fnErr error
	err := s.view("read", name, func(tx *bolt.Tx) error {
		b, err := recording(tx, name)
		if err != nil {
			return err
		}
		if _, err := readKnownMeta(b, name); err != nil {
			return err
		}
		eb := b.Bucket(eventsBucket)
		if eb == nil {
			return errors.New("events bucket missing")
		}
		c := eb.Cursor()
		var events []Event // reused from value to value
		var next uint64    // the smallest Seq the next value may hold
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != 8 || v == nil {
				return fmt.Errorf("stray key %q among events", k)
			}
			seq := binary.BigEndian.Uint64(k)
			if seq < next {
				return fmt.Errorf("event %d: stored again after a frame block up to event %d", seq, next-1)
			}
			events, err = decodeValue(events[:0], seq, v)
			if err != nil {
				return fmt.Errorf("event %d: %w", seq, err)
			}
			next = events[len(events)-1].Seq + 1
			for _, e := range events {
				if fnErr = fn(e); fnErr != nil {
					return fnErr
				}
			}
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

// Delete removes the named recording. The file does not shrink; the space
// is reused by later recordings.
func (s *Store) Delete(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable("delete", name); err != nil {
		return err
	}
	return s.update("delete", name, func(tx *bolt.Tx) error {
		if _, err := recording(tx, name); err != nil {
			return err
		}
		return tx.Bucket(recordingsBucket).DeleteBucket([]byte(name))
	})
}

// Create starts a recording named rec.Name and returns its Writer. If the
// name is taken, Create fails with ErrExists unless force, which replaces
// the old recording. Create sets rec.Format, zeroes the counters and, if
// rec.Created is zero, sets it to now; it commits the metadata before it
// returns, so the recording is listed even if the process dies right after.
func (s *Store) Create(rec Recording, force bool) (*Writer, error) {
	name := rec.Name
	if err := ValidName(name); err != nil {
		return nil, err
	}
	rec.Format = FormatVersion
	rec.Frames, rec.Exchanges = 0, 0
	if rec.Created.IsZero() {
		rec.Created = time.Now().Round(0)
	}
	meta, err := encodeMeta(&rec)
	if err != nil {
		return nil, s.wrap("create", name, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable("create", name); err != nil {
		return nil, err
	}
	err = s.update("create", name, func(tx *bolt.Tx) error {
		rs, err := tx.CreateBucketIfNotExists(recordingsBucket)
		if err != nil {
			return err
		}
		key := []byte(name)
		if rs.Bucket(key) != nil {
			if !force {
				return ErrExists
			}
			if err := rs.DeleteBucket(key); err != nil {
				return err
			}
		}
		b, err := rs.CreateBucket(key)
		if err != nil {
			return err
		}
		if err := b.Put(metaKey, meta); err != nil {
			return err
		}
		_, err = b.CreateBucket(eventsBucket)
		return err
	})
	if err != nil {
		return nil, err
	}
	w := newWriter(s, rec)
	s.writers[name] = w
	return w, nil
}

// writable fails if the Store cannot start a write to the named
// recording. s.mu must be held.
func (s *Store) writable(op, name string) error {
	switch {
	case s.closed.Load():
		return s.wrap(op, name, errStoreClosed)
	case s.readOnly:
		return s.wrap(op, name, berrors.ErrDatabaseReadOnly)
	case s.writers[name] != nil:
		return s.wrap(op, name, ErrBusy)
	}
	return nil
}

// forget removes a finished Writer.
func (s *Store) forget(w *Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writers[w.name] == w {
		delete(s.writers, w.name)
	}
}

// errStoreClosed is ErrClosed said of a Store.
var errStoreClosed = fmt.Errorf("store %w", ErrClosed)

// view runs fn in a read transaction and adds context to any error.
func (s *Store) view(op, name string, fn func(*bolt.Tx) error) error {
	if s.closed.Load() {
		return s.wrap(op, name, errStoreClosed)
	}
	return s.wrap(op, name, s.db.View(fn))
}

// update runs fn in a write transaction and adds context to any error.
func (s *Store) update(op, name string, fn func(*bolt.Tx) error) error {
	return s.wrap(op, name, s.db.Update(fn))
}

// wrap adds the operation, the recording's name and the store's path to
// err, and turns bbolt's "database not open" into ErrClosed.
func (s *Store) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = errStoreClosed
	}
	if name == "" {
		return fmt.Errorf("%s recordings in %s: %w", op, s.path, err)
	}
	return fmt.Errorf("%s recording %s in %s: %w", op, QuoteName(name), s.path, err)
}

// isProcFile reports whether path is a file of a pseudo file system such
// as /proc, which stat calls regular and empty but which holds a text.
func isProcFile(path string, fi fs.FileInfo) bool {
	if fi.Size() != 0 {
		return false
	}
	abs, err := filepath.Abs(path)
	return err == nil && (strings.HasPrefix(abs, "/proc/") || strings.HasPrefix(abs, "/sys/"))
}

// maxQuotedName is how much of a name an error message shows.
const maxQuotedName = 64

// QuoteName quotes a recording name for a message, cut to its first 64
// bytes when it is longer (a name given by mistake can be anything).
func QuoteName(name string) string {
	if len(name) <= maxQuotedName {
		return strconv.Quote(name)
	}
	cut := name[:maxQuotedName]
	for !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(cut), len(name))
}

// recording returns the named recording's bucket or ErrNotFound.
func recording(tx *bolt.Tx, name string) (*bolt.Bucket, error) {
	if rs := tx.Bucket(recordingsBucket); rs != nil {
		if b := rs.Bucket([]byte(name)); b != nil {
			return b, nil
		}
	}
	return nil, ErrNotFound
}

// readKnownMeta is readMeta that refuses a newer format.
func readKnownMeta(b *bolt.Bucket, name string) (Recording, error) {
	rec, err := readMeta(b, name)
	if err != nil {
		return Recording{}, err
	}
	if rec.Format > FormatVersion {
		return Recording{}, fmt.Errorf("recording format %d, this acptap reads up to %d: %w", rec.Format, FormatVersion, ErrUnknownFormat)
	}
	return rec, nil
}

// readMeta decodes the metadata of a recording's bucket. The bucket's
// name is authoritative for Name.
func readMeta(b *bolt.Bucket, name string) (Recording, error) {
	v := b.Get(metaKey)
	if v == nil {
		return Recording{}, errors.New("metadata missing")
	}
	rec, err := decodeMeta(v)
	if err != nil {
		return Recording{}, err
	}
	rec.Name = name
	return rec, nil
}

// maxNameLen is the longest valid recording name.
const maxNameLen = 128

// ValidName reports whether name can name a recording: 1 to 128 letters,
// digits, '.', '_' or '-', not starting with '.' or '-'.
func ValidName(name string) error {
	ok := len(name) >= 1 && len(name) <= maxNameLen && name[0] != '.' && name[0] != '-'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("invalid recording name %s: use 1 to %d letters, digits, '.', '_' or '-', not starting with '.' or '-'", QuoteName(name), maxNameLen)
	}
	return nil
}

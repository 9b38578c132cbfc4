// Package store keeps acptap recordings, many to a file, in a crash-safe bbolt database.
package store

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
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
//	removed-damaged/
//	    TIME/NAME/             a damaged recording that Delete could not
//	                           free, as it was (see Delete)
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
	removedBucket    = []byte("removed-damaged")
	replacedBucket   = []byte("replaced")
	eventsBucket     = []byte("events")
)

// storeFormat is the format of the store's layout, the value of the
// format key. It is not FormatVersion: a new encoding of the events of a
// recording, which its metadata announces, leaves the layout as it was
// (see FormatVersion). A store of a larger format is refused as a whole.
const storeFormat = 1

// defaultTimeout is used when Options.Timeout is zero: long enough for
// the longest transaction another acptap holds the lock for (a snapshot
// of tens of MiB put as a blob), short enough to tell a user of a stuck
// process rather than hang.
const defaultTimeout = 10 * time.Second

// Options configure Open. The zero value works.
type Options struct {
	// ReadOnly opens the store with a shared lock and writes nothing. A
	// missing or empty file is ErrNoStore rather than created.
	ReadOnly bool

	// Timeout is how long Open, and each operation of the Store after it,
	// waits for the file's lock while another process holds it (for one
	// transaction: see Store) before it fails with ErrLocked. If zero, 10s
	// is used; if negative, they do not wait. A Writer's commits wait for
	// as long as it takes.
	Timeout time.Duration

	// Warn, if not nil, is called by Open when the file opens but is
	// damaged where bbolt looks past it: one of its two meta pages fails
	// its checksum, so that bbolt uses the other, which may be of the
	// commit before the newest, the newest then being lost. The error is
	// a *DamagedError that says which commit was opened and what, if
	// anything, was lost.
	Warn func(error)

	// OnError, if not nil, is called when a Writer loses events: once when
	// a commit fails (from the Writer's goroutine, which stops there), and
	// once for the first Append or Update after Finish (from the caller).
	// Writer.Flush and Writer.Finish return commit errors either way.
	OnError func(error)
}

// Store is an open store file. Its methods are safe for concurrent use.
//
// Any number of Stores, in any number of processes, may use one file at
// once, each writing its own recordings: a Store opens the bbolt file
// only for each operation, and holds the file's lock, which is shared by
// readers and exclusive for a writer, for that one transaction. A Writer
// holds the lock only to commit a batch; a reader of a recording being
// written sees what its Writer has committed.
type Store struct {
	path     string
	readOnly bool
	timeout  time.Duration // how long an operation waits for the file's lock; 0: not at all
	onError  func(error)
	closed   atomic.Bool // set once by Close; read without mu by the read paths

	mu      sync.Mutex         // guards writers and serializes Create, Delete and Close
	writers map[string]*Writer // unfinished Writers by recording name

	walkedMu sync.Mutex         // guards walked
	walked   map[walkedKey]bool // buckets found walkable, see Store.walkable
}

// Open opens the store at path, creating it unless opts.ReadOnly; an
// existing empty file becomes a store. It checks the file and lets go of
// it: the Store opens the file again for each operation (see Store). A
// nil opts is the zero Options.
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

	s := &Store{
		path:     path,
		readOnly: o.ReadOnly,
		timeout:  max(o.Timeout, 0),
		onError:  o.OnError,
		writers:  make(map[string]*Writer),
	}
	var warning error
	db, file, err := openDB(path, !o.ReadOnly, !o.ReadOnly, s.timeout, nil, &warning)
	if err != nil {
		return nil, openError(path, s.timeout, err)
	}
	recovered, err := guard(func() error { return s.init(db) })
	if cerr := closeDB(db, file, recovered); err == nil && cerr != nil {
		err = fmt.Errorf("open store %s: %w", path, cerr)
	}
	if err != nil {
		return nil, s.wrapDamage(err)
	}
	if warning != nil && o.Warn != nil {
		o.Warn(s.wrapDamage(warning))
	}
	return s, nil
}

// openError translates an error of bolt.Open.
func openError(path string, timeout time.Duration, err error) error {
	var pe *fs.PathError
	var de *DamagedError
	switch {
	case errors.As(err, &de):
		de.Path = path
		return de
	case errors.Is(err, berrors.ErrChecksum):
		// The magic number and version are right: a bbolt file whose
		// two meta pages are both damaged.
		return &DamagedError{Path: path, Where: "its meta pages", Err: errDamagedMeta, whole: true}
	case errors.Is(err, berrors.ErrTimeout) && timeout <= 0:
		return fmt.Errorf("open store %s: %w", path, ErrLocked)
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("open store %s: waited %v: %w", path, timeout, ErrLocked)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("open store %s: %w", path, ErrIsDir)
	case errors.As(err, &pe):
		return fmt.Errorf("open store: %w", err)
	case errors.Is(err, berrors.ErrInvalid),
		errors.Is(err, berrors.ErrVersionMismatch),
		!looksLikeBbolt(path, false):
		// bbolt says "file size too small" and more for files that never
		// were bbolt files; its sentinels cover only some.
		return fmt.Errorf("open store %s: %w: %w", path, ErrNotStore, err)
	}
	return fmt.Errorf("open store %s: %w", path, err)
}

// looksLikeBbolt reports whether the file at path starts with a bbolt
// meta page: a page header (id, flags, count, overflow) with the meta
// flag, followed by the magic number. If second, the second meta page
// (after a page of the system's size) will do: the first may be damaged.
func looksLikeBbolt(path string, second bool) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var page [20]byte
	is := func(off int64) bool {
		if _, err := f.ReadAt(page[:], off); err != nil {
			return false
		}
		return binary.LittleEndian.Uint16(page[8:])&metaPageFlag != 0 && binary.LittleEndian.Uint32(page[16:]) == boltMagic
	}
	return is(0) || second && is(int64(os.Getpagesize()))
}

// init checks the store bucket and, when writable, creates the layout in a
// file that has none yet. The View's answer stands in the Update: db holds
// the file's exclusive lock.
func (s *Store) init(db *bolt.DB) error {
	var empty bool
	err := db.View(func(tx *bolt.Tx) error {
		var err error
		empty, err = s.checkLayout(tx)
		return err
	})
	if err != nil || !empty || s.readOnly {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
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
	if err := walkable(tx.Cursor().Bucket(), "", false); err != nil {
		return false, err
	}
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
		return false, fmt.Errorf("open store %s: %w: bad format value %s", s.path, ErrNotStore, quoteKey(v))
	}
	if n > storeFormat {
		return false, fmt.Errorf("open store %s: store format %d, this acptap reads up to %d: %w", s.path, n, storeFormat, ErrUnknownFormat)
	}
	return false, nil
}

// Close finishes the Store's unfinished Writers. It returns their errors.
// Calls after the first return nil.
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
		var p pages
		rs, err := recordings(tx, &p)
		if err != nil || rs == nil {
			return err
		}
		c := rs.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if v != nil {
				return damaged(0, "", fmt.Errorf("stray key %s among recordings", quoteKey(k)))
			}
			recs = append(recs, listed(rs, string(k), &p))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.setLive(recs); err != nil {
		return nil, s.wrap("list", "", err)
	}
	slices.SortFunc(recs, func(a, b Recording) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return recs, nil
}

// listed returns the metadata of the recording name of the recordings
// bucket rs, or, if it does not read, a Recording that says so (Damage).
// A recording's bucket can be damaged, down to bbolt panicking over its
// pages, while the others read: the list shows them all.
func listed(rs *bolt.Bucket, name string, p *pages) (rec Recording) {
	defer func() {
		if r := recover(); r != nil {
			de := damagePanic(r)
			de.Recording = name
			rec = Recording{Name: name, Damage: de}
		}
	}()
	b := rs.Bucket([]byte(name))
	if b == nil {
		return Recording{Name: name, Damage: &DamagedError{Recording: name, Err: errors.New("not a bucket")}}
	}
	if err := p.walkable(b, name, false); err != nil {
		var de *DamagedError
		errors.As(err, &de)
		return Recording{Name: name, Damage: de}
	}
	rec, err := readMeta(b, name)
	if err != nil {
		var de *DamagedError
		if !errors.As(err, &de) {
			de = damaged(0, "", err)
		}
		de.Recording = name
		return Recording{Name: name, Damage: de}
	}
	return rec
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
	if err != nil {
		return Recording{}, err
	}
	recs := []Recording{rec}
	if err := s.setLive(recs); err != nil {
		return Recording{}, s.wrap("get", name, err)
	}
	return recs[0], nil
}

// Events calls fn with each event of the named recording, in Seq order,
// and stops at fn's first error, which it returns. It is EventsFrom(name,
// 1, fn).
func (s *Store) Events(name string, fn func(Event) error) error {
	_, err := s.EventsFrom(name, 1, fn)
	return err
}

// Limits of one page of EventsFrom: the events it reads in one read
// transaction, and keeps in memory, before it lets go of the file.
const (
	pageEvents = 4096
	pageBytes  = 4 << 20
)

// EventsFrom calls fn with each event of the named recording whose Seq is
// from or more, in Seq order, and stops at fn's first error, which it
// returns. It reads the events in pages of a few thousand, each in a read
// transaction of its own, and calls fn outside of any: fn may take its
// time, and may write to the store, without keeping the file's lock from
// other processes. A recording being written yields what was committed
// when each page was read. If the recording is replaced, deleted or
// rewritten (ReplaceLane) between two pages, EventsFrom fails with
// ErrChanged or ErrNotFound. fn may keep an Event; the Data of the frames
// of one block share an array: one kept Event keeps its block's.
//
// EventsFrom returns the recording's metadata as read with the last page,
// as Get returns it: if it says Done, every event of the recording from
// Seq from on was passed to fn.
func (s *Store) EventsFrom(name string, from uint64, fn func(Event) error) (Recording, error) {
	if err := ValidName(name); err != nil {
		return Recording{}, err
	}
	from = max(from, 1)
	var first, meta Recording // the metadata as of the first page, and the last
	var page []Event
	for {
		page = page[:0]
		var more bool
		var pageErr error // a bad value, after the events of page
		err := s.view("read", name, func(tx *bolt.Tx) error {
			var err error
			page, more, err = s.readPage(tx, name, from, page, &first, &meta)
			if len(page) > 0 {
				pageErr, err = err, nil
			}
			return err
		})
		if err != nil {
			return Recording{}, err
		}
		for _, e := range page {
			if err := fn(e); err != nil {
				return Recording{}, err
			}
		}
		if pageErr != nil {
			return Recording{}, s.wrap("read", name, pageErr)
		}
		if !more {
			recs := []Recording{meta}
			if err := s.setLive(recs); err != nil {
				return Recording{}, s.wrap("read", name, err)
			}
			return recs[0], nil
		}
		from = page[len(page)-1].Seq + 1
		clear(page)
	}
}

// readPage appends to page the events of the named recording from Seq
// from on, up to the limits of a page, and reports whether more may
// follow. *first is the recording's metadata as of the first page: a
// later page checks that it reads the same recording, unrewritten; *last
// is set to the metadata as of this page.
func (s *Store) readPage(tx *bolt.Tx, name string, from uint64, page []Event, first, last *Recording) (out []Event, more bool, err error) {
	at := from // the event being read, for a panic of bbolt over its page
	defer func() {
		if r := recover(); r != nil {
			de := damagePanic(r)
			de.Recording, de.Seq = name, at
			out, more, err = page, false, de
		}
	}()
	b, err := recording(tx, name)
	if err != nil {
		return page, false, err
	}
	meta, err := readKnownMeta(b, name)
	if err != nil {
		return page, false, err
	}
	*last = meta
	if first.Name == "" {
		*first = meta
	} else if !meta.Created.Equal(first.Created) || !meta.Updated.Equal(first.Updated) {
		return page, false, ErrChanged
	}
	eb := b.Bucket(eventsBucket)
	if eb == nil {
		return page, false, damaged(0, "", errors.New("its events bucket is missing"))
	}
	if err := s.walkable(eb, name, false); err != nil {
		return page, false, err
	}
	c := eb.Cursor()
	k, v := c.Seek(seqKey(from))
	// A key not of 8 bytes is damage, which the loop below reports.
	if k == nil || len(k) == 8 && binary.BigEndian.Uint64(k) > from {
		// A frame block stored before from may reach into it.
		var pk, pv []byte
		if k == nil {
			pk, pv = c.Last()
		} else {
			pk, pv = c.Prev()
		}
		switch {
		case pk != nil && len(pv) > 0 && pv[0] == blockEncoding:
			k, v = pk, pv
		case k != nil:
			k, v = c.Seek(seqKey(from))
		}
	}
	size := 0
	var next uint64 // the smallest Seq the next value may hold
	for ; k != nil; k, v = c.Next() {
		if len(page) >= pageEvents || size >= pageBytes {
			return page, true, nil
		}
		if len(k) != 8 || v == nil {
			return page, false, damaged(next, "", fmt.Errorf("stray key %s among events", quoteKey(k)))
		}
		seq := binary.BigEndian.Uint64(k)
		at = seq
		if seq < next {
			return page, false, damaged(seq, "", fmt.Errorf("stored again after a frame block up to event %d", next-1))
		}
		start := len(page)
		page, err = decodeValue(page, seq, v)
		if err != nil {
			return page, false, damaged(seq, "", err)
		}
		next = page[len(page)-1].Seq + 1
		at = next
		// Leave out the events of a block that starts before from.
		n := start
		for _, e := range page[start:] {
			if e.Seq >= from {
				size += len(e.Data)
				page[n] = e
				n++
			}
		}
		clear(page[n:])
		page = page[:n]
	}
	return page, false, nil
}

// Delete removes the named recording. It fails with ErrBusy while a
// Writer, of any process, writes it. The file does not shrink; the space
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
	err := s.update("delete", name, func(tx *bolt.Tx) error {
		b, err := recording(tx, name)
		if err != nil {
			return err
		}
		if err := s.notLive(name); err != nil {
			return err
		}
		// Deleting walks every page of the recording, recursively.
		if err := walkable(b, name, true); err != nil {
			return err
		}
		if err := dropReplaced(tx, []byte(name)); err != nil {
			return err
		}
		err = tx.Bucket(recordingsBucket).DeleteBucket([]byte(name))
		if err != nil && !errors.Is(err, berrors.ErrTxClosed) && !errors.Is(err, berrors.ErrTxNotWritable) {
			// The recording was found, so what failed is the deletion of
			// a bucket inside it, one its pages list but bbolt cannot
			// find again: they are out of order (FuzzDamagedStore found
			// such a store). bbolt words that error with %s, so its
			// sentinel is gone.
			return &DamagedError{Recording: name, Where: "its pages", Err: err}
		}
		return err
	})
	var de *DamagedError
	if !errors.As(err, &de) || de.Recording != name {
		return err
	}
	// bbolt frees a recording's pages as it deletes it, walking them,
	// which it cannot do when they are damaged. The recording is moved
	// out of the recordings instead, unwalked: its pages stay in the
	// file, under removedBucket, where Check still finds their damage
	// and Salvage leaves them. (The failed transaction wrote nothing.)
	return s.update("delete", name, func(tx *bolt.Tx) error {
		// Its own pages may be what is damaged: moving it reads only
		// the recordings bucket's.
		var p pages
		rs, err := recordings(tx, &p)
		if err != nil {
			return err
		}
		if rs == nil || rs.Bucket([]byte(name)) == nil {
			return ErrNotFound
		}
		removed, err := tx.CreateBucketIfNotExists(removedBucket)
		if err != nil {
			return err
		}
		at, err := removed.CreateBucket([]byte(strconv.FormatInt(time.Now().UnixNano(), 10)))
		if err != nil {
			return err
		}
		return tx.Bucket(recordingsBucket).MoveBucket([]byte(name), at)
	})
}

// Create starts a recording named rec.Name and returns its Writer. If the
// name is taken, Create fails with ErrExists unless force, which replaces
// the old recording; it fails with ErrBusy if a Writer, of any process,
// is writing a recording of that name. Create sets rec.Format, zeroes the counters and, if
// rec.Created is zero, sets it to now; it commits the metadata before it
// returns, so the recording is listed even if the process dies right after.
//
// A recording replaced by force is kept aside, unlisted, until the
// Writer ends: Finish drops it, Discard puts it back, so that a recording
// that fails to start (an agent that never ran) loses nothing. If the
// process dies first, the new recording stands and the old one stays
// aside, where Check reports it, until the name is next created or
// deleted.
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
	// The live lock before the recording: a reader that finds it not
	// Done and not locked may take it for interrupted.
	live, err := lockLive(s.path, name)
	if err != nil {
		return nil, s.wrap("create", name, err)
	}
	replacing := false
	err = s.update("create", name, func(tx *bolt.Tx) error {
		rs, err := tx.CreateBucketIfNotExists(recordingsBucket)
		if err != nil {
			return err
		}
		key := []byte(name)
		old := rs.Bucket(key)
		if old != nil && !force {
			return ErrExists
		}
		// With the live lock held, one kept aside is a dead process's.
		if err := dropReplaced(tx, key); err != nil {
			return err
		}
		if old != nil {
			if err := walkable(old, name, true); err != nil {
				return err
			}
			kept, err := tx.CreateBucketIfNotExists(replacedBucket)
			if err != nil {
				return err
			}
			if err := rs.MoveBucket(key, kept); err != nil {
				return err
			}
			replacing = true
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
		if live != nil {
			live.Close()
		}
		return nil, err
	}
	w := newWriter(s, rec, live)
	w.replacing = replacing
	s.writers[name] = w
	return w, nil
}

// dropReplaced deletes the recording of the given name kept aside by
// Create, if there is one, and the bucket that keeps them once empty.
func dropReplaced(tx *bolt.Tx, name []byte) error {
	kept := tx.Bucket(replacedBucket)
	if kept == nil {
		return nil
	}
	if kept.Bucket(name) != nil {
		if err := kept.DeleteBucket(name); err != nil {
			return err
		}
	}
	if k, _ := kept.Cursor().First(); k == nil {
		return tx.DeleteBucket(replacedBucket)
	}
	return nil
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

// view runs fn in a read transaction of its own and adds context to any
// error.
func (s *Store) view(op, name string, fn func(*bolt.Tx) error) error {
	if s.closed.Load() {
		return s.wrap(op, name, errStoreClosed)
	}
	return s.wrap(op, name, s.withDB(false, s.timeout, func(db *bolt.DB) error { return db.View(fn) }))
}

// update runs fn in a write transaction of its own and adds context to
// any error.
func (s *Store) update(op, name string, fn func(*bolt.Tx) error) error {
	return s.wrap(op, name, s.withDB(true, s.timeout, func(db *bolt.DB) error { return db.Update(fn) }))
}

// notLive fails with ErrBusy if a Writer of another Store, of this
// process or another, writes the named recording. Called in a write
// transaction, it holds: a Writer takes its live lock before it creates
// its recording.
func (s *Store) notLive(name string) error {
	p, err := newLiveProbe(s.path)
	if err != nil {
		return err
	}
	live, err := p.live(name)
	if err != nil {
		return err
	}
	if live {
		return errLiveHeld
	}
	return nil
}

// setLive sets Live of the recordings of recs that are not Done.
func (s *Store) setLive(recs []Recording) error {
	var p *liveProbe
	for i := range recs {
		if recs[i].Done {
			continue
		}
		if p == nil {
			var err error
			if p, err = newLiveProbe(s.path); err != nil {
				return err
			}
			defer p.close()
		}
		live, err := p.live(recs[i].Name)
		if err != nil {
			return err
		}
		recs[i].Live = live
	}
	return nil
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
	var de *DamagedError
	if errors.As(err, &de) {
		// It names the store itself, and the recording read unless it is
		// of the file as a whole.
		de.Path = s.path
		if de.Recording == "" && !de.whole {
			de.Recording = name
		}
		return de
	}
	if name == "" {
		return fmt.Errorf("%s recordings in %s: %w", op, s.path, err)
	}
	return fmt.Errorf("%s recording %s in %s: %w", op, QuoteName(name), s.path, err)
}

// wrapDamage fills in the store's path of a *DamagedError err and returns
// it; it returns any other err as it is.
func (s *Store) wrapDamage(err error) error {
	var de *DamagedError
	if errors.As(err, &de) {
		de.Path = s.path
		return de
	}
	return err
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

// quoteKey quotes a key, or a value, read from the file, cut to its first
// 64 bytes as QuoteName cuts a name: a damaged page can make one of
// megabytes.
func quoteKey(k []byte) string {
	if len(k) <= maxQuotedName {
		return strconv.Quote(string(k))
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(string(k[:maxQuotedName])), len(k))
}

// recording returns the named recording's bucket or ErrNotFound, once
// the pages on the way to it and its own are found walkable; what is in
// its buckets (events, blobs) is for the caller to walk.
func recording(tx *bolt.Tx, name string) (*bolt.Bucket, error) {
	var p pages
	rs, err := recordings(tx, &p)
	if err != nil || rs == nil {
		return nil, cmp.Or(err, ErrNotFound)
	}
	b := rs.Bucket([]byte(name))
	if b == nil {
		return nil, ErrNotFound
	}
	if err := p.walkable(b, name, false); err != nil {
		return nil, err
	}
	return b, nil
}

// recordings returns the recordings bucket, nil if there is none, once
// the file's root bucket and its pages are found walkable.
func recordings(tx *bolt.Tx, p *pages) (*bolt.Bucket, error) {
	if err := p.walkable(tx.Cursor().Bucket(), "", false); err != nil {
		return nil, err
	}
	rs := tx.Bucket(recordingsBucket)
	if rs == nil {
		return nil, nil
	}
	if err := p.walkable(rs, "", false); err != nil {
		return nil, err
	}
	return rs, nil
}

// readKnownMeta is readMeta that refuses a newer format and a
// recording that List marks as damaged.
func readKnownMeta(b *bolt.Bucket, name string) (Recording, error) {
	rec, err := readMeta(b, name)
	if err != nil {
		return Recording{}, err
	}
	if rec.Format < 1 {
		return Recording{}, &DamagedError{Recording: name, Where: "metadata", Err: fmt.Errorf("format %d", rec.Format)}
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
		return Recording{}, &DamagedError{Recording: name, Where: "metadata", Err: errors.New("missing")}
	}
	rec, err := decodeMeta(v)
	if err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // without decodeMeta's "metadata: "
		}
		return Recording{}, &DamagedError{Recording: name, Where: "metadata", Err: err}
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

package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/acptap/acptap/internal/exchange"
)

// Problem is one thing Check found wrong with a store.
type Problem struct {
	Recording string // the recording it is of; "" for the file as a whole
	Seq       uint64 // the event it is of; 0 if none
	What      string // what is wrong
}

// String is the problem on one line, naming the recording and the event.
func (p Problem) String() string {
	var at []string
	if p.Recording != "" {
		at = append(at, "recording "+QuoteName(p.Recording))
	}
	if p.Seq != 0 {
		at = append(at, fmt.Sprintf("event %d", p.Seq))
	}
	if len(at) == 0 {
		return p.What
	}
	return strings.Join(at, ", ") + ": " + p.What
}

// maxProblems is how many problems Check reports of one recording: a
// damaged page can make every value after it fail.
const maxProblems = 20

// CheckOptions configure Check. The zero value works.
type CheckOptions struct {
	// Names are the recordings to check; every one if empty. The file's
	// own structure is checked either way.
	Names []string
}

// Check verifies the store file at path and calls report with each
// problem it finds: bbolt's consistency check of the pages (done on the
// file read with pread, see checkPages), the store's layout and format,
// and of each recording: its metadata decodes and its format is known,
// every event value decodes, the Seqs are contiguous from 1 (in a
// recording that is Done), the events' times never go back along them
// (beyond the clock's resolution) and the counters of the metadata match the
// events, every exchange decodes, every blob (the workspace snapshot) is
// whole. It reads what the damage leaves readable: memory faults and
// bbolt's panics end the check of one recording, not of the store.
//
// It fails, without a problem, only when there is nothing to check: no
// file (ErrNoStore), not a bbolt file (ErrNotStore), the lock held
// (ErrLocked), a named recording that is not there (ErrNotFound).
func Check(path string, opts *CheckOptions, report func(Problem)) error {
	var o CheckOptions
	if opts != nil {
		o = *opts
	}
	for _, n := range o.Names {
		if err := ValidName(n); err != nil {
			return err
		}
	}
	f, size, err := openForCheck(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if !checkPages(f, size, report) {
		return nil
	}
	s := &Store{path: path, readOnly: true}
	return s.readAll(f, o.Names, func(name string, r *salvaged) {
		for _, p := range r.problems {
			report(p)
		}
	})
}

// openForCheck opens the store file for Check or Salvage, with its
// shared lock (waiting for it as Open does), and returns it with its size.
func openForCheck(path string) (*os.File, int64, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0, fmt.Errorf("check store %s: %w", path, ErrNoStore)
	case err != nil:
		return nil, 0, fmt.Errorf("check store: %w", err)
	case fi.IsDir():
		return nil, 0, fmt.Errorf("check store %s: %w", path, ErrIsDir)
	case !fi.Mode().IsRegular() || isProcFile(path, fi):
		return nil, 0, fmt.Errorf("check store %s: %w", path, ErrNotRegular)
	case fi.Size() == 0:
		return nil, 0, fmt.Errorf("check store %s: the file is empty: %w", path, ErrNoStore)
	}
	if !looksLikeBbolt(path, true) {
		return nil, 0, fmt.Errorf("check store %s: %w", path, ErrNotStore)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("check store: %w", err)
	}
	if err := lockFile(f, false, defaultTimeout); err != nil {
		return nil, 0, openError(path, defaultTimeout, err)
	}
	fi, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("check store: %w", err)
	}
	return f, fi.Size(), nil
}

// salvaged is what readAll read of one recording: its metadata (nil if
// it does not read), its readable events (the raw values, each of which
// decodes, in key order, up to the first that does not), its readable
// blobs, and the problems found.
type salvaged struct {
	meta     *Recording
	keys     [][]byte
	values   [][]byte
	blobs    map[string][]byte
	problems []Problem
	cut      string // why the events end early; "" if all were read
}

func (r *salvaged) problem(name string, seq uint64, what string) {
	if len(r.problems) == maxProblems {
		r.problems = append(r.problems, Problem{Recording: name, What: "more problems not shown"})
	}
	if len(r.problems) < maxProblems {
		r.problems = append(r.problems, Problem{Recording: name, Seq: seq, What: what})
	}
}

// readAll opens the bbolt file f (locked already) read-only and calls fn
// with what it reads of each recording of names, every one if names is
// empty. Problems of the store as a whole are passed as of a recording
// named "".
func (s *Store) readAll(f *os.File, names []string, fn func(string, *salvaged)) error {
	// bbolt opens a descriptor of its own, whose shared lock is granted
	// at once next to f's; unlike openDB, this open does not refuse a
	// file cut short: what its pages before the cut hold is read.
	var db *bolt.DB
	var file *os.File
	recovered, err := guard(func() error {
		var err error
		db, err = bolt.Open(s.path, 0, &bolt.Options{
			ReadOnly: true,
			OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
				file, err = os.OpenFile(name, flag&^os.O_CREATE, perm)
				return file, err
			},
		})
		return err
	})
	if recovered || err != nil {
		if recovered && file != nil {
			syscall.Flock(int(file.Fd()), syscall.LOCK_UN)
			file.Close()
		}
		fn("", &salvaged{problems: []Problem{{What: fmt.Sprintf("bbolt cannot open the file: %v", damageText(err))}}})
		return nil
	}
	recovered, err = guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			return s.readRecordings(tx, names, fn)
		})
	})
	closeDB(db, file, recovered)
	if recovered {
		fn("", &salvaged{problems: []Problem{{What: damageText(err)}}})
		return nil
	}
	return err
}

// strandedReplaced returns the names of the recordings Create kept aside
// whose replacement no Writer is writing any more: its process died.
func (s *Store) strandedReplaced(tx *bolt.Tx) ([]string, error) {
	kept := tx.Bucket(replacedBucket)
	if kept == nil {
		return nil, nil
	}
	if err := walkable(kept, "", false); err != nil {
		return nil, err
	}
	p, err := newLiveProbe(s.path)
	if err != nil {
		return nil, err
	}
	defer p.close()
	var names []string
	c := kept.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		live, err := p.live(string(k))
		if err != nil {
			return names, err
		}
		if !live {
			names = append(names, string(k))
		}
	}
	return names, nil
}

// damageText is the text of a *DamagedError without the store's, the
// recording's and the event's names.
func damageText(err error) string {
	var de *DamagedError
	switch {
	case errors.As(err, &de) && de.Where != "":
		return de.Where + ": " + fmt.Sprint(de.Err)
	case errors.As(err, &de) && de.Err != nil:
		return de.Err.Error()
	}
	return fmt.Sprint(err)
}

// readRecordings is readAll in its read transaction.
func (s *Store) readRecordings(tx *bolt.Tx, names []string, fn func(string, *salvaged)) error {
	whole := &salvaged{}
	if err := walkable(tx.Cursor().Bucket(), "", false); err != nil {
		// bbolt would loop in these pages: nothing can be read.
		whole.problem("", 0, "the file's root bucket: "+damageText(err))
		fn("", whole)
		return nil
	}
	if _, err := s.checkLayout(tx); err != nil {
		whole.problem("", 0, fmt.Sprint(err))
	}
	rs := tx.Bucket(recordingsBucket)
	if rs == nil {
		whole.problem("", 0, "the recordings bucket is missing")
	} else if err := walkable(rs, "", false); err != nil {
		whole.problem("", 0, "the list of recordings does not read: "+damageText(err))
		rs = nil
	}
	var found []string
	if rs != nil {
		var err error
		found, err = recordingNames(rs)
		if err != nil {
			whole.problem("", 0, err.Error())
		}
	}
	c := tx.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		switch {
		case bytes.Equal(k, removedBucket):
			whole.problem("", 0, "it keeps the pages of damaged recordings that rm removed; acptap check --salvage copies the store without them")
		case bytes.Equal(k, replacedBucket):
			stranded, err := s.strandedReplaced(tx)
			if err != nil {
				whole.problem("", 0, "the recordings kept aside while they were recorded again do not read: "+damageText(err))
			}
			for _, name := range stranded {
				whole.problem("", 0, fmt.Sprintf("it keeps aside the recording %s replaced when it was recorded again, by a process that died; the next acptap record --force or acptap rm of %s drops it", QuoteName(name), QuoteName(name)))
			}
		case !bytes.Equal(k, storeBucket) && !bytes.Equal(k, recordingsBucket):
			whole.problem("", 0, fmt.Sprintf("stray key %s at the top of the file", quoteKey(k)))
		}
	}
	if len(whole.problems) > 0 {
		fn("", whole)
	}
	if len(names) == 0 {
		names = found
	}
	for _, name := range names {
		if rs == nil || !slices.Contains(found, name) {
			return fmt.Errorf("check recording %s in %s: %w", QuoteName(name), s.path, ErrNotFound)
		}
	}
	for _, name := range names {
		fn(name, readRecording(rs, name))
	}
	return nil
}

// recordingNames returns the keys of the recordings bucket, as far as its
// pages read.
func recordingNames(rs *bolt.Bucket) (names []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the list of recordings reads only up to %d of them: %v", len(names), damageText(damagePanic(r)))
		}
	}()
	c := rs.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v != nil {
			return names, fmt.Errorf("stray key %s among the recordings", quoteKey(k))
		}
		names = append(names, string(k))
	}
	return names, nil
}

// readRecording reads what it can of the named recording of the
// recordings bucket rs.
func readRecording(rs *bolt.Bucket, name string) (r *salvaged) {
	r = &salvaged{blobs: map[string][]byte{}}
	defer func() {
		if p := recover(); p != nil {
			what := damageText(damagePanic(p))
			r.problem(name, 0, what)
			if r.cut == "" {
				r.cut = what
			}
		}
	}()
	b := rs.Bucket([]byte(name))
	if b == nil {
		r.problem(name, 0, "not a bucket")
		r.cut = "not a bucket"
		return r
	}
	// walked reports whether bbolt can walk the pages of the bucket x; if
	// not, it says so, and that what lost says is lost.
	walked := func(x *bolt.Bucket, deep bool, lost string) bool {
		if err := walkable(x, name, deep); err != nil {
			what := damageText(err)
			r.problem(name, 0, what)
			if r.cut == "" {
				r.cut = lost + what
			}
			return false
		}
		return true
	}
	if !walked(b, false, "") {
		return r
	}
	if err := ValidName(name); err != nil {
		r.problem(name, 0, "not a valid recording name")
	}
	rec, err := readMeta(b, name)
	switch {
	case err != nil:
		r.problem(name, 0, damageText(err))
	case rec.Format < 1 || rec.Format > FormatVersion:
		r.problem(name, 0, fmt.Sprintf("metadata: format %d, this acptap reads 1 to %d", rec.Format, FormatVersion))
	default:
		r.meta = &rec
	}
	eb := b.Bucket(eventsBucket)
	if eb == nil {
		r.problem(name, 0, "its events bucket is missing")
		r.cut = "its events bucket is missing"
	} else if walked(eb, false, "events from 1 on do not read: ") {
		readAllEvents(eb, name, r)
	}
	if bs := b.Bucket(blobsBucket); bs != nil && walked(bs, true, "its blobs do not read: ") {
		readBlobs(bs, name, r)
	}
	if r.meta != nil && r.meta.Snapshot && r.blobs[SnapshotBlob] == nil {
		r.problem(name, 0, "its workspace snapshot is missing or damaged")
	}
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if !bytes.Equal(k, metaKey) && !bytes.Equal(k, eventsBucket) && !bytes.Equal(k, blobsBucket) {
			r.problem(name, 0, fmt.Sprintf("stray key %s in its bucket", quoteKey(k)))
		}
	}
	return r
}

// readAllEvents reads the events bucket eb of the named recording into r.
func readAllEvents(eb *bolt.Bucket, name string, r *salvaged) {
	var frames, exchanges int
	var order orderCheck
	next := uint64(1) // the Seq the next value should start at
	var gaps []string
	unknownSpan := false // the last value did not read, nor say its span
	at := uint64(1)
	defer func() {
		if p := recover(); p != nil {
			what := damageText(damagePanic(p))
			r.problem(name, at, what)
			r.cut = fmt.Sprintf("events from %d on do not read: %s", at, what)
		}
	}()
	var events []Event
	c := eb.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 8 || v == nil {
			r.problem(name, next, fmt.Sprintf("stray key %s among the events", quoteKey(k)))
			continue
		}
		seq := binary.BigEndian.Uint64(k)
		at = seq
		if seq < next {
			r.problem(name, seq, fmt.Sprintf("stored again after a value up to event %d", next-1))
			continue
		}
		var err error
		events, err = decodeValue(events[:0], seq, v)
		if err != nil {
			r.problem(name, seq, err.Error())
			if r.cut == "" {
				r.cut = fmt.Sprintf("events from %d on do not read: %v", seq, err)
			}
			// The events it held are not missing: its header may say
			// how many there were.
			if _, n, err := valueSpan(seq, v); err == nil {
				next = seq + n
			} else {
				next, unknownSpan = seq+1, true
			}
			continue
		}
		if seq > next && !unknownSpan {
			gaps = append(gaps, seqRange(next, seq-1))
		}
		for _, e := range events {
			order.see(e)
			switch e.Kind {
			case KindFrame:
				frames++
				if _, _, mcp := e.Lane.MCP(); !mcp && (e.Lane < LaneEditor || e.Lane > LaneStderr) {
					r.problem(name, e.Seq, fmt.Sprintf("a frame of %s", e.Lane))
				}
			case KindExchange:
				exchanges++
				if e.Lane != LaneLLM {
					r.problem(name, e.Seq, fmt.Sprintf("an exchange of %s", e.Lane))
				}
				if _, err := exchange.Unmarshal(e.Data); err != nil {
					r.problem(name, e.Seq, err.Error())
				}
			default:
				r.problem(name, e.Seq, fmt.Sprintf("unknown kind %d", e.Kind))
			}
		}
		next, unknownSpan = events[len(events)-1].Seq+1, false
		at = next
		if r.cut == "" {
			r.keys = append(r.keys, slices.Clone(k))
			r.values = append(r.values, slices.Clone(v))
		}
	}
	if p := order.problem(); p != "" {
		r.problem(name, order.firstSeq, p)
	}
	if r.meta == nil {
		return
	}
	// A Seq reserved for an exchange is written when the exchange is: a
	// recording that is not Done may lack the last ones.
	if r.meta.Done && len(gaps) > 0 {
		r.problem(name, 0, fmt.Sprintf("events missing: %s", strings.Join(gaps[:min(len(gaps), 5)], ", ")))
	}
	if r.cut == "" && (frames != r.meta.Frames || exchanges != r.meta.Exchanges) {
		r.problem(name, 0, fmt.Sprintf("metadata counts %d frames and %d exchanges, the events are %d and %d", r.meta.Frames, r.meta.Exchanges, frames, exchanges))
	}
}

// clockResolution is the resolution of the times of a recording's
// events: acptap record takes them from a clock of microseconds
// (internal/stamp).
const clockResolution = time.Microsecond

// An orderCheck finds the events whose Seq contradicts their times: an
// event whose time is earlier, by more than the clock's resolution, than
// that of an event before it. acptap record numbers events in the order
// they happened, and times them from the same clock, so that time never
// goes back along the Seqs; a recording made before it did (where a frame
// took its Seq when it was framed, up to milliseconds after its read, and
// an LLM exchange when its request arrived) may contradict itself.
type orderCheck struct {
	latest   time.Duration // the latest time so far
	latestAt uint64        // the Seq of the event at latest
	count    int           // events earlier than one before them
	firstSeq uint64        // the first of them
	firstAt  time.Duration // its time
	before   uint64        // the Seq of the later event it follows
	beforeAt time.Duration // that event's time
}

func (o *orderCheck) see(e Event) {
	if e.Offset+clockResolution < o.latest {
		if o.count == 0 {
			o.firstSeq, o.firstAt, o.before, o.beforeAt = e.Seq, e.Offset, o.latestAt, o.latest
		}
		o.count++
		return
	}
	if e.Offset >= o.latest {
		o.latest, o.latestAt = e.Offset, e.Seq
	}
}

// problem says what the check found, or "".
func (o *orderCheck) problem() string {
	if o.count == 0 {
		return ""
	}
	others := ""
	switch {
	case o.count == 2:
		others = " (and 1 more event)"
	case o.count > 2:
		others = fmt.Sprintf(" (and %d more events)", o.count-1)
	}
	return fmt.Sprintf("its order contradicts its times: it comes after event %d but happened %v before it%s; the recording does not hold its events in the order they happened (an older acptap record numbered them so): record it again",
		o.before, (o.beforeAt - o.firstAt).Round(time.Microsecond), others)
}

func seqRange(from, to uint64) string {
	if from == to {
		return strconv.FormatUint(from, 10)
	}
	return fmt.Sprintf("%d to %d", from, to)
}

// readBlobs reads the blobs bucket bs of the named recording into r.
func readBlobs(bs *bolt.Bucket, name string, r *salvaged) {
	c := bs.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		bb := bs.Bucket(k)
		if v != nil || bb == nil {
			r.problem(name, 0, fmt.Sprintf("stray key %s among its blobs", quoteKey(k)))
			continue
		}
		data, err := decodeBlob(bb)
		if err != nil {
			r.problem(name, 0, fmt.Sprintf("blob %s: %v", quoteKey(k), err))
			continue
		}
		r.blobs[string(k)] = data
	}
}

// SalvageResult says what Salvage copied, by recording name.
type SalvageResult struct {
	Whole   []string // copied whole
	Partial []string // copied as far as they read, marked so (Recording.Salvaged)
	Lost    []string // nothing of them read
}

// Salvage copies what reads of the store file at path into a new store
// file at dst, which must not exist: every recording that reads whole,
// as it is, and of one that does not, its metadata (if it reads) and its
// events up to the first that does not read, with Recording.Salvaged
// saying what was lost. It calls report with each problem, as Check. A
// recording is held in memory while it is copied. If Salvage fails, dst
// is removed.
func Salvage(path, dst string, report func(Problem)) (res SalvageResult, err error) {
	if _, err := os.Lstat(dst); err == nil {
		return res, fmt.Errorf("salvage into %s: %w", dst, fs.ErrExist)
	}
	f, size, err := openForCheck(path)
	if err != nil {
		return res, err
	}
	defer f.Close()
	out, err := Open(dst, nil)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	if !checkPages(f, size, report) {
		return res, nil
	}
	s := &Store{path: path, readOnly: true}
	var putErr error
	err = s.readAll(f, nil, func(name string, r *salvaged) {
		for _, p := range r.problems {
			report(p)
		}
		if name == "" || putErr != nil {
			return
		}
		switch written, whole, err := out.putSalvaged(name, r); {
		case err != nil:
			putErr = err
		case !written:
			res.Lost = append(res.Lost, name)
		case whole:
			res.Whole = append(res.Whole, name)
		default:
			res.Partial = append(res.Partial, name)
		}
	})
	if err == nil {
		err = putErr
	}
	return res, err
}

// putSalvaged writes what was read of the named recording into s, and
// reports whether it did, and whether that was all of it. A recording of
// which nothing read is not written, nor one whose name is not valid (a
// damaged key).
func (s *Store) putSalvaged(name string, r *salvaged) (written, whole bool, err error) {
	if err := ValidName(name); err != nil || r.meta == nil && len(r.keys) == 0 {
		return false, false, nil
	}
	var lost []string
	rec := Recording{Name: name, Format: FormatVersion}
	if r.meta != nil {
		rec = *r.meta
	} else {
		lost = append(lost, "its metadata")
	}
	if r.cut != "" {
		lost = append(lost, r.cut)
	}
	if rec.Snapshot && r.blobs[SnapshotBlob] == nil {
		lost = append(lost, "its workspace snapshot")
		rec.Snapshot = false
	}
	rec.Frames, rec.Exchanges = 0, 0
	for i, k := range r.keys {
		kind, n, err := valueSpan(binary.BigEndian.Uint64(k), r.values[i])
		if err != nil {
			return false, false, err // it decoded before: a bug
		}
		if kind == KindExchange {
			rec.Exchanges += int(n)
		} else {
			rec.Frames += int(n)
		}
	}
	if len(lost) > 0 {
		rec.Salvaged = "salvaged from a damaged store; lost: " + strings.Join(lost, "; ")
	}
	meta, err := encodeMeta(&rec)
	if err != nil {
		return false, false, err
	}
	err = s.update("salvage", name, func(tx *bolt.Tx) error {
		b, err := tx.Bucket(recordingsBucket).CreateBucket([]byte(name))
		if err != nil {
			return err
		}
		if err := b.Put(metaKey, meta); err != nil {
			return err
		}
		eb, err := b.CreateBucket(eventsBucket)
		if err != nil {
			return err
		}
		eb.FillPercent = 1
		for i, k := range r.keys {
			if err := eb.Put(k, r.values[i]); err != nil {
				return err
			}
		}
		for _, blob := range slices.Sorted(maps.Keys(r.blobs)) {
			if blob == SnapshotBlob && !rec.Snapshot {
				continue
			}
			chunks, err := encodeBlob(r.blobs[blob])
			if err != nil {
				return err
			}
			if err := putBlob(tx, name, blob, len(r.blobs[blob]), chunks); err != nil {
				return err
			}
		}
		return nil
	})
	return err == nil, len(lost) == 0, err
}

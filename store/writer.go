package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Limits of one commit. A commit takes everything queued since the last
// one, in transactions of at most this many events or data bytes (and at
// least one event), so that no transaction grows huge.
const (
	maxCommitEvents = 8192
	maxCommitBytes  = 32 << 20
	// maxSpareEvents bounds the queue array kept for reuse after a commit:
	// enough for the batch of a busy queue (see lingerEvents).
	maxSpareEvents = maxCommitEvents
)

// When to commit. A commit costs two fdatasyncs whatever it holds, which
// take hundreds of µs of CPU, mostly the kernel's, from the agent and the
// pumps that forward its stdio, and an open, a lock, a map and an unmap of
// the file, whose TLB shootdown interrupts every thread of the process:
// the Writer commits a few big batches rather than many small ones. But it
// must not keep events in memory for long, where a SIGKILL loses them.
//
// When the queue was empty, the Writer commits the first event at once:
// a lone line, or the first of a burst, reaches the disk without delay.
// Events that arrive while it commits show that more keep coming: then the
// Writer lingers, so that commits start at most every commitInterval,
// unless lingerQuiet passes without a new event (the queue went idle, and
// waiting longer would only delay what it has), the queue reaches
// lingerEvents or lingerBytes, or Flush, Throttle or Finish is waiting.
//
// Whatever the queue does, a commit starts at least commitSpacing times
// as long after the last one started as the last one took (at most
// maxCommitInterval): commits then take at most a twentieth of the time
// while each takes up to 2.5 ms, however slow the disk's fdatasync makes
// them, and a stream of events that
// arrive faster than that is committed in batches, not one commit per
// event interrupting the forwarding of each. On a disk whose commit takes
// 1 ms that is a commit at most every 20 ms; on one that takes 0.1 ms the
// spacing is below commitInterval and changes nothing.
//
// Writers of other processes share the file's lock: when a commit had to
// wait for it, the Writer lingers for up to four times that wait (at most
// maxCommitInterval), so that busy Writers take the lock less often, and
// leave it free more of the time for a Writer with a lone line to commit
// and for readers (show --follow) to read.
const (
	commitInterval    = 5 * time.Millisecond
	maxCommitInterval = 50 * time.Millisecond
	commitSpacing     = 20
	lingerQuiet       = time.Millisecond
	lingerEvents      = maxCommitEvents
	lingerBytes       = 8 << 20
)

// minCommitTook is the least a commit is taken to have taken, and
// maxSpacing the most commitSpacing spaces commits: tests raise them to
// pretend that the disk is slow.
var (
	minCommitTook time.Duration
	maxSpacing    = maxCommitInterval
)

// Writer appends events to one recording from many goroutines without
// ever blocking the caller on disk I/O: events wait in an unbounded
// in-memory queue that one goroutine commits in batches.
type Writer struct {
	s    *Store
	name string
	done chan struct{} // closed when run returns
	live *os.File      // holds the recording's live lock until Finish; nil where there is none (see lockLive)
	// replacing: Create kept aside a recording of the same name, for
	// Finish to drop and Discard to put back. Set before the Writer is
	// returned.
	replacing bool

	finishOnce sync.Once

	mu            sync.Mutex
	wake          sync.Cond // on mu; signalled when run has work or must stop
	progress      sync.Cond // on mu; broadcast when committed, metaCommitted or err change
	queue         []Event   // guarded by mu: appended and not yet taken by run
	queued        uint64    // guarded by mu: events ever queued
	committed     uint64    // guarded by mu: events of queue committed so far
	seq           uint64    // guarded by mu: the last Seq handed out
	meta          Recording // guarded by mu: the metadata as changed by Update
	metaGen       uint64    // guarded by mu: count of Update calls
	metaCommitted uint64    // guarded by mu: metaGen as of the last commit
	queueBytes    int       // guarded by mu: the Data bytes of queue
	flushing      int       // guarded by mu: Flush calls waiting
	throttled     int       // guarded by mu: Throttle calls waiting
	lingering     bool      // guarded by mu: run waits for more events, see lingerLocked
	ticked        bool      // guarded by mu: timer fired since run armed it
	finishing     bool      // guarded by mu: Finish was called; run drains and returns
	err           error     // guarded by mu: the first commit error; run has returned
	lateReported  bool      // guarded by mu: an Append or Update after Finish was reported

	timer  *time.Timer   // wakes run while it lingers; only run uses it, nil until then
	waited time.Duration // how long the last commit waited for the file's lock; only run uses it
	took   time.Duration // how long the last commit took, but for that wait; only run uses it

	// Buffers reused from commit to commit; only run uses them.
	vals  []value // the values of a transaction
	keys  []byte  // their keys, 8 bytes each
	arena []byte  // their encodings, but for the biggest events
	body  []byte  // the uncompressed body of the block being encoded
}

func newWriter(s *Store, rec Recording, live *os.File) *Writer {
	rec = rec.clone()
	w := &Writer{
		s:    s,
		name: rec.Name,
		done: make(chan struct{}),
		live: live,
		meta: rec,
	}
	w.wake.L = &w.mu
	w.progress.L = &w.mu
	go w.run(rec.clone())
	return w
}

// Append queues e and returns its Seq. A zero e.Seq gets the next one of
// the recording's single counter, which starts at 1; a nonzero e.Seq (one
// from Reserve) is kept, and an event with the same Seq appended later
// replaces this one. Append takes ownership of e.Data and never blocks on
// disk. An event appended after Finish, or after a commit failed, is
// dropped.
func (w *Writer) Append(e Event) uint64 {
	w.mu.Lock()
	if e.Seq == 0 {
		w.seq++
		e.Seq = w.seq
	} else {
		w.seq = max(w.seq, e.Seq)
	}
	if w.finishing || w.err != nil {
		w.lateLocked("append event", e.Seq)
		return e.Seq
	}
	w.queue = append(w.queue, e)
	w.queued++
	w.queueBytes += len(e.Data)
	// A lingering run waits for its timer, not for each event: waking it
	// for nothing would cost more than the event.
	wake := !w.lingering || w.urgentLocked()
	w.mu.Unlock()
	if wake {
		w.wake.Signal()
	}
	return e.Seq
}

// Reserve hands out the next Seq now for an event to be appended later,
// so that an LLM exchange keeps the position at which its request started.
func (w *Writer) Reserve() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	return w.seq
}

// Update changes the recording's metadata; the change is committed with
// the next commit, with or after every event appended before it. Changes
// to Name, Format, Frames and Exchanges are ignored: the Writer keeps
// those. fn runs with the Writer locked and must not call its methods. An
// Update after Finish, or after a commit failed, is dropped.
func (w *Writer) Update(fn func(*Recording)) {
	w.mu.Lock()
	if w.finishing || w.err != nil {
		w.lateLocked("update metadata", 0)
		return
	}
	name, format := w.meta.Name, w.meta.Format
	fn(&w.meta)
	w.meta.Name, w.meta.Format = name, format
	w.metaGen++
	w.mu.Unlock()
	w.wake.Signal()
}

// lateLocked unlocks w.mu and reports the first write after Finish (op,
// and the event's seq unless zero) to OnError. Writes after a commit
// error are not reported again.
func (w *Writer) lateLocked(op string, seq uint64) {
	report := w.err == nil && !w.lateReported && w.s.onError != nil
	w.lateReported = true
	w.mu.Unlock()
	if !report {
		return
	}
	if seq != 0 {
		op = fmt.Sprint(op, " ", seq)
	}
	w.s.onError(w.s.wrap("write", w.name, fmt.Errorf("%s after Finish: %w", op, ErrClosed)))
}

// Flush waits until everything appended and updated before the call is
// committed and returns the first commit error.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, gen := w.queued, w.metaGen
	if w.err == nil && (w.committed < n || w.metaCommitted < gen) {
		// Stop run lingering: the caller waits.
		w.flushing++
		w.wake.Signal()
		for w.err == nil && (w.committed < n || w.metaCommitted < gen) {
			w.progress.Wait()
		}
		w.flushing--
	}
	return w.err
}

// Throttle waits while more than max bytes of event data are queued for
// the next commit, so that a producer faster than the disk can bound the
// memory its events hold to about twice max: the queue, and the batch of
// the commit under way, which the next batch queues behind without
// waiting for it. It returns at once after Finish was called or a commit
// failed.
func (w *Writer) Throttle(max int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queueBytes > max && w.err == nil && !w.finishing {
		// Stop run lingering: the producer waits for the commit.
		w.throttled++
		w.wake.Signal()
		for w.queueBytes > max && w.err == nil && !w.finishing {
			w.progress.Wait()
		}
		w.throttled--
	}
}

// Finish commits everything queued, stops the Writer's goroutine and
// returns the first commit error. Calls after the first return the same.
func (w *Writer) Finish() error {
	w.finishOnce.Do(func() {
		w.stop()
		if w.replacing {
			w.dropReplaced()
		}
		// After the last commit: a reader never sees the recording
		// neither Done nor live while it ends.
		if w.live != nil {
			w.live.Close()
		}
		w.s.forget(w)
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// dropReplaced deletes the recording Create kept aside for this one. It
// is not the Writer's error if that fails: this recording is whole, and
// the old one stays aside, where Check reports it, until the name is
// next created or deleted.
func (w *Writer) dropReplaced() {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.update("finish", w.name, func(tx *bolt.Tx) error { return dropReplaced(tx, []byte(w.name)) })
}

// stop commits everything queued and stops the Writer's goroutine.
func (w *Writer) stop() {
	w.mu.Lock()
	w.finishing = true
	w.progress.Broadcast() // a Throttle returns
	w.mu.Unlock()
	w.wake.Signal()
	<-w.done
}

// clone returns a copy of r that shares no memory with it, so that a
// caller's Update cannot change what run encodes.
func (r Recording) clone() Recording {
	r.Argv = slices.Clone(r.Argv)
	r.EnvNames = slices.Clone(r.EnvNames)
	r.Env = slices.Clone(r.Env)
	return r
}

// counts are the Writer-kept counters of a recording.
type counts struct{ frames, exchanges int }

func (c *counts) add(k Kind, n int) {
	switch k {
	case KindFrame:
		c.frames += n
	case KindExchange:
		c.exchanges += n
	}
}

// run commits what Append and Update queue until Finish, or until a
// commit fails. stored is the metadata as last committed.
func (w *Writer) run(stored Recording) {
	defer close(w.done)
	var spare []Event
	var started time.Time // when the last commit started
	for {
		w.mu.Lock()
		spaced := started.Add(min(commitSpacing*w.took, maxSpacing))
		if w.hasWorkLocked() {
			// It came while run committed: more is likely coming.
			w.lingerLocked(started.Add(max(commitInterval, min(4*w.waited, maxCommitInterval))), spaced)
		}
		for !w.hasWorkLocked() && !w.finishing {
			w.wake.Wait()
		}
		if !w.hasWorkLocked() {
			w.mu.Unlock()
			return
		}
		w.lingerLocked(spaced, spaced)
		batch := w.queue
		w.queue = spare
		if w.queueBytes > 0 {
			w.queueBytes = 0
			w.progress.Broadcast() // a Throttle may return
		}
		meta, gen := w.meta.clone(), w.metaGen
		w.mu.Unlock()
		started = time.Now()

		err := w.commitBatch(batch, &stored, meta)
		w.took = max(time.Since(started)-w.waited, minCommitTook)
		w.mu.Lock()
		if err != nil {
			w.err = err
			w.queue = nil
		} else {
			w.metaCommitted = gen
		}
		w.progress.Broadcast()
		w.mu.Unlock()
		if err != nil {
			if w.s.onError != nil {
				w.s.onError(err)
			}
			return
		}
		clear(batch)
		spare = nil
		if cap(batch) <= maxSpareEvents {
			spare = batch[:0]
		}
	}
}

// hasWorkLocked reports whether there is something to commit.
func (w *Writer) hasWorkLocked() bool {
	return len(w.queue) > 0 || w.metaGen != w.metaCommitted
}

// urgentLocked reports whether run must commit without lingering.
func (w *Writer) urgentLocked() bool {
	return w.finishing || w.flushing > 0 || w.throttled > 0 || len(w.queue) >= lingerEvents || w.queueBytes >= lingerBytes
}

// lingerLocked waits, with w.mu held, until deadline for more events to
// commit with those queued, as long as they keep coming (see
// commitInterval), and in any case until notBefore (see commitSpacing),
// unless the commit is urgent.
func (w *Writer) lingerLocked(deadline, notBefore time.Time) {
	w.lingering = true
	defer func() { w.lingering = false }()
	for !w.urgentLocked() {
		now := time.Now()
		quiet := !now.Before(notBefore) // a quiet queue may end the wait
		wait := max(deadline.Sub(now), notBefore.Sub(now))
		if wait <= 0 {
			break
		}
		if quiet {
			wait = min(wait, lingerQuiet)
		}
		if w.timer == nil {
			w.timer = time.AfterFunc(wait, w.tick)
		} else {
			w.timer.Reset(wait)
		}
		n := w.queued
		w.ticked = false
		for !w.ticked && !w.urgentLocked() {
			w.wake.Wait()
		}
		if quiet && w.queued == n {
			// Nothing came for lingerQuiet (or since a stale tick of
			// an earlier Reset, which only makes this batch smaller).
			break
		}
	}
	if w.timer != nil {
		w.timer.Stop()
	}
}

// tick wakes a lingering run.
func (w *Writer) tick() {
	w.mu.Lock()
	w.ticked = true
	w.mu.Unlock()
	w.wake.Signal()
}

// commitBatch commits batch in transactions within the limits. Each
// transaction writes the metadata with the counters it leaves behind: the
// last one writes meta, the others keep the metadata already stored, so
// that a change made after the batch's last event (Done, say) is never
// committed ahead of it. On success *stored is the committed metadata.
func (w *Writer) commitBatch(batch []Event, stored *Recording, meta Recording) error {
	for {
		n, size := 0, 0
		for n < len(batch) && n < maxCommitEvents && (n == 0 || size+len(batch[n].Data) <= maxCommitBytes) {
			size += len(batch[n].Data)
			n++
		}
		m := *stored
		if n == len(batch) {
			m = meta
			m.Frames, m.Exchanges = stored.Frames, stored.Exchanges
		}
		m, err := w.commit(batch[:n], m)
		if err != nil {
			return err
		}
		*stored = m
		if n > 0 {
			w.mu.Lock()
			w.committed += uint64(n)
			w.progress.Broadcast()
			w.mu.Unlock()
		}
		batch = batch[n:]
		if len(batch) == 0 {
			return nil
		}
	}
}

// commit writes events and the metadata m in one transaction. It returns
// m with the counters it committed: m's counters plus the events' kinds,
// minus the kinds of the events they replaced.
func (w *Writer) commit(events []Event, m Recording) (Recording, error) {
	events = dropSuperseded(events)
	// Compress before the transaction: the file's lock, which every
	// Writer of every process shares, is held only for the B+tree's work.
	vals, err := w.encode(events)
	defer w.release(vals)
	if err != nil {
		return m, w.s.wrap("write", w.name, err)
	}
	keys := w.keys[:0]
	for i := range vals {
		keys = binary.BigEndian.AppendUint64(keys, vals[i].seq)
	}
	w.keys = keys
	// The wait for the lock has no limit: the events wait in memory
	// while other processes commit, and none is dropped.
	err = w.s.withDBWaited(true, waitForever, &w.waited, func(db *bolt.DB) error {
		return db.Update(func(tx *bolt.Tx) error {
			b, err := recording(tx, w.name)
			if err != nil {
				return err
			}
			eb := b.Bucket(eventsBucket)
			if eb == nil {
				return errors.New("events bucket missing")
			}
			// eb is not walked first (see walkable): the Writer made it,
			// from pages the freelist, which Open checks, said were free,
			// and walking it at every commit would cost more than the
			// commit as the recording grows.
			//
			// Seqs mostly grow: fill pages rather than split them in halves.
			eb.FillPercent = 0.9
			c := counts{frames: m.Frames, exchanges: m.Exchanges}
			cur := eb.Cursor()
			for i := range vals {
				val := &vals[i]
				if err := clearSpan(eb, cur, val.seq, val.seq+val.n-1, &c); err != nil {
					return err
				}
				// bbolt keeps the key and the value until the commit: both
				// live in buffers that are reused only after it.
				if err := eb.Put(keys[8*i:8*i+8:8*i+8], val.v); err != nil {
					return fmt.Errorf("event %d: %w", val.seq, err)
				}
				c.add(val.kind, int(val.n))
			}
			m.Frames, m.Exchanges = c.frames, c.exchanges
			v, err := encodeMeta(&m)
			if err != nil {
				return err
			}
			return b.Put(metaKey, v)
		})
	})
	return m, w.s.wrap("write", w.name, err)
}

// value is an encoded event value or frame block of a commit.
type value struct {
	seq  uint64 // its key: the Seq of its first event
	n    uint64 // how many events it holds, with Seqs seq to seq+n-1
	kind Kind   // their kind
	v    []byte
}

// Buffers that commit keeps from one transaction to the next, up to these
// sizes: a burst of big events should not pin its memory for the rest of
// the recording.
const (
	maxSpareArena = 8 << 20
	maxSpareVals  = 1024
)

// encode turns events, in Seq order as appended, into the values of one
// transaction: each maximal run of frames that blockRun accepts becomes a
// frame block, anything else an event value. The values live in buffers
// of w that stay untouched until release.
func (w *Writer) encode(events []Event) ([]value, error) {
	vals := w.vals[:0]
	arena := w.arena[:0]
	defer func() { w.arena = arena }()
	for len(events) > 0 {
		e := &events[0]
		val := value{seq: e.Seq, n: 1, kind: e.Kind}
		start := len(arena)
		var err error
		if n := blockRun(events); n > 0 {
			w.body = appendBlockBody(w.body[:0], events[:n])
			arena, err = appendBlock(arena, w.body, n)
			val.n = uint64(n)
			val.v = arena[start:len(arena):len(arena)]
		} else if len(e.Data) > maxBlockBody {
			// Too big for the arena: it would have to grow, and copy
			// what it holds, for a buffer that release then drops.
			val.v, err = encodeEvent(e)
		} else {
			arena, err = appendEvent(arena, e)
			val.v = arena[start:len(arena):len(arena)]
		}
		if err != nil {
			return vals, err
		}
		vals = append(vals, val)
		events = events[val.n:]
	}
	return vals, nil
}

// release returns the buffers of the values of encode for reuse, dropping
// those grown too big to keep.
func (w *Writer) release(vals []value) {
	clear(vals)
	w.vals = vals[:0]
	if cap(vals) > maxSpareVals {
		w.vals = nil
	}
	if cap(w.arena) > maxSpareArena {
		w.arena = nil
	}
}

// clearSpan makes room in eb for a value of the events first to last. It
// takes the events stored in that span off c and deletes their values,
// except the one under the key first, which the caller overwrites; a
// frame block that reaches into the span from before it or out of it
// behind is rewritten with only its events outside the span. cur is a
// cursor of eb, repositioned here.
//
// In the common case, a value of new Seqs after all stored ones, this is
// one Seek and a look at the header of the last value.
func clearSpan(eb *bolt.Bucket, cur *bolt.Cursor, first, last uint64, c *counts) error {
	type stored struct {
		seq, n uint64
		kind   Kind
		v      []byte
	}
	var found []stored
	var key [8]byte
	binary.BigEndian.PutUint64(key[:], first)
	k, v := cur.Seek(key[:])
	if k != nil && len(k) != 8 {
		return fmt.Errorf("stray key %s among events", quoteKey(k))
	}
	if k == nil || binary.BigEndian.Uint64(k) > first {
		// Only a block can reach into the span from a key before it.
		var pk, pv []byte
		if k == nil {
			pk, pv = cur.Last()
		} else {
			pk, pv = cur.Prev()
		}
		if pk != nil && len(pk) != 8 {
			return fmt.Errorf("stray key %s among events", quoteKey(pk))
		}
		if pk != nil {
			seq := binary.BigEndian.Uint64(pk)
			kind, n, err := valueSpan(seq, pv)
			if err != nil {
				return fmt.Errorf("event %d: %w", seq, err)
			}
			if seq+n-1 >= first {
				found = append(found, stored{seq, n, kind, pv})
			}
		}
		if k != nil {
			k, v = cur.Seek(key[:])
		}
	}
	for ; k != nil; k, v = cur.Next() {
		if len(k) != 8 {
			return fmt.Errorf("stray key %s among events", quoteKey(k))
		}
		seq := binary.BigEndian.Uint64(k)
		if seq > last {
			break
		}
		kind, n, err := valueSpan(seq, v)
		if err != nil {
			return fmt.Errorf("event %d: %w", seq, err)
		}
		found = append(found, stored{seq, n, kind, v})
	}
	// The cursor is done: from here on eb changes under it.
	for _, s := range found {
		end := s.seq + s.n - 1
		c.add(s.kind, -int(min(end, last)-max(s.seq, first)+1))
		if s.seq < first || end > last {
			events, err := decodeBlock(nil, s.seq, s.v)
			if err != nil {
				return fmt.Errorf("event %d: %w", s.seq, err)
			}
			if s.seq < first {
				if err := putBlock(eb, events[:first-s.seq]); err != nil {
					return err
				}
			}
			if end > last {
				if err := putBlock(eb, events[last+1-s.seq:]); err != nil {
					return err
				}
			}
		}
		if s.seq > first {
			if err := eb.Delete(seqKey(s.seq)); err != nil {
				return fmt.Errorf("event %d: %w", s.seq, err)
			}
		}
	}
	return nil
}

// putBlock stores events, part of a frame block, as a block of their own.
func putBlock(eb *bolt.Bucket, events []Event) error {
	v, err := encodeBlock(events)
	if err == nil {
		err = eb.Put(seqKey(events[0].Seq), v)
	}
	if err != nil {
		return fmt.Errorf("event %d: %w", events[0].Seq, err)
	}
	return nil
}

// seqKey returns the key of a value whose first event has Seq seq.
func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq)
}

// dropSuperseded leaves out the events of a batch that a later event of
// the same batch replaces (same Seq): the HTTP tap writes an exchange
// first as incomplete, then finished, and a short exchange often has both
// in one batch, where compressing and storing the first is wasted work.
// The last write of a Seq still wins, as it would across batches.
func dropSuperseded(events []Event) []Event {
	exchanges := 0
	for i := range events {
		if events[i].Kind == KindExchange {
			exchanges++
		}
	}
	if exchanges < 2 {
		return events
	}
	last := make(map[uint64]int, exchanges)
	for i := range events {
		last[events[i].Seq] = i
	}
	if len(last) == len(events) {
		return events
	}
	kept := make([]Event, 0, len(last))
	for i := range events {
		if last[events[i].Seq] == i {
			kept = append(kept, events[i])
		}
	}
	return kept
}

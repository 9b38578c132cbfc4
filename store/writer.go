package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Limits of one commit. A commit takes everything queued since the last
// one, in transactions of at most this many events or data bytes (and at
// least one event), so that no transaction grows huge.
const (
	maxCommitEvents = 8192
	maxCommitBytes  = 32 << 20
	// maxSpareEvents bounds the queue array kept for reuse after a commit.
	maxSpareEvents = 4096
)

// Writer appends events to one recording from many goroutines without
// ever blocking the caller on disk I/O: events wait in an unbounded
// in-memory queue that one goroutine commits in batches.
type Writer struct {
	s    *Store
	name string
	done chan struct{} // closed when run returns

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
	finishing     bool      // guarded by mu: Finish was called; run drains and returns
	err           error     // guarded by mu: the first commit error; run has returned
	lateReported  bool      // guarded by mu: an Append or Update after Finish was reported
}

func newWriter(s *Store, rec Recording) *Writer {
	rec = rec.clone()
	w := &Writer{
		s:    s,
		name: rec.Name,
		done: make(chan struct{}),
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
	} else if e.Seq > w.seq {
		w.seq = e.Seq
	}
	if w.finishing || w.err != nil {
		w.lateLocked("append event", e.Seq)
		return e.Seq
	}
	w.queue = append(w.queue, e)
	w.queued++
	w.mu.Unlock()
	w.wake.Signal()
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
	for w.err == nil && (w.committed < n || w.metaCommitted < gen) {
		w.progress.Wait()
	}
	return w.err
}

// Finish commits everything queued, stops the Writer's goroutine and
// returns the first commit error. Calls after the first return the same.
func (w *Writer) Finish() error {
	w.finishOnce.Do(func() {
		w.mu.Lock()
		w.finishing = true
		w.mu.Unlock()
		w.wake.Signal()
		<-w.done
		w.s.forget(w)
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// clone returns a copy of r that shares no memory with it, so that a
// caller's Update cannot change what run encodes.
func (r Recording) clone() Recording {
	r.Argv = slices.Clone(r.Argv)
	r.EnvNames = slices.Clone(r.EnvNames)
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
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && w.metaGen == w.metaCommitted && !w.finishing {
			w.wake.Wait()
		}
		if len(w.queue) == 0 && w.metaGen == w.metaCommitted {
			w.mu.Unlock()
			return
		}
		batch := w.queue
		w.queue = spare
		meta, gen := w.meta.clone(), w.metaGen
		w.mu.Unlock()

		err := w.commitBatch(batch, &stored, meta)
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
	vals := make([][]byte, len(events))
	for i := range events {
		v, err := encodeEvent(&events[i])
		if err != nil {
			return m, w.s.wrap("write", w.name, err)
		}
		vals[i] = v
	}
	keys := make([]byte, 8*len(events))
	err := w.s.update("write", w.name, func(tx *bolt.Tx) error {
		b, err := recording(tx, w.name)
		if err != nil {
			return err
		}
		eb := b.Bucket(eventsBucket)
		if eb == nil {
			return errors.New("events bucket missing")
		}
		// Seqs mostly grow: fill pages rather than split them in halves.
		eb.FillPercent = 0.9
		c := counts{frames: m.Frames, exchanges: m.Exchanges}
		for i := range events {
			k := keys[8*i : 8*i+8 : 8*i+8]
			binary.BigEndian.PutUint64(k, events[i].Seq)
			if old := eb.Get(k); old != nil {
				kind, err := kindOf(old)
				if err != nil {
					return fmt.Errorf("event %d: %w", events[i].Seq, err)
				}
				c.add(kind, -1)
			}
			if err := eb.Put(k, vals[i]); err != nil {
				return fmt.Errorf("event %d: %w", events[i].Seq, err)
			}
			c.add(events[i].Kind, 1)
		}
		m.Frames, m.Exchanges = c.frames, c.exchanges
		v, err := encodeMeta(&m)
		if err != nil {
			return err
		}
		return b.Put(metaKey, v)
	})
	return m, err
}

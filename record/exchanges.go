package record

import (
	"sync"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/stamp"
	"github.com/acptap/acptap/stdiotap"
	"github.com/acptap/acptap/store"
)

// A sequencer numbers a recording's events in the order of their Stamps,
// stdio frames and LLM exchanges alike, whichever process saw them, so
// that the store's Seq order is the order in which they happened: a frame
// read before an exchange's request reached the tap comes before the
// exchange, and one read after it after it. Each event's Offset is its
// Stamp's time, so that times never go back along the Seqs either.
//
// Frames come from stdiotap in the order of their Stamps (frame), and
// each frame's Stamp counts the exchanges begun before it: the exchanges a
// frame passes get their Seqs before it, whether or not anything of them
// has arrived yet. An exchange's record (exchange) may arrive before any
// frame has passed it, since the tap records an exchange that ended
// within milliseconds at once while stdio is framed in batches: it waits
// in early until the frames stamped before it are numbered, which
// Session.Then says.
//
// A sequencer is the tap's Recorder too: an in-process tap stamps its
// exchanges with Begin, a tap process from the shared clock itself.
type sequencer struct {
	w     *store.Writer
	clock *stamp.Clock
	start time.Time // the recording's start, a reading of the stamp clock (stamp.FromNanos)
	// logf receives, without the program's name, why an exchange could
	// not be recorded.
	logf func(format string, args ...any)

	mu      sync.Mutex
	sess    *stdiotap.Session       // guarded by mu: nil until the agent runs
	placed  uint64                  // guarded by mu: the exchanges counted up to it have Seqs
	seqs    map[uint64]uint64       // guarded by mu: an exchange's count → its Seq, from its place until it ended
	early   map[uint64]*store.Event // guarded by mu: an exchange not yet placed → its latest record, Seq unset
	waiting []uint64                // guarded by mu: counts in early whose Then is to be asked once sess is set
}

func newSequencer(w *store.Writer, clock *stamp.Clock, start time.Time, logf func(string, ...any)) *sequencer {
	return &sequencer{
		w:     w,
		clock: clock,
		start: start,
		logf:  logf,
		// What counts the Stamps of the frames to come give: the clock's
		// count as of now.
		placed: clock.Frame().Exchanges(0),
		seqs:   map[uint64]uint64{},
		early:  map[uint64]*store.Event{},
	}
}

// offset is the time at (a stamp's, stamp.Stamp.Time) since the
// recording's start. A line's stamp was turned into its time once, as its
// chunk was framed (stdiotap.Line.At): it is not read again for each line.
func (q *sequencer) offset(at time.Time) time.Duration {
	return max(at.Sub(q.start), 0)
}

// frame numbers a framed stdio line, after the exchanges begun before it.
func (q *sequencer) frame(l stdiotap.Line) {
	e := frameEvent(l, q.offset(l.At))
	q.mu.Lock()
	q.passLocked(l.Stamp.Exchanges(q.placed))
	q.w.Append(e)
	q.mu.Unlock()
}

// passLocked gives Seqs to the exchanges counted up to n, in order, and
// stores those whose records have arrived.
func (q *sequencer) passLocked(n uint64) {
	for q.placed < n {
		q.placed++
		seq := q.w.Reserve()
		e := q.early[q.placed]
		if e == nil {
			q.seqs[q.placed] = seq
			continue
		}
		delete(q.early, q.placed)
		if e.Flags&store.FlagIncomplete != 0 {
			q.seqs[q.placed] = seq
		}
		e.Seq = seq
		q.w.Append(*e)
	}
}

// reach places the exchanges counted up to n once the frames stamped
// before them are numbered.
func (q *sequencer) reach(n uint64) {
	q.mu.Lock()
	q.passLocked(n)
	q.mu.Unlock()
}

// attach tells the sequencer the session whose frames it numbers, once
// the agent runs.
func (q *sequencer) attach(sess *stdiotap.Session) {
	q.mu.Lock()
	q.sess = sess
	waiting := q.waiting
	q.waiting = nil
	q.mu.Unlock()
	for _, n := range waiting {
		sess.Then(func() { q.reach(n) })
	}
}

// flush places every exchange still waiting for its place: the session
// has ended, or never started, and no frame will pass them.
func (q *sequencer) flush() {
	q.mu.Lock()
	defer q.mu.Unlock()
	var last uint64
	for n := range q.early {
		last = max(last, n)
	}
	q.passLocked(last)
}

// Begin stamps an exchange of an in-process tap as its request arrives:
// its Stamp is its id.
func (q *sequencer) Begin() (uint64, time.Time) {
	st := q.clock.Exchange()
	return uint64(st), st.Time()
}

// Started records the exchange in flight, in its place.
func (q *sequencer) Started(id uint64, _ time.Duration, x *exchange.Exchange) {
	q.exchange(stamp.Stamp(id), x, store.FlagIncomplete)
}

// Ended records the exchange as it ended, in place of what Started
// recorded.
func (q *sequencer) Ended(id uint64, _ time.Duration, x *exchange.Exchange) {
	q.exchange(stamp.Stamp(id), x, 0)
}

// exchange records the exchange stamped st: under its Seq if it has
// one, else once the frames before it are numbered. Each is an event of
// kind KindExchange on LaneLLM holding the encoded exchange, written with
// FlagIncomplete when the tap has its request and again under the same
// Seq when it has ended. A recording that stops in between keeps the
// request, in flight; the store keeps one event where both writes land
// in one commit.
func (q *sequencer) exchange(st stamp.Stamp, x *exchange.Exchange, flags store.Flag) {
	data, err := exchange.Marshal(x)
	if err != nil {
		q.logf("not recording an exchange: %v", err)
		return
	}
	q.place(st, store.Event{Kind: store.KindExchange, Lane: store.LaneLLM, Flags: flags, Data: data})
}

// event records an event that another process stamped st from the shared
// clock as an exchange is (an MCP relay's line): in its place among the
// frames, as the exchanges are placed.
func (q *sequencer) event(st stamp.Stamp, e store.Event) { q.place(st, e) }

// place records e, stamped st (an exchange's stamp: it counts it), under
// its Seq if it has one, else once the frames before it are numbered. An
// event without FlagIncomplete is the last under its Seq.
func (q *sequencer) place(st stamp.Stamp, e store.Event) {
	e.Offset = q.offset(st.Time())
	flags := e.Flags
	q.mu.Lock()
	n := st.Exchanges(q.placed)
	if n <= q.placed {
		seq, ok := q.seqs[n]
		if ok {
			e.Seq = seq
			q.w.Append(e)
			if flags&store.FlagIncomplete == 0 {
				delete(q.seqs, n)
			}
		}
		q.mu.Unlock()
		if !ok {
			q.logf("not recording an exchange: recorded as ended already")
		}
		return
	}
	_, asked := q.early[n]
	q.early[n] = &e
	sess := q.sess
	if !asked && sess == nil {
		q.waiting = append(q.waiting, n)
	}
	q.mu.Unlock()
	if !asked && sess != nil {
		// Outside mu: Then calls reach at once once framing is over.
		sess.Then(func() { q.reach(n) })
	}
}

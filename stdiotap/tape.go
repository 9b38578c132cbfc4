package stdiotap

import (
	"sync"
	"syscall"
	"time"

	"github.com/acptap/acptap/internal/stamp"
)

// DefaultMaxBacklog is the Config.MaxBacklog used when it is zero.
const DefaultMaxBacklog = 256 << 20

// MinBacklog is the smallest Config.MaxBacklog (a smaller one is raised
// to it): room for one block per pump and one for the recorder to free
// while a pump waits.
const MinBacklog = 4 * bufSize

// Sizes of the tape's blocks: big enough that a pump takes a new one
// rarely, small enough that a bound of a few of them still leaves room.
const (
	maxBlockSize = 1 << 20
	minBlockSize = bufSize // one full read
)

// A Backlog tells Config.OnBacklog that framing fell behind forwarding, or
// that it caught up again.
type Backlog struct {
	// Behind is true when framing has fallen behind, false when it has
	// caught up.
	Behind bool

	// Bytes is, when Behind, how many bytes were read and forwarded but
	// not yet framed; when caught up, the most there were at once since
	// framing fell behind.
	Bytes int

	// Max is the bound on Bytes at which forwarding waits
	// (Config.MaxBacklog).
	Max int

	// Waited is, when caught up, how long forwarding waited in all for
	// the bound while framing was behind.
	Waited time.Duration
}

// A tape holds the chunks the pumps read, in the one order they were read
// in across the three streams, until the recorder goroutine frames them.
// Sequencing a chunk at read time, before it is forwarded, keeps the
// order of Lines causal (a response is never framed before the request
// that caused it) while framing runs off the forwarding goroutines.
//
// The chunks' bytes stay where they were read: each pump reads into a
// block of its own, taken from the tape, and the tape hands the bytes to
// the recorder as they are, so that sequencing a chunk copies nothing.
// Blocks live outside the Go heap, so that a full backlog does not double
// as the garbage collector's heap target; a block goes back to the tape
// once its pump has moved on to another and every chunk in it is framed.
type tape struct {
	frame   [3]*framer // by Stream; only the recorder goroutine uses them
	clock   *stamp.Clock
	notify  func(Backlog)
	size    int // of a block
	blocks  int // most blocks in use at once
	behind  int // backlog from which framing is said to fall behind
	kick    chan struct{}
	stopped chan struct{} // closed when the recorder goroutine returns

	mu         sync.Mutex
	space      sync.Cond   // on mu; broadcast when a block is freed or the tape closes
	queue      []chunk     // read and not yet taken by the recorder
	spareQ     []chunk     // the recorder's last batch, for reuse
	inUse      int         // blocks not free
	spares     [][]byte    // free blocks kept for reuse
	held       int         // bytes of chunks not yet framed
	closed     bool        // Wait is done with the streams: no more blocks
	finished   bool        // the recorder goroutine has framed everything and returned
	waiting    int         // pumps waiting for a block
	wakeAt     int         // held from which put wants the recorder woken at once
	timer      *time.Timer // wakes the recorder lazily; see lazyDelay
	timerArmed bool        // timer is set and has not fired
	waitSince  time.Time   // since when a pump waits, if waiting > 0

	// The notice state, on mu.
	lagging bool          // Behind was reported, not yet caught up
	peak    int           // the most held since lagging
	waited  time.Duration // forwarding's wait for blocks since the last catching up
	notices []Backlog     // to deliver, in order

	delivering sync.Mutex     // held by the one goroutine calling notify
	delivered  sync.WaitGroup // the goroutines delivering notices
}

// A block is a pump's read buffer on the tape.
type block struct {
	buf     []byte
	tail    int  // bytes of buf read into
	pending int  // chunks in buf not yet framed; on tape.mu
	owned   bool // a pump still reads into it; on tape.mu
}

// A chunk is one read of a stream, or its end, or a call of then.
type chunk struct {
	stream Stream
	stamp  stamp.Stamp // taken as the read returned; 0 for a then
	data   []byte      // in blk
	blk    *block      // nil for the end of the stream
	then   func()      // set for a then: call it, nothing else
}

// newTape returns a tape that frames into frames, and starts its
// recorder goroutine.
func newTape(frames [3]*framer, clock *stamp.Clock, bound int, notify func(Backlog), atOnce bool) *tape {
	if bound <= 0 {
		bound = DefaultMaxBacklog
	}
	bound = max(bound, MinBacklog)
	size := min(max(bound/8/minBlockSize*minBlockSize, minBlockSize), maxBlockSize)
	t := &tape{
		frame:   frames,
		clock:   clock,
		notify:  notify,
		size:    size,
		blocks:  max(bound/size, 4),
		behind:  bound / 4,
		kick:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
	}
	t.space.L = &t.mu
	t.wakeAt = min(wakeBytes, t.limit()/4)
	if atOnce {
		t.wakeAt = 0 // every chunk is urgent
	}
	t.timer = time.AfterFunc(time.Hour, t.tick)
	t.timer.Stop()
	go t.run()
	return t
}

// limit is the backlog at which forwarding waits, as Backlog.Max says it.
func (t *tape) limit() int { return t.blocks * t.size }

// room returns a block with room for a full read: b if it has, else a new
// one, waiting while the tape's blocks are all in use. It returns nil once
// the tape is closed.
func (t *tape) room(b *block) *block {
	if b != nil && len(b.buf)-b.tail >= bufSize {
		return b
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if b != nil {
		t.disownLocked(b)
	}
	if t.inUse >= t.blocks && !t.closed {
		if t.waiting == 0 {
			t.waitSince = time.Now()
		}
		t.waiting++
		for t.inUse >= t.blocks && !t.closed {
			t.space.Wait()
		}
		t.waiting--
	}
	if t.closed {
		return nil
	}
	var buf []byte
	if n := len(t.spares); n > 0 {
		buf, t.spares[n-1] = t.spares[n-1], nil
		t.spares = t.spares[:n-1]
	} else {
		var err error
		buf, err = syscall.Mmap(-1, 0, t.size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			// Out of address space or mappings: the heap will do.
			buf = make([]byte, t.size)
		}
	}
	t.inUse++
	return &block{buf: buf, owned: true}
}

// disown gives b back to the tape once its chunks are framed: its pump
// reads into it no more.
func (t *tape) disown(b *block) {
	t.mu.Lock()
	t.disownLocked(b)
	t.mu.Unlock()
}

func (t *tape) disownLocked(b *block) {
	b.owned = false
	if b.pending == 0 {
		t.freeLocked(b)
	}
}

// freeLocked returns b's memory: kept for reuse while the tape runs and
// few are kept, else unmapped.
func (t *tape) freeLocked(b *block) {
	t.inUse--
	if t.waiting > 0 {
		// The wait ends now for one pump; a next one may go on.
		now := time.Now()
		t.waited += now.Sub(t.waitSince)
		t.waitSince = now
	}
	if !t.closed && (t.lagging || len(t.spares) < maxSpares) {
		t.spares = append(t.spares, b.buf)
	} else {
		release(b.buf)
	}
	b.buf = nil
	t.space.Broadcast()
}

// maxSpares is how many free blocks the tape keeps when framing keeps up:
// enough to run at full speed without mapping and faulting in fresh
// memory for every block, few enough not to pin a past burst's memory.
// While framing is behind, it keeps every block it frees, since mapping a
// fresh one costs a page fault per page, and a block freed is needed
// again at once; it lets go of them when framing has caught up.
const maxSpares = 16

// trimLocked unmaps the spare blocks beyond maxSpares.
func (t *tape) trimLocked() {
	for len(t.spares) > maxSpares {
		n := len(t.spares) - 1
		release(t.spares[n])
		t.spares[n] = nil
		t.spares = t.spares[:n]
	}
}

// release unmaps a block. Munmap refuses a block from the heap (see
// room), which is the collector's.
func release(buf []byte) {
	syscall.Munmap(buf)
}

// When the recorder goroutine is woken. A chunk forwarded while it is
// idle is framed lazyDelay later, with whatever follows it by then: woken
// for every message of an exchange of short ones, it would take a CPU
// from the forwarding of the next, and make the store commit each alone.
// lazyDelay is the store Writer's commit interval under load (5 ms):
// framing more often would only wake the recorder, and with it the
// Writer, more often than the Writer commits. Once wakeBytes wait, it is
// woken at once.
const (
	lazyDelay = 5 * time.Millisecond
	wakeBytes = 512 << 10
)

// A waking is what the caller of put must do once it has forwarded the
// chunk, so that the recorder goroutine frames it.
type waking uint8

const (
	wakeNone  waking = iota // the recorder is woken already, or its timer armed
	wakeNow                 // wake it (tape.wake)
	wakeLater               // arm its timer (tape.arm)
)

// put sequences the n bytes read into b at its tail as the next chunk of
// stream, and returns them, and what the caller must do once it has
// forwarded them. Both waking the recorder and arming its timer are left
// to after forwarding: either may cost the forwarding thread the wake-up
// of another (a timer earlier than the poller's sleep interrupts it).
func (t *tape) put(stream Stream, b *block, n int) (data []byte, w waking) {
	data = b.buf[b.tail : b.tail+n : b.tail+n]
	b.tail += n
	t.mu.Lock()
	b.pending++
	t.held += n
	// The chunk's Stamp is taken under mu, so that the queue is in the
	// order of the Stamps: whoever appends to it after taking a Stamp of
	// its own (then) finds every chunk stamped before it there.
	t.queue = append(t.queue, chunk{stream: stream, stamp: t.clock.Frame(), data: data, blk: b})
	switch {
	case t.held >= t.wakeAt:
		w = wakeNow
	case !t.timerArmed:
		t.timerArmed = true
		w = wakeLater
	}
	if !t.lagging && t.held >= t.behind {
		t.lagging, t.peak = true, t.held
		t.noticeLocked(Backlog{Behind: true, Bytes: t.held, Max: t.limit()})
	}
	t.peak = max(t.peak, t.held)
	t.mu.Unlock()
	return data, w
}

// arm sets the timer that wakes the recorder lazyDelay from now, as put
// said to. A timer armed after close fires once, to no effect.
func (t *tape) arm() {
	t.timer.Reset(lazyDelay)
}

// noticeLocked queues b for OnBacklog. Notices are delivered by a
// goroutine of their own, in order: OnBacklog may write to a stderr that
// nobody reads, and must stop neither forwarding nor framing.
func (t *tape) noticeLocked(b Backlog) {
	if t.notify == nil {
		return
	}
	t.notices = append(t.notices, b)
	t.delivered.Add(1)
	go func() {
		defer t.delivered.Done()
		t.delivering.Lock()
		defer t.delivering.Unlock()
		t.mu.Lock()
		notices := t.notices
		t.notices = nil
		t.mu.Unlock()
		for _, b := range notices {
			t.notify(b)
		}
	}()
}

// tick wakes the recorder goroutine lazyDelay after put armed the timer.
func (t *tape) tick() {
	t.mu.Lock()
	t.timerArmed = false
	t.mu.Unlock()
	t.wake()
}

// end sequences the end of stream: its pending bytes are framed with
// NoNewline.
func (t *tape) end(stream Stream) {
	t.mu.Lock()
	t.queue = append(t.queue, chunk{stream: stream, stamp: t.clock.Frame()})
	t.mu.Unlock()
	t.wake()
}

// then has the recorder goroutine call fn once it has framed every chunk
// sequenced so far, in order with the Lines it hands out; once the tape
// has framed its last chunk, then calls fn itself, at once.
func (t *tape) then(fn func()) {
	t.mu.Lock()
	if t.finished {
		t.mu.Unlock()
		fn()
		return
	}
	t.queue = append(t.queue, chunk{then: fn})
	// Woken as for a chunk (see put): fn is as urgent as the chunks
	// before it.
	w := wakeNone
	switch {
	case t.wakeAt == 0:
		w = wakeNow
	case !t.timerArmed:
		t.timerArmed = true
		w = wakeLater
	}
	t.mu.Unlock()
	switch w {
	case wakeNow:
		t.wake()
	case wakeLater:
		t.arm()
	}
}

// wake tells the recorder goroutine there is something on the tape.
func (t *tape) wake() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// close frames everything sequenced so far, stops the recorder goroutine
// and returns the spare blocks. No OnLine happens after it returns.
func (t *tape) close() {
	t.mu.Lock()
	t.closed = true
	t.space.Broadcast()
	t.mu.Unlock()
	t.wake()
	<-t.stopped
	t.delivered.Wait()
	t.timer.Stop()
	t.mu.Lock()
	for _, buf := range t.spares {
		release(buf)
	}
	t.spares = nil
	t.mu.Unlock()
}

// run frames the chunks in the order they were put until the tape is
// closed and empty.
func (t *tape) run() {
	defer close(t.stopped)
	for {
		t.mu.Lock()
		for len(t.queue) == 0 && !t.closed {
			t.mu.Unlock()
			<-t.kick
			t.mu.Lock()
		}
		if len(t.queue) == 0 {
			t.finished = true
			t.mu.Unlock()
			return
		}
		batch := t.queue
		t.queue = t.spareQ[:0]
		t.spareQ = nil
		t.mu.Unlock()
		for i := range batch {
			c := &batch[i]
			if c.then != nil {
				c.then()
				continue
			}
			fr := t.frame[c.stream]
			if c.blk == nil {
				fr.flush(c.stamp)
				continue
			}
			fr.write(c.data, c.stamp)
			t.framed(c)
		}
		clear(batch)
		t.mu.Lock()
		if t.spareQ == nil && cap(batch) <= maxSpareChunks {
			t.spareQ = batch[:0]
		}
		t.mu.Unlock()
	}
}

// maxSpareChunks bounds the chunk array the recorder keeps for reuse.
const maxSpareChunks = 4096

// framed gives c's bytes back to the tape and tells OnBacklog when
// framing has caught up (put tells when it falls behind).
func (t *tape) framed(c *chunk) {
	t.mu.Lock()
	b := c.blk
	b.pending--
	if b.pending == 0 && !b.owned {
		t.freeLocked(b)
	}
	t.held -= len(c.data)
	if t.lagging && t.held == 0 {
		t.lagging = false
		t.noticeLocked(Backlog{Bytes: t.peak, Max: t.limit(), Waited: t.waited})
		t.waited = 0
		t.trimLocked()
	}
	t.mu.Unlock()
}

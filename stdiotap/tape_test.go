package stdiotap

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/stamp"
)

// gatedLog is an OnLine that blocks until its gate opens, logging every
// Line in the one order OnLine saw them, and the Backlog notices.
type gatedLog struct {
	gate     chan struct{} // closed to let OnLine return
	inFlight atomic.Int32

	mu       sync.Mutex
	order    []Line // every Line, in call order
	notices  []Backlog
	parallel bool // two OnLine calls overlapped
}

func newGatedLog() *gatedLog { return &gatedLog{gate: make(chan struct{})} }

func (g *gatedLog) onLine(l Line) {
	if g.inFlight.Add(1) != 1 {
		g.mu.Lock()
		g.parallel = true
		g.mu.Unlock()
	}
	<-g.gate
	g.mu.Lock()
	g.order = append(g.order, l)
	g.mu.Unlock()
	g.inFlight.Add(-1)
}

func (g *gatedLog) onBacklog(b Backlog) {
	g.mu.Lock()
	g.notices = append(g.notices, b)
	g.mu.Unlock()
}

// stream returns the Lines of st, in order.
func (g *gatedLog) stream(st Stream) []Line {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Line
	for _, l := range g.order {
		if l.Stream == st {
			out = append(out, l)
		}
	}
	return out
}

// checkReleased checks that once the session is over and its pumps
// have returned (the stdin pump's once the editor's EOF reaches it),
// every block of the tape is unmapped.
func checkReleased(t *testing.T, tp *tape) {
	t.Helper()
	giveUp := time.Now().Add(time.Minute)
	for {
		tp.mu.Lock()
		inUse, spares := tp.inUse, len(tp.spares)
		tp.mu.Unlock()
		if inUse == 0 && spares == 0 {
			return
		}
		if time.Now().After(giveUp) {
			t.Fatalf("a minute after Wait: %d blocks in use, %d spare; want none", inUse, spares)
		}
		time.Sleep(time.Millisecond)
	}
}

// startGated starts a session of the helper mode args with a MaxBacklog
// of bound, a gatedLog and the agent's stdout written into a pipe, whose
// ends it returns.
func startGated(t *testing.T, bound int, args ...string) (*run, *gatedLog, *os.File, *os.File) {
	t.Helper()
	g := newGatedLog()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outR.Close(); outW.Close() })
	r := start(t, Config{Stdout: outW, OnLine: g.onLine, OnBacklog: g.onBacklog, MaxBacklog: bound}, args...)
	return r, g, outR, outW
}

// countingReader reads r to EOF in the background, keeping what it reads
// and counting it as it goes.
type countingReader struct {
	n    atomic.Int64
	buf  []byte
	done chan struct{}
}

func readCounting(r io.Reader) *countingReader {
	c := &countingReader{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		p := make([]byte, 32<<10)
		for {
			n, err := r.Read(p)
			c.buf = append(c.buf, p[:n]...)
			c.n.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	return c
}

// TestSlowRecorderForwards checks that forwarding does not wait for a
// recorder that is stuck: the editor gets the agent's whole echo while
// OnLine has not returned once. Once OnLine proceeds, every Line is
// there, exact, one OnLine call at a time, and in causal order across
// streams: each echoed line after the editor's line it echoes.
func TestSlowRecorderForwards(t *testing.T) {
	seed := newSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	payload := acpPayload(rng, 3<<20)
	const bound = 16 << 20 // over twice the 6 MiB (both ways) held
	r, g, outR, _ := startGated(t, bound, "echo", strconv.FormatUint(seed, 10))
	writeErr := make(chan error, 1)
	go func() { writeErr <- writeChunked(r.stdin, payload, rng) }()
	echo := make([]byte, len(payload))
	if _, err := io.ReadFull(outR, echo); err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	checkBytes(t, "echo with the recorder stuck", echo, payload)
	if err := <-writeErr; err != nil {
		t.Fatalf("editor write: %v", err)
	}
	if got := g.inFlight.Load(); got != 1 {
		t.Fatalf("OnLine calls in flight with the gate shut: got %d, want 1", got)
	}
	r.stdin.Close()
	close(g.gate)
	if exit := r.wait(t); exit != (Exit{}) {
		t.Errorf("exit: got %v, want %v", exit, Exit{})
	}
	if g.parallel {
		t.Errorf("two OnLine calls overlapped")
	}
	checkReleased(t, r.tape)
	in, out := g.stream(Stdin), g.stream(Stdout)
	checkFrames(t, "stdin", in, refFrames(Stdin, payload, defaultMaxLine))
	checkFrames(t, "stdout", out, refFrames(Stdout, payload, defaultMaxLine))
	checkTimes(t, "stdin", r.Started(), in)
	checkTimes(t, "stdout", r.Started(), out)

	// Causality: the agent can echo a line only once it was forwarded to
	// it, so the editor's line i comes before the agent's line i.
	pos := map[Stream]int{}
	for i, l := range g.order {
		if l.Stream == Stdout && pos[Stdout] >= pos[Stdin] {
			t.Fatalf("OnLine call %d: stdout line %d before stdin line %d", i, pos[Stdout], pos[Stdout])
		}
		pos[l.Stream]++
	}

	// Over 6 MiB waited for OnLine: more than a quarter of the bound,
	// less than all of it.
	waited := checkNotices(t, g.notices, bound, 2*len(payload))
	if len(g.notices) != 2 || waited != 0 {
		t.Errorf("backlog notices: got %+v, want one behind and one caught up, no wait", g.notices)
	}
}

// checkNotices checks that notices alternate between falling behind, by
// at least a quarter of bound, and catching up, starting with the first
// and ending with the second, each backlog within most, and returns the
// time forwarding waited in all.
func checkNotices(t *testing.T, notices []Backlog, bound, most int) time.Duration {
	t.Helper()
	if len(notices) == 0 || len(notices)%2 != 0 {
		t.Fatalf("backlog notices: got %+v, want pairs of behind and caught up", notices)
	}
	var waited time.Duration
	for i := 0; i < len(notices); i += 2 {
		behind, caught := notices[i], notices[i+1]
		if !behind.Behind || behind.Bytes < bound/4 || behind.Bytes > most || behind.Max != bound || behind.Waited != 0 {
			t.Errorf("notice %d: got %+v, want Behind by %d to %d bytes of %d", i, behind, bound/4, most, bound)
		}
		if caught.Behind || caught.Bytes < behind.Bytes || caught.Bytes > most || caught.Max != bound {
			t.Errorf("notice %d: got %+v, want caught up, a peak of %d to %d bytes", i+1, caught, behind.Bytes, most)
		}
		waited += caught.Waited
	}
	return waited
}

// TestBacklogBound checks that forwarding waits once the backlog is full:
// with OnLine stuck, the agent's 4 MiB do not reach the editor beyond the
// bound of 256 KiB; once OnLine proceeds, all of it does, and every Line
// is framed.
func TestBacklogBound(t *testing.T) {
	seed := newSeed(t)
	payload := acpPayload(rand.New(rand.NewPCG(seed, 0)), 4<<20)
	file := filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(file, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	const bound = 256 << 10
	r, g, outR, outW := startGated(t, bound, "cat", file, strconv.FormatUint(seed, 10), "stdout")
	editor := readCounting(outR)

	// Until the stdout pump waits for room, or the editor has it all.
	giveUp := time.Now().Add(time.Minute)
	for {
		r.tape.mu.Lock()
		waiting := r.tape.waiting
		r.tape.mu.Unlock()
		if waiting > 0 {
			break
		}
		if editor.n.Load() == int64(len(payload)) {
			t.Fatalf("the editor got all %d bytes with OnLine stuck: the bound of %d did not hold", len(payload), bound)
		}
		if time.Now().After(giveUp) {
			t.Fatalf("no pump waits for room after a minute; the editor got %d bytes", editor.n.Load())
		}
		time.Sleep(time.Millisecond)
	}
	// What was forwarded is on the tape, unframed: within the bound.
	if got := editor.n.Load(); got > bound {
		t.Fatalf("forwarded with OnLine stuck: got %d bytes, want at most the bound %d", got, bound)
	}
	close(g.gate)
	if exit := r.wait(t); exit != (Exit{}) {
		t.Errorf("exit: got %v, want %v", exit, Exit{})
	}
	outW.Close()
	<-editor.done
	checkBytes(t, "forwarded", editor.buf, payload)
	r.stdin.Close()
	checkReleased(t, r.tape)
	checkFrames(t, "stdout", g.stream(Stdout), refFrames(Stdout, payload, defaultMaxLine))
	if waited := checkNotices(t, g.notices, bound, bound); waited <= 0 {
		t.Errorf("backlog notices: got %+v, want forwarding to have waited", g.notices)
	}
}

// TestFrameAtOnce: with FrameAtOnce every chunk wakes the recorder as it
// is put, for a caller that answers lines; by default a short one waits
// for the lazy timer, with what follows it.
func TestFrameAtOnce(t *testing.T) {
	for _, atOnce := range []bool{false, true} {
		var lines []string
		fr := &framer{stream: Stdout, max: defaultMaxLine, emit: func(l Line) { lines = append(lines, string(l.Data)) }}
		tp := newTape([3]*framer{fr, fr, fr}, stamp.NewClock(), 0, nil, atOnce)
		blk := tp.room(nil)
		n := copy(blk.buf[blk.tail:], "ping\n")
		want := wakeLater
		if atOnce {
			want = wakeNow
		}
		if _, w := tp.put(Stdout, blk, n); w != want {
			t.Errorf("FrameAtOnce %v: a 5-byte chunk's waking = %d, want %d", atOnce, w, want)
		}
		tp.wake()
		tp.disown(blk)
		tp.close()
		if len(lines) != 1 || lines[0] != "ping" {
			t.Errorf("FrameAtOnce %v: framed %q, want [ping]", atOnce, lines)
		}
	}
}

// TestLazyWake: a short chunk put while the recorder's timer is not armed
// asks its caller to arm it, once forwarded; one put while it is armed
// asks nothing; the timer alone gets both framed.
func TestLazyWake(t *testing.T) {
	framed := make(chan string, 2)
	fr := &framer{stream: Stdout, max: defaultMaxLine, emit: func(l Line) { framed <- string(l.Data) }}
	tp := newTape([3]*framer{fr, fr, fr}, stamp.NewClock(), 0, nil, false)
	defer tp.close()
	blk := tp.room(nil)
	defer tp.disown(blk)
	for i, want := range []waking{wakeLater, wakeNone} {
		n := copy(blk.buf[blk.tail:], fmt.Sprintf("line %d\n", i))
		if _, w := tp.put(Stdout, blk, n); w != want {
			t.Errorf("chunk %d: waking = %d, want %d", i, w, want)
		}
	}
	tp.arm()
	for i := range 2 {
		select {
		case got := <-framed:
			if want := fmt.Sprintf("line %d", i); got != want {
				t.Errorf("framed %q, want %q", got, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("line %d not framed a minute after the timer was armed", i)
		}
	}
}

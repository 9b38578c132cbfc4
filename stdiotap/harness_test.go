package stdiotap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// lineLog records the Lines of a Session, per stream.
type lineLog struct {
	mu      sync.Mutex
	lines   [3][]Line
	changed chan struct{} // closed and replaced on every append
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

func (g *lineLog) onLine(l Line) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lines[l.Stream] = append(g.lines[l.Stream], l)
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *lineLog) get(st Stream) []Line {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Line(nil), g.lines[st]...)
}

// waitFor blocks until stream st has framed a line equal to want.
func (g *lineLog) waitFor(t *testing.T, st Stream, want string) {
	t.Helper()
	giveUp := time.After(time.Minute)
	for {
		g.mu.Lock()
		for _, l := range g.lines[st] {
			if string(l.Data) == want {
				g.mu.Unlock()
				return
			}
		}
		changed := g.changed
		g.mu.Unlock()
		select {
		case <-changed:
		case <-giveUp:
			t.Fatalf("%v never framed %q", st, want)
		}
	}
}

// collector gathers what a Session writes to the editor through a pipe.
type collector struct {
	w    *os.File
	done chan struct{}
	buf  []byte
}

func newCollector(t *testing.T) *collector {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{w: w, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.buf, _ = io.ReadAll(r)
		r.Close()
	}()
	t.Cleanup(func() { w.Close() })
	return c
}

// bytes closes the pipe and returns all that was written into it. Call it
// after Session.Wait.
func (c *collector) bytes() []byte {
	c.w.Close()
	<-c.done
	return c.buf
}

// run is a Session with the editor's ends of its stdio.
type run struct {
	*Session
	stdin          *os.File // the editor writes the agent's input here
	stdout, stderr *collector
	log            *lineLog
}

// start runs the test binary as an agent in helper mode args, with cfg's
// Argv, Env, Stdin, Stdout, Stderr and OnLine filled in where empty.
func start(t *testing.T, cfg Config, args ...string) *run {
	t.Helper()
	r := &run{log: newLineLog()}
	cfg.Argv = helperArgv(t, args...)
	if cfg.Env == nil {
		cfg.Env = helperEnviron()
	}
	if cfg.Stdin == nil {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pw.Close(); pr.Close() })
		cfg.Stdin, r.stdin = pr, pw
	}
	if cfg.Stdout == nil {
		r.stdout = newCollector(t)
		cfg.Stdout = r.stdout.w
	}
	if cfg.Stderr == nil {
		r.stderr = newCollector(t)
		cfg.Stderr = r.stderr.w
	}
	if cfg.OnLine == nil {
		cfg.OnLine = r.log.onLine
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("Signal: %v", err)
			syscall.Kill(s.Pid(), syscall.SIGKILL)
		}
		s.Wait()
	})
	r.Session = s
	return r
}

// wait waits for the session. An agent still running after a minute is
// killed and fails the test, rather than hanging it.
func (r *run) wait(t *testing.T) Exit {
	t.Helper()
	var hung atomic.Bool
	watchdog := time.AfterFunc(time.Minute, func() {
		hung.Store(true)
		r.Signal(syscall.SIGKILL)
	})
	exit, err := r.Wait()
	watchdog.Stop()
	if hung.Load() {
		t.Fatalf("agent still running after a minute; killed it")
	}
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return exit
}

// refFrames frames data as a Session must, for a MaxLine of max: every
// '\n'-terminated line, then any unterminated rest, each cut into pieces
// of max bytes from the front.
func refFrames(st Stream, data []byte, max int) []Line {
	var out []Line
	for len(data) > 0 {
		line, rest, found := bytes.Cut(data, []byte("\n"))
		data = rest
		for len(line) > max {
			out = append(out, Line{Stream: st, Data: line[:max], Continued: true})
			line = line[max:]
		}
		out = append(out, Line{Stream: st, Data: line, NoNewline: !found})
	}
	return out
}

// reassemble joins the Data of lines, with a '\n' after each line that
// is neither Continued nor NoNewline.
func reassemble(lines []Line) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l.Data)
		if !l.Continued && !l.NoNewline {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

func describe(l Line) string {
	d := l.Data
	ell := ""
	if len(d) > 40 {
		d, ell = d[:40], "…"
	}
	return fmt.Sprintf("{%v len %d %q%s NoNewline=%v Continued=%v}", l.Stream, len(l.Data), d, ell, l.NoNewline, l.Continued)
}

// checkFrames compares the Lines a Session framed with the expected ones,
// ignoring At.
func checkFrames(t *testing.T, what string, got, want []Line) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if g.Stream != w.Stream || !bytes.Equal(g.Data, w.Data) || g.NoNewline != w.NoNewline || g.Continued != w.Continued {
			t.Fatalf("%s: frame %d of %d: got %s, want %s", what, i, len(want), describe(g), describe(w))
		}
		if g.Data == nil {
			t.Fatalf("%s: frame %d has nil Data, want non-nil", what, i)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: got %d frames, want %d", what, len(got), len(want))
	}
}

// checkTimes checks that the Lines of one stream were read in order, after
// the session started.
func checkTimes(t *testing.T, what string, started time.Time, lines []Line) {
	t.Helper()
	prev := started
	for i, l := range lines {
		if l.At.Before(prev) {
			t.Fatalf("%s: frame %d read at %v, before %v", what, i, l.At.Sub(started), prev.Sub(started))
		}
		prev = l.At
	}
}

// checkBytes compares two byte streams and reports the first difference.
func checkBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < min(len(got), len(want)) && got[i] == want[i] {
		i++
	}
	t.Fatalf("%s: got %d bytes, want %d; first difference at offset %d: got %q, want %q",
		what, len(got), len(want), i, got[i:min(i+20, len(got))], want[i:min(i+20, len(want))])
}

// newSeed returns a random seed and logs it, so a failure can be replayed.
func newSeed(t *testing.T) uint64 {
	seed := rand.Uint64() >> 1
	t.Logf("seed %d", seed)
	return seed
}

// acpPayload returns what an editor and an agent might exchange: ACP
// JSON-RPC lines around blank lines, junk, invalid UTF-8, a line of
// bigLine bytes, and a last line without a newline.
func acpPayload(rng *rand.Rand, bigLine int) []byte {
	var b bytes.Buffer
	words := []string{"the", "agent", "reads", "café", "naïve", "日本語", "\\n", "\"quoted\"", "🙂"}
	text := func(n int) string {
		var s bytes.Buffer
		for range n {
			s.WriteString(words[rng.IntN(len(words))])
			s.WriteByte(' ')
		}
		return s.String()
	}
	msg := func(id int) {
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_%d","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}}`+"\n",
			id, text(rng.IntN(40)))
	}
	fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	for i := range 100 {
		msg(i)
	}
	b.WriteString("\n\n")
	b.WriteString("[agent] warning: config not found, using defaults\n")
	b.Write([]byte{0xff, 0xfe, 'b', 'a', 'd', 0xc3, 0x28, '\n'})
	b.WriteString("crlf line\r\n")
	b.WriteString("\n")
	big := make([]byte, bigLine)
	for i := range big {
		big[i] = "abcdefghijklmnopqrstuvwxyz{}\":,0123456789 "[rng.IntN(42)]
	}
	b.Write(big)
	b.WriteByte('\n')
	for i := range 100 {
		msg(100 + i)
	}
	b.WriteString(`{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}`)
	return b.Bytes()
}

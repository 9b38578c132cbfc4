package replay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/replay/driver"
	"github.com/acptap/acptap/stdiotap"
	"github.com/acptap/acptap/store"
)

// agentConfig says how to run the agent of a replay.
type agentConfig struct {
	// rewrite, if not nil, rewrites each editor frame on its way to the
	// agent (the MCP servers' stand-ins): driver.Options.Rewrite.
	rewrite func([]byte) []byte
	argv    []string
	dir     string // its working directory, the sandbox's workspace
	env     []string
	// stderr receives the agent's stderr, and a line if waiting for its
	// exit fails. If nil, both are discarded.
	stderr io.Writer
	grace  time.Duration // see Options.Grace
	// maxLine is stdiotap's Config.MaxLine, 0 for its default: longer
	// lines reach the replay in pieces, joined as the store joins them.
	maxLine int

	// The driver's options: the recorded frames to play, how long to
	// wait for the agent, the recorded paths and the sandbox's.
	frames  lane.Lines
	timeout time.Duration
	pathMap map[string]string
	// faults break editor frames on their way to the agent:
	// driver.Options.Faults.
	frameName func(int) string // driver.Options.FrameName
	faults    map[int]driver.Fault
	// mcpMatching are the recorded directories and the sandbox's, for the
	// MCP servers the recorded editor hosted over ACP.
	mcpMatching driver.MCPMatching
	// keep keeps the agent's lines in memory (agentRun.kept) and the
	// driver's timeline.
	keep bool
	// mask, if not nil, masks each line of the agent's, on stdout and
	// stderr, before anything looks at it (see llmSide.mask).
	mask func([]byte) []byte
}

// agentRun is what happened when the agent ran.
type agentRun struct {
	// live is every line the agent wrote on stdout and every frame the
	// driver wrote to the agent, in order (a frame of the driver's before
	// anything the agent wrote after reading it), each whole, spooled;
	// compared are those of them that take part in the comparison (see
	// compared), by index. The caller closes live.
	live     *frameSpool
	compared []int
	// kept are the lines of live in memory, with agentConfig.keep.
	kept [][]byte
	// drive is the driver's result; driveErr is why the editor side could
	// not follow the recording (see driver.Driver.Run), nil if it could.
	drive    driver.Result
	driveErr error
	exit     stdiotap.Exit
}

// runAgent starts the agent, plays the recorded editor side on its stdin
// with a driver.Driver, closes its stdin once the driver is done and
// returns when the agent has exited (stdiotap stops it after the grace).
// It fails, wrapping ErrStart, if the agent cannot be started, or with
// ErrSpool if its output cannot be spooled: how the agent behaved is in
// the agentRun.
func runAgent(ctx context.Context, cfg agentConfig) (*agentRun, error) {
	// The lines are kept here, if at all: the driver keeps no copy.
	drv, err := driver.NewFrom(cfg.frames, driver.Options{
		Timeout:     cfg.timeout,
		PathMap:     cfg.pathMap,
		MCPMatching: cfg.mcpMatching,
		Discard:     true,
		NoTimeline:  !cfg.keep,
		Rewrite:     cfg.rewrite,
		Faults:      cfg.faults,
		FrameName:   cfg.frameName,
	})
	if err != nil {
		return nil, err
	}
	spooled, err := newSpool()
	if err != nil {
		return nil, err
	}
	live := &frameSpool{spool: spooled}
	run := &agentRun{live: live}
	out := newLiveOutput(cfg, run)
	// The agent's stderr reaches stderr line by line, masked, from
	// OnLine, rather than as the agent wrote it.
	agentStderr := out.stderr
	if cfg.stderr != nil {
		agentStderr = io.Discard
	}
	stdinR, stdinW := io.Pipe()
	sess, err := stdiotap.Start(stdiotap.Config{
		Argv:    cfg.argv,
		Dir:     cfg.dir,
		Env:     cfg.env,
		Stdin:   stdinR,
		Stdout:  io.Discard,
		Stderr:  agentStderr,
		Grace:   cfg.grace,
		MaxLine: cfg.maxLine,
		// The driver answers the agent's lines: each must reach it now.
		FrameAtOnce: true,
		OnLine:      out.line,
	})
	if err != nil {
		live.close()
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		run.exit, waitErr = sess.Wait()
		out.queue.close() // the agent's output has ended
		close(exited)
	}()
	lines := make(chan []byte)
	stop := make(chan struct{})
	go out.queue.feed(lines, stop)
	run.drive, run.driveErr = drv.Run(ctx, &editorFrames{out: out, w: stdinW}, lines)
	close(stop)
	stdinW.Close()
	<-exited
	if waitErr != nil {
		fmt.Fprintf(out.stderr, "replay: agent: %v\n", waitErr)
	}
	if err := live.flush(); err != nil {
		live.close()
		return nil, err
	}
	if err := out.queue.fail(); err != nil {
		live.close()
		return nil, err
	}
	return run, nil
}

// liveOutput takes the agent's lines as stdiotap frames them: its stderr
// to the replay's stderr, and its stdout, each line whole, to the run's
// spool and, through a lineQueue, to the driver, every line masked
// first. OnLine must not block, and is called from one pump at a time.
type liveOutput struct {
	stderr  io.Writer // the replay's, or io.Discard
	showErr bool      // the agent's stderr goes to stderr from here
	mask    func([]byte) []byte
	keep    bool
	queue   *lineQueue
	// mu guards run's live and compared, which the agent's stdout pump
	// and the driver's writes add to.
	mu  sync.Mutex
	run *agentRun
	// join joins the pieces of a stdout line longer than maxLine, as the
	// store's reader joins a recording's.
	join func(store.Event) error
}

func newLiveOutput(cfg agentConfig, run *agentRun) *liveOutput {
	o := &liveOutput{stderr: cfg.stderr, showErr: cfg.stderr != nil, mask: cfg.mask, keep: cfg.keep, run: run}
	o.queue = newLineQueue(o.readBack)
	if o.stderr == nil {
		o.stderr = io.Discard
	}
	if o.mask == nil {
		o.mask = func(b []byte) []byte { return b }
	}
	o.join = store.JoinLines(func(e store.Event) error {
		o.stdoutLine(e.Data)
		return nil
	})
	return o
}

// line is the stdiotap.Config.OnLine of the agent.
func (o *liveOutput) line(l stdiotap.Line) {
	switch l.Stream {
	case stdiotap.Stderr:
		if o.showErr {
			// A secret cut across the pieces of a line longer than
			// maxLine is not masked: lines are 256 MiB.
			b := o.mask(l.Data)
			if !l.NoNewline && !l.Continued {
				b = append(b[:len(b):len(b)], '\n')
			}
			o.stderr.Write(b)
		}
	case stdiotap.Stdout:
		e := store.Event{Kind: store.KindFrame, Lane: l.Stream.Lane(), Data: l.Data}
		if l.Continued {
			e.Flags |= store.FlagContinued
		}
		o.join(e)
	}
}

// stdoutLine takes one whole line of the agent's stdout.
func (o *liveOutput) stdoutLine(data []byte) {
	data = o.mask(data)
	// A buffered write to a file, which does not wait on the driver: the
	// pipe from the agent holds what comes meanwhile.
	at := o.spool(lane.Agent, data)
	if o.keep {
		o.run.kept = append(o.run.kept, data)
	}
	o.queue.push(data, at)
}

// spool adds a frame to the run's live frames, and returns its index.
func (o *liveOutput) spool(l lane.Lane, data []byte) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	at := o.run.live.Len()
	if compared(data) {
		o.run.compared = append(o.run.compared, at)
	}
	o.run.live.add(l, data)
	return at
}

// readBack reads live frame at back from the spool, for the queue.
func (o *liveOutput) readBack(at int) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.run.live.flushed(at) {
		if err := o.run.live.flush(); err != nil {
			return nil, err
		}
	}
	return o.run.live.line(at)
}

// editorFrames is the agent's stdin as the driver writes it: each line
// is spooled among the agent's lines before the agent can read it whole,
// so that the comparison sees which request each answer answers.
type editorFrames struct {
	out *liveOutput
	w   io.WriteCloser
	// partial is the start of a line written without its newline (a
	// stdio fault's split or sever), spooled once the line is whole, or
	// as it is when the agent's stdin closes.
	partial []byte
}

// Write takes what the driver writes: a line and its newline, or, under
// a stdio fault, two lines (dup, garbage) or a piece of one (split,
// sever).
func (e *editorFrames) Write(b []byte) (int, error) {
	rest := b
	for {
		line, more, whole := bytes.Cut(rest, []byte("\n"))
		if !whole {
			e.partial = append(e.partial, line...)
			break
		}
		if e.partial != nil {
			line = append(e.partial, line...)
			e.partial = nil
		}
		e.out.spool(lane.Editor, line)
		rest = more
	}
	return e.w.Write(b)
}

// Close closes the agent's stdin, spooling first the piece of a line it
// got, if any: the agent reads it at the end of its input.
func (e *editorFrames) Close() error {
	if len(e.partial) > 0 {
		e.out.spool(lane.Editor, e.partial)
		e.partial = nil
	}
	return e.w.Close()
}

// queueBudget is how many bytes of the agent's lines a lineQueue holds
// in memory; the lines beyond are read back from the spool as they are
// passed on.
const queueBudget = 8 << 20

// lineQueue passes the agent's lines from stdiotap's callback, which must
// not block, to the driver, letting go of each once passed. An agent
// that writes faster than the driver reads (a turn of a hundred thousand
// updates at once) would fill memory: the queue holds the lines' data up
// to queueBudget bytes, and of the rest only where they are in the
// run's spool, which they were added to first.
type lineQueue struct {
	load   func(at int) ([]byte, error) // reads back line at of the spool
	budget int                          // queueBudget; tests make it smaller

	mu     sync.Mutex   // guards the fields below
	lines  []queuedLine // the lines pushed and not yet handed to feed's channel
	held   int          // the bytes of lines' data in memory
	closed bool
	err    error         // why feed stopped before the end: a line could not be read back
	ready  chan struct{} // signalled (non-blocking) on push and close
}

// A queuedLine is a line of the agent's: its data, or nil and where it is
// in the spool.
type queuedLine struct {
	data []byte
	at   int
}

func newLineQueue(load func(int) ([]byte, error)) *lineQueue {
	return &lineQueue{load: load, budget: queueBudget, ready: make(chan struct{}, 1)}
}

// push queues line data, line at of the spool.
func (q *lineQueue) push(data []byte, at int) {
	q.mu.Lock()
	if q.held+len(data) > q.budget && len(q.lines) > 0 {
		data = nil
	}
	q.held += len(data)
	q.lines = append(q.lines, queuedLine{data, at})
	q.mu.Unlock()
	q.signal()
}

func (q *lineQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *lineQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// feed sends the queued lines to out in order, closing out once the queue
// is closed and drained, or a line cannot be read back (see fail), until
// stop is closed.
func (q *lineQueue) feed(out chan<- []byte, stop <-chan struct{}) {
	for {
		q.mu.Lock()
		var next queuedLine
		have := len(q.lines) > 0
		if have {
			next = q.lines[0]
		}
		done := !have && q.closed
		q.mu.Unlock()
		switch {
		case done:
			close(out)
			return
		case have:
			data := next.data
			if data == nil {
				var err error
				if data, err = q.load(next.at); err != nil {
					q.mu.Lock()
					q.err = err
					q.mu.Unlock()
					close(out)
					return
				}
			}
			select {
			case out <- data:
				q.mu.Lock()
				q.held -= len(next.data)
				q.lines[0] = queuedLine{}
				q.lines = q.lines[1:]
				q.mu.Unlock()
			case <-stop:
				return
			}
		default:
			select {
			case <-q.ready:
			case <-stop:
				return
			}
		}
	}
}

// fail returns why feed stopped early, nil if it did not.
func (q *lineQueue) fail() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

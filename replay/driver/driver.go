// Package driver plays the recorded editor side of an ACP session against a live agent.
package driver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/replay/mcpstandin"
)

// A recording's frames are lane.Lines: the editor's (lane.Editor) and the
// agent's (lane.Agent) whole lines. NewFrom reads them all once, in
// order, and Run reads again the editor frames it sends and the recorded
// twins of the agent's responses and requests; their Line must be safe for
// concurrent use when Runs are, and Run may keep a line's Data until it
// has written it.

// DefaultTimeout is the Timeout used when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// DefaultLinger is the Linger used when Options.Linger is zero.
const DefaultLinger = 5 * time.Second

// Options configures a Driver. The zero value drives an empty recording.
type Options struct {
	// Recorded are the recording's editor and agent frames in recorded
	// order, stderr and LLM lanes left out, pieces of a long line joined.
	// The Driver keeps the slice: it must not change while in use.
	// NewFrom reads them from a Source instead.
	Recorded []lane.Line

	// Discard makes Run keep none of the lines it exchanged (Result.Live
	// and Result.Sent), and NoTimeline no Timeline, so that what it
	// holds does not grow with the session.
	Discard, NoTimeline bool

	// Timeout is how long Run waits for the agent while the agent sends
	// nothing and reads nothing; then it fails with a *WaitError wrapping
	// ErrTimeout. If zero or negative, DefaultTimeout.
	Timeout time.Duration

	// Linger is how long Run waits, once the agent has sent everything
	// the end of the recording waits for, for the state notifications
	// (available_commands_update, usage_update, ...) the recording has
	// more of than the agent sent so far: agents send them from
	// background tasks, and the recording's editor, which stayed open,
	// got the last of them after the last turn. Run then returns whether
	// they came or not; the comparison judges. If zero or negative,
	// DefaultLinger, capped at Timeout.
	Linger time.Duration

	// PathMap maps recorded path prefixes to replay ones: the recorded
	// cwd to the replay workspace, the recorded HOME to the sandbox's.
	// It applies to the string values of the editor's frames, where a
	// prefix starts a path (a whole value, "file://" + path, a path in a
	// prompt's text) and ends at a path component boundary; the longest
	// prefix wins.
	PathMap map[string]string

	// MCPMatching is how the tool calls of MCP servers the editor hosts
	// over ACP are normalized, to be matched with the recorded ones (see
	// the answers to mcp/message in mcpacp.go).
	MCPMatching MCPMatching

	// Rewrite, if not nil, rewrites each recorded editor frame last,
	// after PathMap and the substitutions, as it is queued to be
	// written (a replay puts its MCP stand-ins in place of the recorded
	// servers); Result.Sent holds what it returned. It is called by one
	// Run at a time, in the order the frames are written.
	Rewrite func(line []byte) []byte

	// FrameName names recorded frame i in messages, as the user finds it
	// (`acptap show` numbers frames over every lane, from 1). If nil,
	// "frame " and i.
	FrameName func(i int) string

	// Faults break recorded editor frames on their way to the agent, by
	// index in the recording (see Fault): the first time Run writes the
	// frame, whether a step or an answer, it applies the frame's fault.
	// An index that is not an editor frame's fails NewFrom with
	// ErrInvalidFault. After a FaultClose or FaultSever, Run writes
	// nothing more: it waits for the agent to answer the editor
	// requests it was sent, and returns once it has (see WaitError's
	// ClosedBy), leaving the rest of the recording unplayed. Run's
	// toAgent must then be an io.Closer. Nil for none.
	Faults map[int]Fault
}

// A Driver plays one recording's editor side. It is immutable: Run may be
// called any number of times, concurrently.
//
// Editor frames are sent in recorded order, each once the agent output
// recorded before it has been seen again, judged by kind, not by bytes:
//
//   - the responses to the editor requests answered before it, by id (the
//     editor's ids are sent as recorded, so the agent echoes them);
//   - the agent requests recorded before it, counted per method and
//     session; one the agent skipped (it ended the turn the request was
//     recorded in without sending it) is a MissingError, and no longer
//     awaited; another session's turn ending first, or the answer to
//     another request of the turn coming first, is a race, not a skip;
//   - for a frame sent mid-turn in its session (while an editor request
//     of the frame's session was unanswered in the recording, as
//     session/cancel is; a $/cancel_request is of the session of the
//     request it cancels), the progress of the turn it interrupts: that
//     session's notifications recorded since the turn began (since the
//     first of its requests then unanswered was sent), session/update
//     counted per update kind, other notifications per method, message
//     and thought chunks (kinds ending in "_chunk") measured by the bytes
//     of their text (at least 1 each) rather than counted, since how an
//     LLM's output is cut into chunks varies. Counted from the turn's
//     start rather than from the previous editor frame, an update that
//     lands on the other side of an editor frame than it was recorded on
//     still counts. State notifications (available_commands_update,
//     usage_update, ...: see acp.StateUpdate) are never awaited: agents
//     send them from background tasks, at times that vary against
//     everything else. Once the live agent has answered every request of
//     the session that was pending then, the turn is over and nothing is
//     awaited any more. A frame sent between its session's turns, or of no
//     session, awaits no notification: those recorded before it may
//     legitimately come later, and other sessions' are no cause of it
//     (sessions in flight interleave differently from run to run). The
//     end of the recording awaits every session's.
//
// The agent's requests are answered with the editor's recorded answers:
// the k-th live request of a method in a session gets the answer to the
// k-th recorded one of that method in that session (the live session
// known by the id its session/new answer gave in place of the recorded
// one), under the live request's id, once the editor frames recorded
// before that answer have been sent. A recorded request the editor never
// answered gets no answer. A session/request_permission answer selects
// the live request's option of the kind the recorded answer chose
// (allow_once, reject_always, ...), so an agent that renamed or reordered
// its options gets the editor's choice; one that no longer offers that
// kind gets "cancelled" and Run reports a *PermissionKindError. An
// mcp/message of an MCP server the editor hosts over ACP is answered by
// its inner MCP message rather than by order (see mcpacp.go), and what
// the recording could not answer, or the agent never asked, is in
// Result.MCP.
//
// Strings that differ between a live response (or agent request) and its
// recorded twin at the same JSON path and look like ids (6 bytes to 1 KiB,
// no white space, a digit unless 16 bytes or longer: "sess_3f9a..." but
// not "pending"), such as a sessionId the agent minted, become
// substitutions recorded → live, made in the payload of every later editor
// frame: in whole string values, and as whole words (runs of ASCII
// letters, digits, '_' and '-') inside strings when both ids are words.
// The envelope's "jsonrpc", "id" and "method" and object keys are never
// rewritten; Options.PathMap applies to the same strings, before the
// substitutions. Lines that are not JSON-RPC messages are sent as they
// were (editor) or collected and never awaited (agent).
type Driver struct {
	plan       *plan
	timeout    time.Duration
	linger     time.Duration
	paths      *pathMap
	discard    bool
	noTimeline bool
	rewrite    func([]byte) []byte
	faults     map[int]Fault
	closes     bool // a fault closes the agent's stdin
}

// New prepares to play opts.Recorded.
func New(opts Options) *Driver {
	d, _ := NewFrom(lane.Slice(opts.Recorded), opts) // frames in memory are always read
	return d
}

// NewFrom prepares to play the frames of src, in place of
// opts.Recorded. It reads them all, and fails with the first error of
// src.Line. The Driver keeps src.
func NewFrom(src lane.Lines, opts Options) (*Driver, error) {
	name := opts.FrameName
	if name == nil {
		name = func(i int) string { return "frame " + strconv.Itoa(i) }
	}
	p, err := newPlan(src, name)
	if err != nil {
		return nil, err
	}
	p.mcp.plans(opts.MCPMatching)
	d := &Driver{
		plan:       p,
		timeout:    opts.Timeout,
		linger:     opts.Linger,
		paths:      newPathMap(opts.PathMap),
		discard:    opts.Discard,
		noTimeline: opts.NoTimeline,
		rewrite:    opts.Rewrite,
	}
	if d.timeout <= 0 {
		d.timeout = DefaultTimeout
	}
	if d.linger <= 0 {
		d.linger = min(DefaultLinger, d.timeout)
	}
	if len(opts.Faults) > 0 {
		d.faults = maps.Clone(opts.Faults)
		for _, i := range slices.Sorted(maps.Keys(d.faults)) {
			f := d.faults[i]
			if err := f.validate(); err != nil {
				return nil, err
			}
			if !p.editorFrame(i) {
				return nil, fmt.Errorf("%w %s of %s: not an editor frame of the recording", ErrInvalidFault, f, p.name(i))
			}
			d.closes = d.closes || f.closes()
		}
	}
	return d, nil
}

// Result is what a Run exchanged with the agent. Sent lines may share
// memory with Options.Recorded.
type Result struct {
	Live [][]byte // the agent's lines Run received, in order; nil with Options.Discard
	Sent [][]byte // the lines Run wrote to the agent, in order, without '\n'; nil with Options.Discard

	// Timeline is the order in which Run started writing recorded editor
	// frames and received the agent's lines (see Step). Error responses
	// to unrecorded agent requests are not in it. Nil with
	// Options.NoTimeline.
	Timeline []Step

	// Received is how many lines Run received, kept or not.
	Received int

	// Faulted are the frames, by index in the recording, whose
	// Options.Faults Run applied, in the order it did; a fault missing
	// here was never applied, as Run ended before it wrote its frame.
	Faulted []int

	// MCP are, for each MCP server the recorded editor hosted over ACP,
	// in the order it declared them, what the agent asked of it (see
	// mcpstandin.Report): the requests the recording had no answer for,
	// which got an error, and the recorded calls never made.
	MCP []mcpstandin.Report

	subs   substitutions           // learned in the Run, for Restorer
	reqIDs map[int]json.RawMessage // Live index of an agent request → the id of its recorded twin
}

// Run plays the recording against a live agent: it writes editor frames,
// each followed by '\n', to toAgent (the agent's stdin) and reads the
// agent's stdout lines, without '\n', from fromAgent, which the caller
// feeds (from stdiotap's OnLine, say) and closes when the agent's output
// ends. Run takes ownership of the lines it receives.
//
// Run returns once every editor frame has been sent and the agent output
// recorded after the last one has been seen (the response to the last
// prompt, say), leaving later lines in fromAgent; the caller then closes
// the agent's stdin. It fails early with a *WaitError when what a frame
// waits for does not come (the agent stops: ErrTimeout; its output ends:
// ErrOutputClosed; ctx ends), or with the error of a failed write. An
// agent request that the recording cannot answer gets a JSON-RPC error
// response (code -32603) and adds a *MismatchError to the returned error,
// but Run goes on, so that the diff shows what the agent did next. Every
// failure is in the returned error, in the order it happened (joined as
// errors.Join does when there are several); use errors.As to pick them
// out. The Result holds what was exchanged up to the end, or the failure.
//
// A write that blocks is abandoned when Run fails: it returns when the
// caller closes toAgent or the agent reads it.
func (d *Driver) Run(ctx context.Context, toAgent io.Writer, fromAgent <-chan []byte) (Result, error) {
	if _, ok := toAgent.(io.Closer); d.closes && !ok {
		return Result{}, fmt.Errorf("%w: a fault closes the agent's stdin, and Run's writer is no io.Closer", ErrInvalidFault)
	}
	r := &run{
		d:        d,
		p:        d.plan,
		liveResp: make([]int32, len(d.plan.ids)),
		liveReq:  make(map[reqSeries]int),
		states:   make(map[noteKey]int),
		total:    make(map[noteKey]int),
		overOf:   make(map[string]int),
		writes:   make(chan delivery),
		written:  make(chan error, 1),
	}
	// A faulted write that waits stops waiting when Run returns.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for w := range r.writes {
			r.written <- deliver(toAgent, w.line, w.fault, stop)
		}
	}()
	defer close(r.writes)
	if err := r.loop(ctx, fromAgent); err != nil {
		r.errs = append(r.errs, err)
	}
	var err error
	if r.res.MCP, err = r.mcpReports(); err != nil {
		r.errs = append(r.errs, err)
	}
	r.res.subs = r.subs
	if len(r.errs) == 1 {
		return r.res, r.errs[0]
	}
	return r.res, errors.Join(r.errs...)
}

// run is the state of one Run, used by its goroutine only.
type run struct {
	d   *Driver
	p   *plan
	res Result

	subs substitutions

	// states counts the state notifications the agent sent, by kind;
	// lingerUntil is when the wait for the recording's last ones ends,
	// zero until it has begun.
	states      map[noteKey]int
	lingerUntil time.Time

	liveResp []int32           // responses seen per editor request id, by index (see plan.ids)
	liveReq  map[reqSeries]int // agent requests seen per series, by the recorded session
	cursor   int               // anchors[:cursor] have all been seen
	over     int               // the editor requests of steps[:over] have all been answered (see turnOver)
	overOf   map[string]int    // session → the editor requests of asksOf[session][:n] have all been answered
	total    map[noteKey]int   // notifications seen that steps await (see counted)
	at       []map[noteKey]int // total when each step began to be written
	next     int               // the step to send next
	answers  []queued          // answers waiting for their step
	queue    []write           // waiting to be written, in order
	inflight *write            // being written
	writes   chan delivery     // to the writer goroutine
	written  chan error        // from the writer goroutine
	mcp      mcpRun            // the MCP servers over ACP
	errs     []error           // mismatches so far
	readErr  error             // the first recorded frame that could not be read, which ends the Run
	atTotal  map[noteKey]int   // the last copy of total in at, nil if total changed since
	start    time.Time         // when the current wait began
	seen     time.Time         // the last sign of the agent: a line, or a completed write

	// The faults (Options.Faults): pauseUntil is when the pause of the
	// write in flight (a FaultDelay's, a FaultSplit's) ends, which the
	// timeout does not count; closedAt the frame whose fault closed the
	// agent's stdin, -1 while open; asked the editor requests written,
	// whose answers Run waits for once it has closed the agent's stdin,
	// kept only when a fault may close it.
	pauseUntil time.Time
	closedAt   int
	asked      []respKey
}

// answeredLive reports whether the live agent has answered editor
// request k.
func (r *run) answeredLive(k respKey) bool {
	return k.id >= 0 && r.liveResp[k.id] >= k.n
}

// A delivery is a line for the writer goroutine: a frame or an answer
// with its '\n', and its fault, nil for none.
type delivery struct {
	line  []byte
	fault *Fault
}

// A queued answer waits for the step it was recorded after.
type queued struct {
	a      answer
	k      reqKey
	id     json.RawMessage // the live request's id
	params json.RawMessage // and its params
}

// A write is a line to write to the agent.
type write struct {
	data  []byte  // without '\n'
	frame int     // index in the recording; -1 for an error response
	step  bool    // the line is a step, not an answer
	what  string  // for errors, what an answer or error response is
	ask   respKey // the editor request a step is; noResp for none
	fault *Fault  // the frame's fault, applied as it is written; nil for none
}

// subject names w for errors.
func (r *run) subject(w *write) string {
	switch {
	case w.step:
		return r.p.subject(w.frame)
	case w.frame < 0:
		return w.what
	}
	return fmt.Sprintf("%s (%s)", r.p.name(w.frame), w.what)
}

// loop runs until the end of the recording has been reached or a failure
// that ends the Run.
func (r *run) loop(ctx context.Context, fromAgent <-chan []byte) error {
	r.start = time.Now()
	r.seen = r.start
	r.closedAt = -1
	timer := time.NewTimer(r.d.timeout)
	defer timer.Stop()
	closed := false
	var linger *time.Timer // armed once the wait for the last state notifications begins
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	for {
		if done := r.progress(); done {
			return nil
		}
		if r.readErr != nil {
			return r.readErr
		}
		if closed {
			if !r.lingerUntil.IsZero() {
				return nil // the agent is gone: no state notification is coming
			}
			return r.waitError(ErrOutputClosed, time.Now())
		}
		var lingerC <-chan time.Time
		if !r.lingerUntil.IsZero() {
			if linger == nil {
				linger = time.NewTimer(time.Until(r.lingerUntil))
			}
			lingerC = linger.C
		}
		select {
		case <-lingerC:
			return nil // the agent sent no more of them: the comparison judges
		case line, ok := <-fromAgent:
			if !ok {
				closed, fromAgent = true, nil
				// The agent may have read a frame, answered and exited
				// before the write's completion reached this loop: take
				// it first, lest the frame seem unread.
				if r.inflight != nil {
					select {
					case err := <-r.written:
						if err := r.wrote(err); err != nil {
							return err
						}
					case <-timer.C:
						return r.waitError(ErrTimeout, time.Now())
					case <-ctx.Done():
						return r.waitError(context.Cause(ctx), time.Now())
					}
				}
				continue
			}
			r.seen = time.Now()
			timer.Reset(r.d.timeout)
			r.receive(line)
			if r.readErr != nil {
				return r.readErr
			}
		case err := <-r.written:
			if err := r.wrote(err); err != nil {
				return err
			}
			timer.Reset(r.d.timeout)
		case <-timer.C:
			if now := time.Now(); r.inflight != nil && now.Before(r.pauseUntil) {
				// The editor side is pausing, by a fault: the agent's
				// silence counts from the pause's end.
				timer.Reset(r.pauseUntil.Sub(now) + r.d.timeout)
				continue
			}
			return r.waitError(ErrTimeout, time.Now())
		case <-ctx.Done():
			return r.waitError(context.Cause(ctx), time.Now())
		}
	}
}

// progress starts what can be written and reports whether the Run is
// over.
func (r *run) progress() bool {
	for {
		if r.closedAt >= 0 {
			// The agent's stdin is closed: nothing more is written, and
			// the Run is over once the agent has answered what it was
			// asked.
			return r.inflight == nil && r.answered()
		}
		if r.inflight == nil && len(r.queue) > 0 {
			w := r.queue[0]
			// Popped by reslicing, not by moving the rest down: a
			// recording whose editor frames wait for nothing queues them
			// all at once. append reallocates once the front is used up.
			r.queue[0] = write{}
			r.queue = r.queue[1:]
			w.fault = r.faultOf(w.frame)
			if w.step {
				r.start = time.Now()
				// What the agent sends from now on may answer the step.
				// Steps share a copy of total while it does not change.
				if r.atTotal == nil {
					r.atTotal = maps.Clone(r.total)
				}
				r.at = append(r.at, r.atTotal)
			}
			if w.fault != nil && w.fault.Kind == FaultDrop {
				// As if written: what follows waits for the agent's
				// answer to it as it would have.
				continue
			}
			if w.fault.closes() {
				r.closedAt = w.frame
			} else if w.step && w.ask != noResp && r.d.closes {
				r.asked = append(r.asked, w.ask)
			}
			r.inflight = &w
			if p := w.fault.pause(); p > 0 {
				r.pauseUntil = time.Now().Add(p)
			}
			if w.frame >= 0 && !r.d.noTimeline && (w.fault == nil || w.fault.Kind != FaultClose) {
				r.res.Timeline = append(r.res.Timeline, Step{lane.Editor, w.frame})
			}
			r.writes <- delivery{append(w.data[:len(w.data):len(w.data)], '\n'), w.fault}
			continue
		}
		// The next step is considered once the previous one is written,
		// so that the segment counts what the agent did after it.
		if r.inflight != nil && r.inflight.step || slices.ContainsFunc(r.queue, func(w write) bool { return w.step }) {
			return false
		}
		st := r.p.steps[r.next]
		if !r.ready(r.next) {
			return false
		}
		if int(st.frame) == r.p.n {
			return r.inflight == nil && len(r.queue) == 0 && r.statesSeen()
		}
		line, ok := r.editorLine(int(st.frame), nil)
		if !ok {
			return false
		}
		r.next++
		r.queue = append(r.queue, write{data: line, frame: int(st.frame), step: true, ask: st.ask})
		r.flushAnswers()
	}
}

// wrote takes the completion of the write in flight, err its error.
func (r *run) wrote(err error) error {
	w := r.inflight
	r.inflight = nil
	if err != nil {
		return fmt.Errorf("writing %s to the agent: %w", r.subject(w), err)
	}
	if !r.d.discard {
		r.res.Sent = append(r.res.Sent, w.fault.sent(w.data)...)
	}
	r.seen = time.Now()
	if w.step {
		r.start = r.seen
	}
	return nil
}

// statesSeen reports whether the agent has sent as many state
// notifications of each kind as the recording has, and begins the wait
// for them (Options.Linger) when it has not.
func (r *run) statesSeen() bool {
	for k, n := range r.p.states {
		if r.states[k] < n {
			if r.lingerUntil.IsZero() {
				r.lingerUntil = time.Now().Add(r.d.linger)
			}
			return false
		}
	}
	return true
}

// lastSign is when the timeout began to count: the last sign of the
// agent, or the end of a fault's pause after it.
func (r *run) lastSign() time.Time {
	if r.pauseUntil.After(r.seen) {
		return r.pauseUntil
	}
	return r.seen
}

// faultOf returns the fault of recorded frame i, and notes it applied,
// the first time it is asked; else nil.
func (r *run) faultOf(i int) *Fault {
	f, ok := r.d.faults[i]
	if !ok || i < 0 || slices.Contains(r.res.Faulted, i) {
		return nil
	}
	r.res.Faulted = append(r.res.Faulted, i)
	return &f
}

// answered reports whether the live agent has answered every editor
// request written to it (Options.Faults' closes kept them).
func (r *run) answered() bool {
	for _, k := range r.asked {
		if !r.answeredLive(k) {
			return false
		}
	}
	return true
}

// ready reports whether what step i waits for has been seen.
func (r *run) ready(i int) bool {
	st := r.p.steps[i]
	if r.cursor < int(st.anchors) {
		return false
	}
	if st.mid == nil || r.turnOver(i) {
		return true
	}
	for k, n := range st.mid.notes {
		if r.turnProgress(st, k) < n {
			return false
		}
	}
	return true
}

// turnProgress returns how much of notification kind k the live agent sent
// since step st's turn began.
func (r *run) turnProgress(st step, k noteKey) int {
	return r.total[k] - r.at[st.mid.since][k]
}

// turnOver reports whether the live agent has answered every editor
// request of step i's session (of every session for the end of the
// recording; see midTurn) sent before it, which, once the step's anchors
// have been seen, are the ones pending when it was recorded.
func (r *run) turnOver(i int) bool {
	session := r.p.steps[i].mid.session
	if session == "" {
		for r.over < i {
			if k := r.p.steps[r.over].ask; k != noResp && !r.answeredLive(k) {
				return false
			}
			r.over++
		}
		return true
	}
	asks, j := r.p.asksOf[session], r.overOf[session]
	defer func() { r.overOf[session] = j }()
	for ; j < len(asks) && int(asks[j]) < i; j++ {
		if !r.answeredLive(r.p.steps[asks[j]].ask) {
			return false
		}
	}
	return true
}

func (r *run) seenAnchor(a anchor) bool {
	if a.response() {
		return r.answeredLive(respKey{a.id, a.n})
	}
	return r.liveReq[r.p.series[a.series].reqSeries] >= int(a.n)
}

// receive handles one line from the agent.
func (r *run) receive(line []byte) {
	if !r.d.discard {
		r.res.Live = append(r.res.Live, line)
	}
	if !r.d.noTimeline {
		r.res.Timeline = append(r.res.Timeline, Step{lane.Agent, r.res.Received})
	}
	r.res.Received++
	m := acp.Parse(line)
	switch m.Kind {
	case acp.Response, acp.Error:
		if m.ID == nil {
			return
		}
		id, ok := r.p.idIndex(acp.IDKey(m.ID))
		if !ok {
			break // no recorded editor request had its id: nothing waits for it
		}
		r.liveResp[id]++
		if i, ok := r.p.resps.get(respKey{id, r.liveResp[id]}); ok && m.Kind == acp.Response {
			if data, ok := r.frame(i); ok {
				if rec := acp.Parse(data); rec.Kind == acp.Response {
					r.subs.learn(rec.Result, m.Result)
				}
			}
		}
	case acp.Request:
		// A live session's requests are counted as the recorded
		// session's whose id it took the place of.
		series := reqSeries{r.subs.recorded(sessionOf(m.Params)), m.Method}
		if isMCP(m.Method) {
			series = r.mcpSeries(m.Method, m.Params)
		}
		r.liveReq[series]++
		k := reqKey{series, r.liveReq[series]}
		if r.mcpMessage(k, m) {
			break
		}
		if i, ok := r.p.request(k); ok {
			if data, ok := r.frame(i); ok {
				rec := acp.Parse(data)
				r.subs.learn(rec.Params, m.Params)
				r.requestTwin(rec.ID)
			}
		}
		r.request(k, m.ID, m.Params)
	case acp.Notification:
		k, n := noteOf(m)
		if counted(k) {
			// A live session's notifications count as the recorded
			// session's whose id it took the place of.
			k.session = r.subs.recorded(k.session)
			r.total[k] += n
			r.atTotal = nil
		} else {
			k.session = ""
			r.states[k]++
		}
	}
	for r.cursor < len(r.p.anchors) {
		a := r.p.anchors[r.cursor]
		if !r.seenAnchor(a) {
			if a.response() || !r.turnPassed() {
				break
			}
			// The agent ended the turn this agent request was recorded
			// in without sending it: it never will. Waiting
			// would only time out; the diff shows the difference.
			s := r.p.series[a.series].reqSeries
			r.errs = append(r.errs, &MissingError{Method: s.method, N: int(a.n), Live: r.liveReq[s]})
		}
		r.cursor++
	}
}

// turnPassed reports whether the live agent has ended the turn of the
// agent request at the cursor (see anchor.pass).
func (r *run) turnPassed() bool {
	a := r.p.anchors[r.cursor]
	return int(a.pass) < len(r.p.anchors) && r.seenAnchor(r.p.anchors[a.pass])
}

// request answers the live agent request k of id id, now or once its
// answer's step has been sent. A request recorded without an answer gets
// none, as it did then.
func (r *run) request(k reqKey, id, params json.RawMessage) {
	a, ok := r.p.answer(k)
	if ok {
		r.answers = append(r.answers, queued{a, k, id, params})
		r.flushAnswers()
		return
	}
	if _, recorded := r.p.request(k); recorded {
		return
	}
	e := acp.Envelope{JSONRPC: acp.Version, ID: id, Error: &acp.ResponseError{
		Code:    acp.CodeInternalError,
		Message: fmt.Sprintf("acptap replay: no recorded answer for %s #%d", k.method, k.n),
	}}
	line, _ := json.Marshal(e) // a valid id always marshals
	r.queue = append(r.queue, write{data: line, frame: -1, what: fmt.Sprintf("the error response to %s #%d", k.method, k.n)})
	r.errs = append(r.errs, &MismatchError{Method: k.method, N: k.n, Recorded: r.p.requests(k.reqSeries)})
}

// flushAnswers queues the answers whose step has been queued.
func (r *run) flushAnswers() {
	r.answers = slices.DeleteFunc(r.answers, func(q queued) bool {
		if int(q.a.after) > r.next {
			return false
		}
		line, ok := r.editorLine(int(q.a.frame), q.id)
		if !ok {
			return false
		}
		switch q.k.method {
		case permissionMethod:
			// An agent that renamed or reordered its options gets the
			// editor's choice by its kind.
			line = r.permissionByKind(q, line)
		case mcpConnect:
			r.mcpOpened(int(q.a.frame), line)
		}
		r.queue = append(r.queue, write{
			data:  line,
			frame: int(q.a.frame),
			what:  fmt.Sprintf("answer to %s #%d", q.k.method, q.k.n),
		})
		return true
	})
}

// editorLine returns recorded editor frame i as it is to be sent: paths
// mapped and learned ids substituted in its payload, its id replaced by id
// when not nil. A line that is not a JSON-RPC message is sent as it is.
// It reports false when the frame cannot be read (see frame).
func (r *run) editorLine(i int, id json.RawMessage) ([]byte, bool) {
	line, ok := r.frame(i)
	if !ok || r.p.junk[i] {
		return line, ok
	}
	line = rewriteMessage(line, func(s string) string {
		return r.subs.apply(r.d.paths.apply(s))
	}, id)
	if r.d.rewrite != nil {
		line = r.d.rewrite(line)
	}
	return line, true
}

// frame returns the data of recorded frame i. If it cannot be read, it
// notes the error, which ends the Run, and reports false.
func (r *run) frame(i int) ([]byte, bool) {
	if r.readErr != nil {
		return nil, false
	}
	f, err := r.p.src.Line(i)
	if err != nil {
		r.readErr = fmt.Errorf("reading %s of the recording: %w", r.p.name(i), err)
		return nil, false
	}
	return f.Data, true
}

// waitError describes what the Run was waiting for when err ended it.
func (r *run) waitError(err error, now time.Time) error {
	if r.closedAt >= 0 && r.inflight == nil {
		return r.closedError(err, now)
	}
	st := r.p.steps[r.next]
	e := &WaitError{
		Frame:   int(st.frame),
		Subject: r.p.subject(int(st.frame)),
		Waited:  now.Sub(r.start),
		Silent:  now.Sub(r.seen),
		Err:     err,
	}
	if err == ErrTimeout {
		// The timer fired Timeout after the last sign of the agent; say
		// so exactly, whatever the scheduler's delay. A sign from before
		// the wait began (a dropped frame is not written, so it makes
		// none) leaves the whole wait silent: it lasted the timeout.
		e.Silent = r.d.timeout
		e.Waited = max(r.lastSign().Sub(r.start), 0) + r.d.timeout
	}
	if w := r.inflight; w != nil {
		e.Subject = r.subject(w)
		e.Frame = w.frame
		e.Missing = []string{"the agent to read it"}
		return e
	}
	e.Missing = r.missing(r.next)
	return e
}

// closedError describes what the Run was waiting for after it closed the
// agent's stdin, when err ended it: the answers to the editor requests
// written before.
func (r *run) closedError(err error, now time.Time) error {
	e := &WaitError{
		Frame:    r.closedAt,
		Subject:  "a frame",
		Waited:   now.Sub(r.start),
		Silent:   now.Sub(r.seen),
		Err:      err,
		ClosedBy: r.d.faults[r.closedAt].Kind,
	}
	if data, ok := r.frame(r.closedAt); ok {
		e.Subject = acp.Describe(data)
	}
	if err == ErrTimeout {
		e.Silent = r.d.timeout
		e.Waited = max(r.lastSign().Sub(r.start), 0) + r.d.timeout
	}
	for _, k := range r.asked {
		if !r.answeredLive(k) {
			e.Missing = append(e.Missing, "the response to "+r.p.editorRequest(k))
		}
	}
	return e
}

// missing lists what step i still waits for.
func (r *run) missing(i int) []string {
	st := r.p.steps[i]
	var out []string
	last := make(map[reqSeries]int) // series → the last request awaited
	var series []reqSeries
	for _, a := range r.p.anchors[r.cursor:st.anchors] {
		if r.seenAnchor(a) {
			continue
		}
		if a.response() {
			out = append(out, "the response to "+r.p.editorRequest(respKey{a.id, a.n}))
			continue
		}
		s := r.p.series[a.series].reqSeries
		if _, ok := last[s]; !ok {
			series = append(series, s)
		}
		last[s] = int(a.n)
	}
	more := make(map[string]int) // method → agent requests missing, of every session
	var methods []string
	for _, sr := range series {
		if _, ok := more[sr.method]; !ok {
			methods = append(methods, sr.method)
		}
		more[sr.method] += last[sr] - r.liveReq[sr]
	}
	for _, m := range methods {
		out = append(out, fmt.Sprintf("%d more %s %s", more[m], m, plural(more[m], "request", "requests")))
	}
	if st.mid == nil || r.turnOver(i) {
		return out
	}
	// What is still awaited, of every session together.
	short := make(map[noteKey]int)
	for k, n := range st.mid.notes {
		if n -= r.turnProgress(st, k); n > 0 {
			k.session = ""
			short[k] += n
		}
	}
	keys := slices.SortedFunc(maps.Keys(short), func(a, b noteKey) int {
		return cmp.Or(cmp.Compare(a.method, b.method), cmp.Compare(a.update, b.update))
	})
	for _, k := range keys {
		n := short[k]
		if k.chunk() {
			out = append(out, fmt.Sprintf("%d more %s of %v text", n, plural(n, "byte", "bytes"), k))
		} else {
			out = append(out, fmt.Sprintf("%d more %v", n, k))
		}
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

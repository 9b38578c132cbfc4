package driver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/acp"
)

// A reqSeries is the agent requests of one method in one session: the
// session's recorded id (params.sessionId; "" for a request without one)
// and the method. Several sessions' requests of a method interleave
// differently from run to run; within a session they keep their order.
type reqSeries struct {
	session string
	method  string
}

// A reqKey names the n-th agent request of a series, from 1.
type reqKey struct {
	reqSeries
	n int
}

// sessionOf returns params.sessionId, or "". ACP's params put sessionId
// first, as agents and editors write them: read there, it needs no
// decoding of the rest, which for the agent's updates is most of a
// frame; anywhere else, or escaped, params are decoded.
func sessionOf(params json.RawMessage) string {
	const first = `{"sessionId":"`
	if rest, ok := bytes.CutPrefix(params, []byte(first)); ok {
		if end := bytes.IndexByte(rest, '"'); end >= 0 && !bytes.Contains(rest[:end], []byte{'\\'}) && utf8.Valid(rest[:end]) {
			return string(rest[:end])
		}
	}
	var p struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(params, &p)
	return p.SessionID
}

// A respKey names the n-th response to an editor request id, from 1: the
// id by its index in the plan's ids (see plan.idIndex).
type respKey struct {
	id, n int32
}

// noResp is the respKey of no request.
var noResp = respKey{id: -1}

// An anchor is agent output that later frames wait for: the n-th
// response to an editor request id (series < 0), or the n-th agent
// request of series (see plan.series), from 1.
type anchor struct {
	series int32 // -1 for a response
	id     int32 // a response's id, by its index in the plan's ids
	n      int32
	// pass, for a request, is the index of the anchor that ends its
	// turn: the response to the first editor request of its session
	// unanswered when it was recorded (the session/prompt of the turn).
	// Outside a turn, the first response recorded after it to an editor
	// request of its session; of any session for a request without one,
	// or when its session has none. Once the live agent has sent that
	// response without the request, it never will. Another session's
	// turn does not count: sessions in flight race each other, nor does
	// the answer to another request of the turn (set_mode sent
	// mid-turn), which the agent may give before or after.
	pass int32
}

func (a anchor) response() bool { return a.series < 0 }

// A noteKey is a kind of notification: a session/update's update kind,
// or the method of another notification, and for those steps await (see
// counted) its session (params.sessionId, recorded; "" for none).
type noteKey struct {
	session, method, update string
}

func (k noteKey) String() string {
	if k.update != "" {
		return fmt.Sprintf("%s (%s)", k.method, k.update)
	}
	return k.method
}

func (k noteKey) chunk() bool { return strings.HasSuffix(k.update, "_chunk") }

// A step is an editor frame sent in recorded order, or the end of the
// recording.
type step struct {
	frame   int32    // index in the recording; len(recording) for the end
	anchors int32    // the step waits for anchors[:anchors]
	ask     respKey  // the editor request the frame is; noResp for none
	mid     *midTurn // what a frame sent mid-turn waits for; nil for nothing more
}

// midTurn is what a step sent mid-turn waits for besides its anchors:
// the notifications of its session awaited since step since was sent,
// the start of the turn the frame interrupts (the first of the session's
// editor requests unanswered when the frame was recorded). Once the live
// agent has answered every editor request of the session sent before the
// frame, the turn is over and notes are no longer awaited: those it
// answered in the recording before the frame are anchors the step waits
// for anyway, so the rest are the ones that were unanswered then.
// Consecutive steps of a turn share one while no notification comes
// between them.
//
// Only a frame's own session counts: another session's notifications
// are no cause of it, and how the sessions in flight interleave changes
// from run to run. The end of the recording, which ends every session,
// is the one step whose session is "": it waits for the notifications
// of every session since the first editor request then unanswered, and
// for every editor request sent before it.
type midTurn struct {
	notes   map[noteKey]int
	since   int32
	session string
}

// An answer is the editor's recorded response to an agent request.
type answer struct {
	frame int32 // index in the recording; -1 for none
	after int32 // how many steps were recorded before it: it is sent after them
}

// seriesPlan is what the recording holds of a series of agent requests.
type seriesPlan struct {
	reqSeries
	frames  []int32  // the n-th request's frame index at n-1
	answers []answer // and the editor's answer to it
}

// A plan is what New reads from the recording: when each editor frame may
// be sent, and which recorded answers serve which agent requests (see
// Driver for the rules). It is read-only once made.
//
// It holds a few bytes per frame and no frame's data, which Run reads
// again from src: a recording of a million frames makes a plan of some
// tens of MiB whatever the frames' sizes.
type plan struct {
	src     lane.Lines         // the recording's frames, read again by Run
	n       int                // how many there are
	name    func(i int) string // Options.FrameName
	junk    []bool             // frames that are not JSON-RPC messages
	steps   []step             // the last is the end of the recording
	anchors []anchor
	// ids are the ids of the editor's requests (acp.IDKey) by index;
	// asked and resps the frame indexes of the requests with each id
	// and of the agent's responses to them.
	ids    map[string]int32
	asked  framesByKey
	resps  framesByKey
	series []*seriesPlan       // the series of agent requests, by index
	byName map[reqSeries]int32 // their indexes
	states map[noteKey]int     // recorded state notifications (see counted), by kind
	asksOf map[string][]int32  // session → the steps that are its editor requests, in order
	mcp    *mcpPlan            // the MCP servers the editor hosted over ACP
}

// framesByKey maps a respKey to a frame index: most ids are used once,
// so the first of each id is held in a slice, the rest in a map.
type framesByKey struct {
	first []int32 // by id; -1 for none
	more  map[respKey]int32
}

func (f *framesByKey) set(k respKey, frame int) {
	for int(k.id) >= len(f.first) {
		f.first = append(f.first, -1)
	}
	if k.n == 1 {
		f.first[k.id] = int32(frame)
		return
	}
	if f.more == nil {
		f.more = make(map[respKey]int32)
	}
	f.more[k] = int32(frame)
}

func (f *framesByKey) get(k respKey) (int, bool) {
	if k.id < 0 || int(k.id) >= len(f.first) {
		return 0, false
	}
	if k.n == 1 {
		i := f.first[k.id]
		return int(i), i >= 0
	}
	i, ok := f.more[k]
	return int(i), ok
}

// idIndex returns the index of an editor request id (acp.IDKey), and
// whether the recording's editor used it.
func (p *plan) idIndex(id string) (int32, bool) {
	i, ok := p.ids[id]
	return i, ok
}

// seriesOf returns the plan of series s, nil if the recording has no
// request of it.
func (p *plan) seriesOf(s reqSeries) *seriesPlan {
	if i, ok := p.byName[s]; ok {
		return p.series[i]
	}
	return nil
}

// request returns the frame index of recorded agent request k.
func (p *plan) request(k reqKey) (int, bool) {
	sp := p.seriesOf(k.reqSeries)
	if sp == nil || k.n < 1 || k.n > len(sp.frames) {
		return 0, false
	}
	return int(sp.frames[k.n-1]), true
}

// answer returns the editor's recorded answer to agent request k.
func (p *plan) answer(k reqKey) (answer, bool) {
	sp := p.seriesOf(k.reqSeries)
	if sp == nil || k.n < 1 || k.n > len(sp.answers) || sp.answers[k.n-1].frame < 0 {
		return answer{}, false
	}
	return sp.answers[k.n-1], true
}

// requests returns how many agent requests of series s the recording has.
func (p *plan) requests(s reqSeries) int {
	if sp := p.seriesOf(s); sp != nil {
		return len(sp.frames)
	}
	return 0
}

// editorRequest names editor request k for messages: its id and method,
// read again from the recording.
func (p *plan) editorRequest(k respKey) string {
	i, ok := p.asked.get(k)
	if !ok {
		return "an editor request"
	}
	f, err := p.src.Line(i)
	if err != nil {
		return "editor request of " + p.name(i)
	}
	m := acp.Parse(f.Data)
	return fmt.Sprintf("editor request id=%s (%s)", acp.IDKey(m.ID), m.Method)
}

func newPlan(src lane.Lines, name func(int) string) (*plan, error) {
	p := &plan{
		src:    src,
		name:   name,
		n:      src.Len(),
		ids:    make(map[string]int32),
		byName: make(map[reqSeries]int32),
		states: make(map[noteKey]int),
		asksOf: make(map[string][]int32),
		mcp:    newMCPPlan(),
	}
	pl := planner{
		plan:        p,
		outstanding: make(map[string]reqKey),
		total:       make(map[noteKey]int),
		unpassed:    make(map[string][]int32),
		inTurn:      make(map[respKey][]int32),
		pending:     make(map[string][]pendingReq),
		askSession:  make(map[respKey]string),
	}
	p.junk = make([]bool, p.n)
	for i := range p.n {
		f, err := src.Line(i)
		if err != nil {
			return nil, fmt.Errorf("reading %s of the recording: %w", name(i), err)
		}
		m := acp.Parse(f.Data)
		p.junk[i] = m.Kind == acp.Junk
		if f.Lane == lane.Agent {
			pl.agentFrame(i, m)
		} else {
			pl.editorFrame(i, m, f.Data)
		}
	}
	pl.newStep(p.n, noResp, "")
	pl.finish()
	return p, nil
}

// planner is newPlan's state as it reads the recording in order.
type planner struct {
	*plan
	respN       []int32                 // responses recorded per editor id
	sentN       []int32                 // editor requests sent per id
	outstanding map[string]reqKey       // agent request id → request, until answered
	pending     map[string][]pendingReq // session → its editor requests not answered yet, in the order sent
	askSession  map[respKey]string      // the session of each editor request in pending
	unpassed    map[string][]int32      // session → its request anchors whose pass is not known yet
	inTurn      map[respKey][]int32     // the editor request of a turn → the request anchors recorded in the turn, till it is answered
	total       map[noteKey]int         // notifications awaited so far (see counted)
	at          []map[noteKey]int       // total when each step was recorded
	atTotal     map[noteKey]int         // the last copy of total in at, nil if total changed since
	mid         *midTurn                // the last step's, shared by the next while total stands
}

// A pendingReq is an editor request not answered yet and the step that
// sent it; done once answered, till it reaches the front of its session's
// pending.
type pendingReq struct {
	k    respKey
	step int32
	done bool
}

// answered takes editor request k off pending and returns its session.
// Answers mostly come in the order asked, so k is looked for from the
// front, and an answered request is dropped once it reaches the front
// rather than moving the rest: an editor that sent a hundred thousand
// requests at once costs linear time.
func (pl *planner) answered(k respKey) (session string) {
	session, ok := pl.askSession[k]
	if !ok {
		return ""
	}
	delete(pl.askSession, k)
	q := pl.pending[session]
	j := slices.IndexFunc(q, func(r pendingReq) bool { return r.k == k && !r.done })
	if j < 0 {
		return session
	}
	q[j].done = true
	for len(q) > 0 && q[0].done {
		q = q[1:]
	}
	if len(q) == 0 {
		delete(pl.pending, session)
	} else {
		pl.pending[session] = q
	}
	return session
}

// turnStart returns the step of the first editor request of session
// still unanswered, the start of its turn; of any session for "". It
// returns -1 if there is none.
func (pl *planner) turnStart(session string) int32 {
	if session != "" {
		if q := pl.pending[session]; len(q) > 0 {
			return q[0].step
		}
		return -1
	}
	first := int32(-1)
	for _, q := range pl.pending {
		if first < 0 || q[0].step < first {
			first = q[0].step
		}
	}
	return first
}

// passed sets the pass of the request anchors waiting for a response of
// session, the anchor at index at (see anchor.pass): those of session,
// and those of no session.
func (pl *planner) passed(session string, at int32) {
	for _, i := range pl.unpassed[session] {
		pl.anchors[i].pass = at
	}
	delete(pl.unpassed, session)
	if session != "" {
		pl.passed("", at)
	}
}

// finish sets the pass of the request anchors whose turn or session has
// no response after them: the first response after them of any session,
// or none.
func (pl *planner) finish() {
	next := int32(len(pl.anchors))
	for i := len(pl.anchors) - 1; i >= 0; i-- {
		a := &pl.anchors[i]
		switch {
		case a.response():
			next = int32(i)
		case a.pass < 0:
			a.pass = next
		}
	}
	pl.unpassed, pl.inTurn = nil, nil
}

// id returns the index of editor request id id, a new one if it is new.
func (pl *planner) id(id string) int32 {
	i, ok := pl.ids[id]
	if !ok {
		i = int32(len(pl.ids))
		pl.ids[id] = i
		pl.respN = append(pl.respN, 0)
		pl.sentN = append(pl.sentN, 0)
	}
	return i
}

// agentFrame reads frame i, m, of the agent's: a response to an editor
// request is an anchor, as is a request of the agent's, which an editor
// answer may serve; a notification counts toward what later steps await.
func (pl *planner) agentFrame(i int, m acp.Message) {
	p := pl.plan
	switch m.Kind {
	case acp.Response, acp.Error:
		if m.ID == nil {
			return
		}
		id := pl.id(acp.IDKey(m.ID))
		pl.respN[id]++
		k := respKey{id, pl.respN[id]}
		p.anchors = append(p.anchors, anchor{series: -1, id: id, n: k.n})
		p.resps.set(k, i)
		at := int32(len(p.anchors) - 1)
		for _, j := range pl.inTurn[k] {
			p.anchors[j].pass = at
		}
		delete(pl.inTurn, k)
		pl.passed(pl.answered(k), at)
	case acp.Request:
		name := reqSeries{sessionOf(m.Params), m.Method}
		if isMCP(m.Method) {
			name = p.mcp.request(i, m)
		}
		s, ok := p.byName[name]
		if !ok {
			s = int32(len(p.series))
			p.byName[name] = s
			p.series = append(p.series, &seriesPlan{reqSeries: name})
		}
		sp := p.series[s]
		sp.frames = append(sp.frames, int32(i))
		sp.answers = append(sp.answers, answer{frame: -1})
		k := reqKey{name, len(sp.frames)}
		p.anchors = append(p.anchors, anchor{series: s, id: -1, n: int32(k.n), pass: -1})
		at := int32(len(p.anchors) - 1)
		if q := pl.pending[name.session]; name.session != "" && len(q) > 0 {
			pl.inTurn[q[0].k] = append(pl.inTurn[q[0].k], at)
		} else {
			pl.unpassed[name.session] = append(pl.unpassed[name.session], at)
		}
		pl.outstanding[acp.IDKey(m.ID)] = k
	case acp.Notification:
		if k, n := noteOf(m); counted(k) {
			pl.total[k] += n
			pl.atTotal = nil
		} else {
			k.session = ""
			p.states[k]++
		}
	}
}

// editorFrame reads frame i, m, of the editor's, data: the answer to an
// agent request is sent once that request comes; anything else is a
// step.
func (pl *planner) editorFrame(i int, m acp.Message, data []byte) {
	p := pl.plan
	if (m.Kind == acp.Response || m.Kind == acp.Error) && m.ID != nil {
		if k, ok := pl.outstanding[acp.IDKey(m.ID)]; ok {
			delete(pl.outstanding, acp.IDKey(m.ID))
			a := answer{frame: int32(i), after: int32(len(p.steps))}
			p.seriesOf(k.reqSeries).answers[k.n-1] = a
			if isMCP(k.method) {
				p.mcp.answer(i, m, data, a)
			}
			return
		}
	}
	p.mcp.declare(m)
	ask := noResp
	if m.Kind == acp.Request {
		id := pl.id(acp.IDKey(m.ID))
		pl.sentN[id]++
		ask = respKey{id, pl.sentN[id]}
		p.asked.set(ask, i)
	}
	session := pl.sessionOfFrame(m)
	pl.newStep(i, ask, session)
	if ask != noResp {
		step := int32(len(p.steps) - 1)
		pl.pending[session] = append(pl.pending[session], pendingReq{k: ask, step: step})
		pl.askSession[ask] = session
		if session != "" {
			p.asksOf[session] = append(p.asksOf[session], step)
		}
	}
}

// newStep adds the step of frame, the editor request ask or noResp of
// session, with what it waits for mid-turn: the notifications of session
// recorded since its turn began. A frame of no session waits for none,
// but for the end of the recording (see midTurn).
func (pl *planner) newStep(frame int, ask respKey, session string) {
	p := pl.plan
	st := step{frame: int32(frame), anchors: int32(len(p.anchors)), ask: ask}
	since := int32(-1)
	if session != "" || frame == p.n {
		since = pl.turnStart(session)
	}
	switch {
	case since < 0:
		pl.mid = nil
	case pl.mid != nil && pl.atTotal != nil && pl.mid.since == since && pl.mid.session == session:
		// Nothing came since the last step, of the same turn.
		st.mid = pl.mid
	default:
		mid := &midTurn{since: since, session: session}
		for k, n := range pl.total {
			if session != "" && k.session != session {
				continue
			}
			if d := n - pl.at[since][k]; d > 0 {
				if mid.notes == nil {
					mid.notes = make(map[noteKey]int)
				}
				mid.notes[k] = d
			}
		}
		if mid.notes != nil {
			st.mid = mid
		}
		pl.mid = st.mid
	}
	// Steps share a copy of total while it does not change: most
	// recordings have many more frames than notification kinds.
	if pl.atTotal == nil {
		pl.atTotal = maps.Clone(pl.total)
	}
	pl.at = append(pl.at, pl.atTotal)
	p.steps = append(p.steps, st)
}

// cancelRequest is the method of the notification that cancels a
// JSON-RPC request by its id (params.requestId).
const cancelRequest = "$/cancel_request"

// sessionOfFrame returns the session of editor frame m: params.sessionId,
// or for a $/cancel_request the session of the request it cancels, if
// that is unanswered; "" for none.
func (pl *planner) sessionOfFrame(m acp.Message) string {
	if m.Method != cancelRequest {
		return sessionOf(m.Params)
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.RequestID == nil {
		return ""
	}
	id, ok := pl.ids[acp.IDKey(p.RequestID)]
	if !ok {
		return ""
	}
	return pl.askSession[respKey{id, pl.sentN[id]}]
}

// counted reports whether notifications of kind k are awaited: all but
// state notifications (see acp.StateUpdate), which agents send from
// background tasks, on either side of an editor frame.
func counted(k noteKey) bool {
	return !(k.method == "session/update" && acp.StateUpdate(k.update))
}

// noteOf returns the kind of a notification, its session as the agent
// sent it, and how much it counts: a chunk its text's bytes, anything
// else 1.
func noteOf(m acp.Message) (noteKey, int) {
	k := noteKey{method: m.Method, update: m.UpdateKind}
	if !k.chunk() {
		k.session = sessionOf(m.Params)
		return k, 1
	}
	var p struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	json.Unmarshal(m.Params, &p)
	k.session = p.SessionID
	return k, max(1, len(p.Update.Content.Text))
}

// editorFrame reports whether frame i of the recording is the editor's.
func (p *plan) editorFrame(i int) bool {
	if i < 0 || i >= p.n {
		return false
	}
	f, err := p.src.Line(i)
	return err == nil && f.Lane == lane.Editor
}

// subject names the step of frame i for errors.
func (p *plan) subject(i int) string {
	if i == p.n {
		return "the end of the recording"
	}
	f, err := p.src.Line(i)
	if err != nil {
		return p.name(i)
	}
	return fmt.Sprintf("%s (%s)", p.name(i), acp.Describe(f.Data))
}

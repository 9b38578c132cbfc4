package driver

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

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

// sessionOf returns params.sessionId, or "".
func sessionOf(params json.RawMessage) string {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(params, &p)
	return p.SessionID
}

// A respKey names the n-th response to an editor request id, from 1.
type respKey struct {
	id string // acp.IDKey of the id
	n  int
}

// An anchor is agent output that later frames wait for: a response
// (resp set) or an agent request (req set).
type anchor struct {
	resp respKey
	req  reqKey
}

// A noteKey is a kind of notification: a session/update's update kind,
// or the method of another notification.
type noteKey struct {
	method, update string
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
	frame   int      // index in the recording; len(recording) for the end
	anchors int      // the step waits for anchors[:anchors]
	mid     *midTurn // what a frame sent mid-turn waits for; nil for nothing more
}

// midTurn is what a step sent mid-turn waits for besides its anchors.
type midTurn struct {
	// notes are the notifications awaited since step since was sent, the
	// start of the turn the frame interrupts.
	notes map[noteKey]int
	since int
	// pending are the editor requests unanswered when the frame was
	// recorded. Once the live agent has answered them all, notes are no
	// longer awaited.
	pending []respKey
}

// An answer is the editor's recorded response to an agent request.
type answer struct {
	frame int // index in the recording
	after int // how many steps were recorded before it: it is sent after them
}

// A plan is what New reads from the recording: when each editor frame may
// be sent, and which recorded answers serve which agent requests (see
// Driver for the rules). It is read-only once made.
type plan struct {
	src     lane.Lines // the recording's frames, read again by Run
	n       int        // how many there are
	junk    []bool     // frames that are not JSON-RPC messages
	steps   []step     // the last is the end of the recording
	anchors []anchor
	answers map[reqKey]answer
	reqs    map[reqKey]int     // recorded agent request → frame index
	resps   map[respKey]int    // recorded response to an editor request → frame index
	reqN    map[reqSeries]int  // recorded agent requests of each series
	methods map[respKey]string // editor request → its method
	states  map[noteKey]int    // recorded state notifications (see counted), by kind
	asks    map[int]respKey    // frame index of an editor request → the request
	mcp     *mcpPlan           // the MCP servers the editor hosted over ACP
}

func newPlan(src lane.Lines) (*plan, error) {
	p := &plan{
		src:     src,
		n:       src.Len(),
		answers: make(map[reqKey]answer),
		reqs:    make(map[reqKey]int),
		resps:   make(map[respKey]int),
		reqN:    make(map[reqSeries]int),
		methods: make(map[respKey]string),
		states:  make(map[noteKey]int),
		asks:    make(map[int]respKey),
		mcp:     newMCPPlan(),
	}
	pl := planner{
		plan:        p,
		respN:       make(map[string]int),
		sentN:       make(map[string]int),
		outstanding: make(map[string]reqKey),
		sentAt:      make(map[respKey]int),
		total:       make(map[noteKey]int),
	}
	p.junk = make([]bool, p.n)
	for i := range p.n {
		f, err := src.Line(i)
		if err != nil {
			return nil, fmt.Errorf("reading frame %d of the recording: %w", i, err)
		}
		m := acp.Parse(f.Data)
		p.junk[i] = m.Kind == acp.Junk
		if f.Lane == lane.Agent {
			pl.agentFrame(i, m)
		} else {
			pl.editorFrame(i, m, f.Data)
		}
	}
	pl.newStep(p.n)
	return p, nil
}

// planner is newPlan's state as it reads the recording in order.
type planner struct {
	*plan
	respN       map[string]int    // responses recorded per editor id
	sentN       map[string]int    // editor requests sent per id
	outstanding map[string]reqKey // agent request id → request, until answered
	pending     []respKey         // editor requests not answered yet
	sentAt      map[respKey]int   // editor request → the step that sent it
	total       map[noteKey]int   // notifications awaited so far (see counted)
	at          []map[noteKey]int // total when each step was recorded
	atTotal     map[noteKey]int   // the last copy of total in at, nil if total changed since
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
		id := acp.IDKey(m.ID)
		pl.respN[id]++
		k := respKey{id, pl.respN[id]}
		p.anchors = append(p.anchors, anchor{resp: k})
		p.resps[k] = i
		if j := slices.Index(pl.pending, k); j >= 0 {
			pl.pending = slices.Delete(pl.pending, j, j+1)
		}
	case acp.Request:
		series := reqSeries{sessionOf(m.Params), m.Method}
		if isMCP(m.Method) {
			series = p.mcp.request(i, m)
		}
		p.reqN[series]++
		k := reqKey{series, p.reqN[series]}
		p.anchors = append(p.anchors, anchor{req: k})
		p.reqs[k] = i
		pl.outstanding[acp.IDKey(m.ID)] = k
	case acp.Notification:
		if k, n := noteOf(m); counted(k) {
			pl.total[k] += n
			pl.atTotal = nil
		} else {
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
			a := answer{frame: i, after: len(p.steps)}
			p.answers[k] = a
			if isMCP(k.method) {
				p.mcp.answer(i, m, data, a)
			}
			return
		}
	}
	p.mcp.declare(m)
	pl.newStep(i)
	if m.Kind == acp.Request {
		id := acp.IDKey(m.ID)
		pl.sentN[id]++
		k := respKey{id, pl.sentN[id]}
		pl.pending = append(pl.pending, k)
		pl.sentAt[k] = len(p.steps) - 1
		p.methods[k] = m.Method
		p.asks[i] = k
	}
}

// newStep adds the step of frame, with what it waits for mid-turn: the
// notifications recorded since the turn it interrupts began.
func (pl *planner) newStep(frame int) {
	p := pl.plan
	st := step{frame: frame, anchors: len(p.anchors)}
	if len(pl.pending) > 0 {
		// The turn began when the first of the unanswered requests was
		// sent.
		mid := &midTurn{since: pl.sentAt[pl.pending[0]]}
		for _, k := range pl.pending[1:] {
			mid.since = min(mid.since, pl.sentAt[k])
		}
		for k, n := range pl.total {
			if d := n - pl.at[mid.since][k]; d > 0 {
				if mid.notes == nil {
					mid.notes = make(map[noteKey]int)
				}
				mid.notes[k] = d
			}
		}
		if mid.notes != nil {
			mid.pending = slices.Clone(pl.pending)
			st.mid = mid
		}
	}
	// Steps share a copy of total while it does not change: most
	// recordings have many more frames than notification kinds.
	if pl.atTotal == nil {
		pl.atTotal = maps.Clone(pl.total)
	}
	pl.at = append(pl.at, pl.atTotal)
	p.steps = append(p.steps, st)
}

// counted reports whether notifications of kind k are awaited: all but
// state notifications (see acp.StateUpdate), which agents send from
// background tasks, on either side of an editor frame.
func counted(k noteKey) bool {
	return !(k.method == "session/update" && acp.StateUpdate(k.update))
}

// noteOf returns the kind of a notification and how much it counts.
func noteOf(m acp.Message) (noteKey, int) {
	k := noteKey{method: m.Method, update: m.UpdateKind}
	if !k.chunk() {
		return k, 1
	}
	var p struct {
		Update struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	json.Unmarshal(m.Params, &p)
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
		return fmt.Sprintf("frame %d", i)
	}
	return fmt.Sprintf("frame %d (%s)", i, acp.Describe(f.Data))
}

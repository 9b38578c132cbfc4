package normalize

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/acptap/acptap/internal/acp"
)

// An Order says how a Normalizer arranges a stream for comparison.
type Order uint8

const (
	// ByStream, the default, compares a turn per stream: each tool
	// call's updates, the agent's message, its thoughts, the plan, and
	// each other kind of notification are sequences of their own, and the
	// agent's requests and responses keep their order relative to each
	// other; of each state notification kind only the value at the turn's
	// end counts. Agents send these streams from concurrent tasks, so
	// their interleaving varies from run to run. Turns keep their order.
	ByStream Order = iota
	// Strict compares the total order: every value in its position, each
	// state notification too.
	Strict
)

// String returns the order's name: "stream" or "strict".
func (o Order) String() string {
	switch o {
	case ByStream:
		return "stream"
	case Strict:
		return "strict"
	}
	return fmt.Sprintf("Order(%d)", uint8(o))
}

// ParseOrder reads an Order by its name, "stream" or "strict". Other
// names fail with an error wrapping ErrOrder.
func ParseOrder(s string) (Order, error) {
	switch s {
	case "stream":
		return ByStream, nil
	case "strict":
		return Strict, nil
	}
	return 0, fmt.Errorf("%w %q (want stream or strict)", ErrOrder, s)
}

// Names of the streams of a turn that are not named after what they carry.
const (
	// RequestsStream is the agent's requests (session/request_permission,
	// fs/*, terminal/*) and its responses to the editor's requests, the
	// turn's answer last.
	RequestsStream = "requests and responses"
	// JunkStream is the lines that are not JSON-RPC messages.
	JunkStream = "lines that are not JSON-RPC"
)

// A Transcript is a normalized ACP stream arranged for comparison; see
// Normalizer.Transcript. Values lists it as JSON values, and Compare
// compares two.
type Transcript struct {
	Order Order
	// Turns are the turns in order. The last holds what came after the
	// last answer (the end of the session), and is empty when nothing
	// did. Under Strict there is one turn, which holds one stream of
	// every value in order.
	Turns []Turn
}

// A Turn is what the agent wrote up to and including its answer to a
// session/prompt request (a response with a stopReason), after the
// previous answer; the first turn also holds what came before the first
// prompt, such as the answers to initialize and session/new.
type Turn struct {
	// Answered says whether the turn ends with an answer: all but the
	// last do (under Strict, none).
	Answered bool
	// Streams are the turn's streams, in order of their first value;
	// one of them is the requests and responses (RequestsStream), which
	// ends with the answer.
	Streams []Stream
	// State is the session's state at the turn's end: for each kind of
	// state notification seen so far in the session, the value that
	// stood then. It is sorted by session, then kind. Nil under Strict.
	State []State
}

// A Stream is one sequence of values of a turn.
type Stream struct {
	// Name says what the stream carries, as reports name it: "agent
	// message", "agent thought", "user message", "plan", "tool call
	// <toolCallId:1>", "session/update KIND" for other kinds of update,
	// "METHOD notifications" for other notifications, RequestsStream,
	// JunkStream, or "" for the one stream under Strict.
	Name string
	// Session is the sessionId placeholder of a stream of session
	// updates, "" for the others. Name and Session identify a stream in a
	// turn.
	Session string
	// Values are its values, normalized, each message chunk run joined
	// unless Options.NoCoalesce.
	Values []json.RawMessage
}

// A State is the value of one kind of state notification at a turn's end.
type State struct {
	// Kind is the update kind, such as "available_commands_update".
	Kind    string
	Session string
	// Value is the last notification of the kind before the turn's
	// answer, normalized, or nil if none had come yet in the session.
	Value json.RawMessage
	// Late is the first of the kind that came after the answer, before
	// anything but state notifications, or nil. Such a notification races
	// the answer: it may end this turn or start the next.
	Late json.RawMessage
}

// Transcript normalizes a sequence of frames, typically all the agent
// wrote, and arranges them for comparison in the order of
// Options.Order.
//
// Under ByStream, the frames are cut into turns after each answer to a
// session/prompt (a response whose result has a stopReason), and each
// turn into streams (see Turn and Stream). Message and thought chunks
// (agent_message_chunk, agent_thought_chunk, user_message_chunk) with
// text content, alike in everything but their text, that follow each
// other in their stream become one chunk with their texts joined: how a
// model's answer is cut into chunks is not the agent's doing
// (Options.NoCoalesce turns this off). State notifications
// (available_commands_update, current_mode_update, config_option_update,
// session_info_update, usage_update) count by their value at the turn's
// end, or by the first that came right after the answer (see State). Values are normalized turn by turn, each turn's
// streams in order, then its state notifications, then its requests and
// responses, so that placeholders are numbered alike in two runs that
// interleave their streams differently.
//
// Under Strict, the frames stay in order, in one stream, adjacent chunks
// joined.
func (n *Normalizer) Transcript(frames []Frame) *Transcript {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.order == Strict {
		return &Transcript{Order: Strict, Turns: []Turn{{Streams: []Stream{{Values: n.strict(frames)}}}}}
	}
	t := &Transcript{Order: ByStream}
	var seg []decoded
	cum := map[stateKey]json.RawMessage{}
	for _, f := range frames {
		d := decoded{side: f.Side, v: parseLine(f.Line)}
		d.class = classify(d.v)
		seg = append(seg, d)
		if d.class.answer {
			t.Turns = append(t.Turns, n.turn(seg, cum, t.Turns))
			seg = nil
		}
	}
	t.Turns = append(t.Turns, n.turn(seg, cum, t.Turns))
	return t
}

// Values returns the transcript as a list of JSON values: turn by turn,
// the requests and responses but the answer, the other streams in order,
// the state notifications whose value changed in the turn (State.Value),
// then the answer. Normalized again, the list gives the same
// list.
func (t *Transcript) Values() []json.RawMessage {
	var out []json.RawMessage
	prev := map[stateKey]json.RawMessage{}
	for _, turn := range t.Turns {
		requests, answer := turn.requests()
		out = append(out, requests...)
		for _, s := range turn.Streams {
			if !s.requests() {
				out = append(out, s.Values...)
			}
		}
		for _, st := range turn.State {
			k := st.key()
			if v := st.Value; v != nil && !sameJSON(v, prev[k]) {
				out = append(out, v)
				prev[k] = v
			}
		}
		if answer != nil {
			out = append(out, answer)
		}
	}
	return out
}

// requests returns the requests and responses of an answered turn but
// its answer, and the answer; of another turn, all of them and nil.
func (turn *Turn) requests() ([]json.RawMessage, json.RawMessage) {
	for _, s := range turn.Streams {
		if !s.requests() {
			continue
		}
		if k := len(s.Values); turn.Answered && k > 0 {
			return s.Values[:k-1], s.Values[k-1]
		}
		return s.Values, nil
	}
	return nil, nil
}

// requests reports whether s is the requests and responses of its turn.
func (s *Stream) requests() bool { return s.Name == RequestsStream && s.Session == "" }

// decoded is a frame of Transcript, decoded.
type decoded struct {
	side  Side
	v     any
	class class
}

// A class says where a frame goes in a turn, judged on the frame as
// written, before normalization.
type class struct {
	requests bool   // a request or response
	state    string // the kind of a state notification, or ""
	stream   string // the stream of the others, with the raw key of its tool call or session
	answer   bool   // a response with a stopReason, which ends a turn
}

// classify returns the class of a decoded frame.
func classify(v any) class {
	m, ok := v.(map[string]any)
	if !ok {
		return class{stream: JunkStream}
	}
	id, hasID := m["id"]
	hasID = hasID && id != nil
	if method, ok := m["method"]; ok {
		name, ok := method.(string)
		switch {
		case !ok:
			return class{stream: JunkStream}
		case hasID:
			return class{requests: true}
		case name != "session/update":
			return class{stream: name + " notifications"}
		}
		params, _ := m["params"].(map[string]any)
		update, _ := params["update"].(map[string]any)
		kind, _ := update["sessionUpdate"].(string)
		session := rawKey(params["sessionId"])
		if acp.StateUpdate(kind) {
			return class{state: kind}
		}
		return class{stream: updateStream(kind, rawKey(update["toolCallId"])) + "\x00" + session}
	}
	_, isResult := m["result"]
	_, isError := m["error"]
	if !isResult && !isError {
		return class{stream: JunkStream}
	}
	result, _ := m["result"].(map[string]any)
	_, answer := result["stopReason"]
	return class{requests: true, answer: answer && isResult}
}

// rawKey returns a comparable form of a decoded id.
func rawKey(v any) string {
	if v == nil {
		return ""
	}
	return string(encode(v))
}

// updateStream names the stream of a session/update kind that is not a
// state notification; toolCall is the tool call's id for tool_call and
// tool_call_update.
func updateStream(kind, toolCall string) string {
	switch kind {
	case "agent_message_chunk":
		return "agent message"
	case "agent_thought_chunk":
		return "agent thought"
	case "user_message_chunk":
		return "user message"
	case "plan":
		return "plan"
	case "tool_call", "tool_call_update":
		return "tool call " + toolCall
	}
	return "session/update " + kind
}

// An item is a value of a stream being built: a normalized value, or a
// message chunk whose text is not normalized yet.
type item struct {
	at    int // the frame's index in its turn
	v     any
	chunk *chunk
}

// stateKey identifies a kind of state notification of a session.
type stateKey struct{ session, kind string }

func (s *State) key() stateKey { return stateKey{s.Session, s.Kind} }

// streamKey identifies a stream of a turn.
type streamKey struct{ name, session string }

// turn normalizes the frames of one turn, updating cum, the session's
// state as it stands, and adding the candidates of the state notifications
// that lead the turn to the previous turn, the last of done.
func (n *Normalizer) turn(frames []decoded, cum map[stateKey]json.RawMessage, done []Turn) Turn {
	turn := Turn{Answered: len(frames) > 0 && frames[len(frames)-1].class.answer}

	// The streams, in order of their first frame, keyed as written.
	var order []string
	groups := map[string][]int{}
	firstRequest := -1 // the index of the first request or response
	for i, f := range frames {
		if f.class.requests && firstRequest < 0 {
			firstRequest = i
		}
		if c := f.class; c.stream != "" {
			if _, ok := groups[c.stream]; !ok {
				order = append(order, c.stream)
			}
			groups[c.stream] = append(groups[c.stream], i)
		}
	}
	// Everything but chunk texts is normalized in this order: the
	// requests and responses, the streams, the state notifications.
	var requests []any
	for _, f := range frames {
		if f.class.requests {
			requests = append(requests, n.frame(f.side, f.v))
		}
	}
	items := make([]item, 0, len(frames))
	for _, g := range order {
		for _, i := range groups[g] {
			items = append(items, n.item(i, frames[i]))
		}
	}
	lead := true // the state notifications before anything else
	var leading []item
	var states []item
	for i, f := range frames {
		if f.class.state == "" {
			lead = false
			continue
		}
		it := item{at: i, v: n.frame(f.side, f.v)}
		states = append(states, it)
		if lead {
			leading = append(leading, it)
		}
	}

	// The streams again, keyed as normalized: a user rule may have made
	// two keys one. Then chunk runs are joined and their texts
	// normalized.
	var keys []streamKey
	byKey := map[streamKey][]item{}
	for _, it := range items {
		k := keyOf(it)
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], it)
	}
	for _, k := range keys {
		its := byKey[k]
		slices.SortStableFunc(its, func(a, b item) int { return cmp.Compare(a.at, b.at) })
		turn.Streams = append(turn.Streams, Stream{Name: k.name, Session: k.session, Values: n.join(its)})
	}
	if len(requests) > 0 {
		s := Stream{Name: RequestsStream}
		for _, v := range requests {
			s.Values = append(s.Values, encode(v))
		}
		// In order of first frames, as the other streams are.
		at := 0
		for _, k := range keys {
			if byKey[k][0].at < firstRequest {
				at++
			}
		}
		turn.Streams = slices.Insert(turn.Streams, at, s)
	}

	// The state: the first notification of each kind that leads this
	// turn may end the previous one.
	if len(done) > 0 {
		prev := &done[len(done)-1]
		for _, it := range leading {
			k := stateKeyOf(it.v)
			j := slices.IndexFunc(prev.State, func(s State) bool { return s.key() == k })
			if j < 0 {
				prev.State = append(prev.State, State{Kind: k.kind, Session: k.session})
				j = len(prev.State) - 1
			}
			if prev.State[j].Late == nil {
				prev.State[j].Late = encode(it.v)
			}
		}
		sortState(prev.State)
	}
	for _, it := range states {
		cum[stateKeyOf(it.v)] = encode(it.v)
	}
	for k, v := range cum {
		turn.State = append(turn.State, State{Kind: k.kind, Session: k.session, Value: v})
	}
	sortState(turn.State)
	return turn
}

func sortState(s []State) {
	slices.SortFunc(s, func(a, b State) int {
		return cmp.Or(cmp.Compare(a.Session, b.Session), cmp.Compare(a.Kind, b.Kind))
	})
}

// item normalizes frame f, the i-th of its turn, deferring the text of a
// message chunk.
func (n *Normalizer) item(i int, f decoded) item {
	if n.coalesce {
		if c, ok := n.startChunk(f.side, f.v); ok {
			return item{at: i, chunk: c}
		}
	}
	return item{at: i, v: n.frame(f.side, f.v)}
}

// join returns the values of a stream's items, runs of chunks alike but
// for their text joined, and their texts normalized.
func (n *Normalizer) join(items []item) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(items))
	var group *chunk
	flush := func() {
		if group != nil {
			out = append(out, encode(n.finishChunk(group)))
			group = nil
		}
	}
	for _, it := range items {
		if c := it.chunk; c != nil {
			if group != nil && group.key == c.key {
				group.text.WriteString(c.text.String())
				continue
			}
			flush()
			group = c
			continue
		}
		flush()
		out = append(out, encode(it.v))
	}
	flush()
	return out
}

// keyOf returns the key of a stream item, normalized: its stream's name
// and session.
func keyOf(it item) streamKey {
	v := it.v
	if it.chunk != nil {
		v = it.chunk.rest
	}
	m, ok := v.(map[string]any)
	if !ok {
		return streamKey{name: JunkStream}
	}
	method, ok := m["method"].(string)
	if !ok {
		return streamKey{name: JunkStream}
	}
	if method != "session/update" {
		return streamKey{name: method + " notifications"}
	}
	params, _ := m["params"].(map[string]any)
	update, _ := params["update"].(map[string]any)
	kind, _ := update["sessionUpdate"].(string)
	return streamKey{name: updateStream(kind, display(update["toolCallId"])), session: display(params["sessionId"])}
}

// stateKeyOf returns the key of a normalized state notification.
func stateKeyOf(v any) stateKey {
	m, _ := v.(map[string]any)
	params, _ := m["params"].(map[string]any)
	update, _ := params["update"].(map[string]any)
	kind, _ := update["sessionUpdate"].(string)
	return stateKey{session: display(params["sessionId"]), kind: kind}
}

// display returns an id as a name shows it: a string as it is, anything
// else as JSON, nothing as "".
func display(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return rawKey(v)
}

// strict normalizes frames in their order, joining adjacent chunks.
func (n *Normalizer) strict(frames []Frame) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(frames))
	var group *chunk
	flush := func() {
		if group != nil {
			out = append(out, encode(n.finishChunk(group)))
			group = nil
		}
	}
	for _, f := range frames {
		v := parseLine(f.Line)
		if n.coalesce {
			if c, ok := n.startChunk(f.Side, v); ok {
				if group != nil && group.key == c.key {
					group.text.WriteString(c.text.String())
					continue
				}
				flush()
				group = c
				continue
			}
		}
		// The frame is normalized before the chunks before it are
		// finished, which numbers its placeholders first; that is the
		// same in every run, as the frame ends the run of chunks in
		// every run.
		v = n.frame(f.Side, v)
		flush()
		out = append(out, encode(v))
	}
	flush()
	return out
}

// sameJSON reports whether two canonical JSON values are equal; nil is
// equal only to nil.
func sameJSON(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if bytes.Equal(a, b) {
		// What the comparison of two equal runs finds, every time,
		// without decoding both.
		return true
	}
	_, _, _, differ := FirstDifference(a, b)
	return !differ
}

package normalize

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"slices"
	"strconv"

	"github.com/acptap/acptap/lane"

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
	// Turns are the turns in order: the first session's, then each other
	// session's, session by session (see Turn.Session). A session's last
	// turn holds what came after its last answer (the end of the
	// session), and is empty when nothing did. Under Strict there is one
	// turn, which holds one stream of every value in order.
	Turns []Turn
}

// A Turn is what the agent wrote in a session up to and including its
// answer to a session/prompt request (a response with a stopReason) or
// to a session/load request (whose history the agent sends first), after
// the previous answer; the first turn also holds what came before the
// first prompt, such as the answers to initialize and session/new.
//
// The session of a frame is the one its params name; of a response, its
// request's (of the answer to session/new, the session it made). Sessions
// are ordered as the editor asked for them (its session/new requests),
// whatever order their answers came in. Frames of no session (the
// answers to initialize and authenticate, notifications that name no
// session, lines that are not JSON-RPC) count as the first session's:
// with one session, its turns hold every frame.
type Turn struct {
	// Session is, for a turn of the second session of a stream or a
	// later one, its sessionId placeholder; "" for a turn of the first
	// session, which also holds the frames of no session.
	Session string
	// Answered says whether the turn ends with an answer: all but the
	// last of each session do (under Strict, none).
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
	// After is, for the requests and responses (RequestsStream), the
	// kind (see FrameKind) of the agent's frame before each value in the
	// order the agent wrote them, state notifications and frames of the
	// value's own kind passed over: "" for none, and for the others.
	// calibrate learns where a request may be missing from it.
	After []string
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
func (n *Normalizer) Transcript(frames []lane.Line) *Transcript {
	// Frames in memory are decoded once and kept for their turn; they
	// cannot fail to be read.
	t, _ := n.build(lane.Slice(frames), buildMode{emit: encode, keep: true})
	return t
}

// ReadTranscript is Transcript of the frames of lines, read a turn at a
// time: of a turn it keeps where each frame goes (its stream and its
// position), not the frame, and reads the frames again to normalize
// them in Transcript's order, so that what it holds is the transcript and
// the index of one turn, not the lines. It fails with the first error of
// lines.Frame.
func (n *Normalizer) ReadTranscript(lines lane.Lines) (*Transcript, error) {
	return n.build(lines, buildMode{emit: encode})
}

// DigestTranscript is ReadTranscript with every value replaced by a
// digest of it, a JSON string holding 128 bits of the SHA-256 of the
// value's canonical JSON, and then the values of each stream of a turn
// by one digest of them all, in order (a turn's answer, the last of its
// requests and responses, kept apart; under Strict, the whole stream):
// what it holds grows with the turns and their streams, not with the
// values. Two digest transcripts of Normalizers with the same options
// Compare equal only if the transcripts would (the converse holds unless
// two values differ in bytes but not as JSON values, or a turn that was
// cancelled on both sides was cut at a different place): a comparison
// that a caller makes again with ReadTranscript to explain a difference.
// Placeholders are numbered as Transcript numbers them; the State is
// that of the transcript, digested.
func (n *Normalizer) DigestTranscript(lines lane.Lines) (*Transcript, error) {
	return n.build(lines, buildMode{emit: digest, fold: true})
}

// A buildMode is how build makes a transcript.
type buildMode struct {
	emit func(any) json.RawMessage // a value of its normalized form
	keep bool                      // the frames kept decoded until normalized, else read again
	fold bool                      // each stream's values folded into one (see DigestTranscript)
}

// A folder digests a sequence of digests.
type folder struct {
	h hash.Hash
	n int
}

func (f *folder) add(d []byte) {
	if f.h == nil {
		f.h = sha256.New()
	}
	// Each length-prefixed: the concatenation is unambiguous.
	f.h.Write(binary.AppendUvarint(nil, uint64(len(d))))
	f.h.Write(d)
	f.n++
}

// addStream adds stream s, its values' digest sum.
func (f *folder) addStream(s Stream, sum json.RawMessage) {
	f.add([]byte(s.Name))
	f.add([]byte(s.Session))
	f.add(sum)
}

// sum returns the digest of the sequence, "" and its count in the JSON
// string; nil for none.
func (f *folder) sum() json.RawMessage {
	if f.n == 0 {
		return nil
	}
	b := make([]byte, 0, 40)
	b = append(b, '"')
	b = base64.RawURLEncoding.AppendEncode(b, f.h.Sum(nil)[:16])
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(f.n), 10)
	return append(b, '"')
}

// foldedStreams names the stream of a folded turn that stands for all
// its streams but the requests and responses.
const foldedStreams = "every other stream"

// fold replaces the values of turn's requests and responses with their
// digest, its answer kept apart (see Turn.requests), and its other
// streams with one stream of one digest of them all, in the order of
// their keys (Compare pairs streams by key, whatever their order): a
// turn of ten thousand tool calls holds one value. It drops After.
func fold(turn *Turn) {
	var streams []Stream
	others := slices.DeleteFunc(slices.Clone(turn.Streams), func(s Stream) bool { return s.requests() })
	if i := slices.IndexFunc(turn.Streams, func(s Stream) bool { return s.requests() }); i >= 0 {
		s := turn.Streams[i]
		values, last := s.Values, json.RawMessage(nil)
		if turn.Answered && len(values) > 0 {
			values, last = values[:len(values)-1], values[len(values)-1]
		}
		var f folder
		for _, v := range values {
			f.add(v)
		}
		folded := Stream{Name: s.Name}
		if sum := f.sum(); sum != nil {
			folded.Values = append(folded.Values, sum)
		}
		if last != nil {
			folded.Values = append(folded.Values, last)
		}
		streams = append(streams, folded)
	}
	slices.SortFunc(others, func(a, b Stream) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Session, b.Session))
	})
	var all folder
	for _, s := range others {
		var f folder
		for _, v := range s.Values {
			f.add(v)
		}
		all.addStream(s, f.sum())
	}
	if sum := all.sum(); sum != nil {
		streams = append(streams, Stream{Name: foldedStreams, Values: []json.RawMessage{sum}})
	}
	turn.Streams = streams
}

// digest returns a normalized value's digest, as DigestTranscript has it.
func digest(v any) json.RawMessage {
	sum := sha256.Sum256(encode(v))
	b := make([]byte, 0, 24)
	b = append(b, '"')
	b = base64.RawURLEncoding.AppendEncode(b, sum[:16])
	return append(b, '"')
}

// build makes the transcript of lines as mode says.
//
// It reads every frame first, noting of each where it goes (its class
// and its session), and then normalizes turn by turn, a session at a time
// in the order of their slots, each session with placeholders of its own
// (see enter), so that placeholders are numbered alike in two runs whose
// sessions interleave differently.
func (n *Normalizer) build(lines lane.Lines, mode buildMode) (*Transcript, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.order == Strict {
		var values []json.RawMessage
		var f folder
		put := func(v json.RawMessage) { values = append(values, v) }
		if mode.fold {
			put = func(v json.RawMessage) { f.add(v) }
		}
		if err := n.strict(lines, mode.emit, put); err != nil {
			return nil, err
		}
		turn := Turn{Streams: []Stream{{Values: values}}}
		if mode.fold {
			// As fold makes it of the one stream, folded as it was read.
			var all folder
			all.addStream(Stream{}, f.sum())
			turn.Streams = []Stream{{Name: foldedStreams, Values: []json.RawMessage{all.sum()}}}
		}
		return &Transcript{Order: Strict, Turns: []Turn{turn}}, nil
	}
	r := &frameIndex{lines: lines, index: map[class]uint32{}, streams: []string{""}, streamIndex: map[string]uint32{"": 0}}
	if mode.keep {
		r.values = make([]any, lines.Len())
	}
	sessions := newSessionTable()
	// The editor's request ids are numbered in the order it sent them,
	// whatever order the answers came in: before anything is normalized.
	sessions.sent = func(id any) { n.rpcID(0, id) }
	for i := range lines.Len() {
		f, err := lines.Line(i)
		if err != nil {
			return nil, err
		}
		if f.Lane == lane.Editor && n.omitEditor && !mayBeRequest(f.Data) {
			continue // only the editor's requests say anything here
		}
		v := parseLine(f.Data)
		c, stream := classify(v)
		c.what = FrameKind(v)
		slot, answer := sessions.place(f.Lane, v, c)
		if f.Lane == lane.Editor && n.omitEditor {
			continue
		}
		c.answer = answer
		r.add(i, f.Lane, c, stream, slot)
		if mode.keep {
			r.values[i] = v
		}
	}
	// The frames by session, in the sessions' order; the frames of none
	// go with the first session's, in order.
	slots, ids := sessions.order()
	bySlot := make([][]placed, len(ids)+1)
	first := len(ids) + 1
	for i, p := range r.frames {
		if p.slot > 0 {
			r.frames[i].slot = int32(slots[p.slot-1])
			first = min(first, int(r.frames[i].slot))
		}
	}
	t := &Transcript{Order: ByStream}
	if first > len(ids) {
		first = 0
	}
	several := false
	for _, p := range r.frames {
		s := int(p.slot)
		if s == 0 {
			s = first
		}
		several = several || s != first
		bySlot[s] = append(bySlot[s], p)
	}
	if !several {
		turns, err := n.turns(r, r.frames, "", mode)
		t.Turns = turns
		return t, err
	}
	r.frames = nil
	// Session ids are numbered in the order of the sessions; each
	// session numbers the rest afresh.
	names := make([]string, len(ids)+1)
	for s, id := range ids {
		if k, ok := linkKey(id); ok {
			names[s+1] = n.link("sessionId", k)
		}
	}
	names[first] = ""
	start := n.scope()
	for s, frames := range bySlot {
		if len(frames) == 0 {
			continue
		}
		n.enter(start)
		turns, err := n.turns(r, frames, names[s], mode)
		if err != nil {
			return nil, err
		}
		t.Turns = append(t.Turns, turns...)
	}
	return t, nil
}

// turns cuts frames, all of one session (or all of the stream), into
// turns after each answer, and normalizes them in order; the last turn
// holds what came after the last answer, and is empty if nothing did.
func (n *Normalizer) turns(r *frameIndex, frames []placed, session string, mode buildMode) ([]Turn, error) {
	var turns []Turn
	cum := map[stateKey]json.RawMessage{}
	from := 0
	for i := 0; i <= len(frames); i++ {
		if i < len(frames) && !r.classes[frames[i].class].answer {
			continue
		}
		end := min(i+1, len(frames))
		seg := &turnFrames{frameIndex: r, frames: frames[from:end]}
		seg.frames = n.present(seg)
		turn, err := n.turn(seg, mode.emit, cum, turns)
		if err != nil {
			return nil, err
		}
		if mode.fold {
			fold(&turn)
		}
		turn.Session = session
		turns = append(turns, turn)
		from = end
	}
	return turns, nil
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

// mayBeRequest reports whether a line may be a JSON-RPC request: a line
// for which it is false is not one.
func mayBeRequest(line []byte) bool {
	line = bytes.TrimSpace(line)
	return len(line) > 0 && line[0] == '{' && bytes.Contains(line, []byte(`"method"`))
}

// frameIndex is where each frame of a stream goes, and the frames
// decoded if they are kept, else where to read them again.
type frameIndex struct {
	lines  lane.Lines
	frames []placed // the frames that go anywhere, in order
	values []any    // the frames decoded, by index in lines; nil to read them again
	// classes are the classes of the frames, each once, index their
	// positions: a stream of a million frames holds 16 bytes of each.
	classes []class
	index   map[class]uint32
	// streams are the streams of the frames as written, each once,
	// streamIndex their positions: a turn of ten thousand tool calls
	// has as many, against a dozen classes.
	streams     []string
	streamIndex map[string]uint32
}

// placed is a frame of a frameIndex: where it is and where it goes.
type placed struct {
	at     uint32    // its index in lines
	side   lane.Lane // who wrote it
	class  uint32    // in classes
	stream uint32    // in streams
	slot   int32     // its session: its ref while reading, then its slot (see sessionTable); 0 for none
}

// add adds frame at of side, class c and stream stream, in the session of
// slot.
func (r *frameIndex) add(at int, side lane.Lane, c class, stream string, slot int) {
	k, ok := r.index[c]
	if !ok {
		k = uint32(len(r.classes))
		r.classes = append(r.classes, c)
		r.index[c] = k
	}
	s, ok := r.streamIndex[stream]
	if !ok {
		s = uint32(len(r.streams))
		r.streams = append(r.streams, stream)
		r.streamIndex[stream] = s
	}
	r.frames = append(r.frames, placed{at: uint32(at), side: side, class: k, stream: s, slot: int32(slot)})
}

// turnFrames are the frames of one turn.
type turnFrames struct {
	*frameIndex
	frames []placed
}

// class returns the class of frame i of the turn.
func (s *turnFrames) class(i int) class { return s.classes[s.frames[i].class] }

// stream returns the stream of frame i of the turn, as written; "" for a
// request, a response or a state notification.
func (s *turnFrames) stream(i int) string { return s.streams[s.frames[i].stream] }

// value returns frame i of the turn, decoded.
func (s *turnFrames) value(i int) (any, error) {
	at := int(s.frames[i].at)
	if s.values != nil {
		return s.values[at], nil
	}
	f, err := s.lines.Line(at)
	if err != nil {
		return nil, err
	}
	return parseLine(f.Data), nil
}

// A class says where a frame goes in a turn, judged on the frame as
// written, before normalization.
type class struct {
	requests bool   // a request or response
	state    string // the kind of a state notification, or ""
	answer   bool   // a response with a stopReason, which ends a turn
	what     string // its kind, as FrameKind says it, for the presence rules
}

// classify returns the class of a decoded frame, and the stream of one
// that is not a request, a response or a state notification, with the raw
// key of its tool call or session.
func classify(v any) (c class, stream string) {
	m, ok := v.(map[string]any)
	if !ok {
		return class{}, JunkStream
	}
	id, hasID := m["id"]
	hasID = hasID && id != nil
	if method, ok := m["method"]; ok {
		name, ok := method.(string)
		switch {
		case !ok:
			return class{}, JunkStream
		case hasID:
			return class{requests: true}, ""
		case name != "session/update":
			return class{}, name + " notifications"
		}
		params, _ := m["params"].(map[string]any)
		update, _ := params["update"].(map[string]any)
		kind, _ := update["sessionUpdate"].(string)
		session := rawKey(params["sessionId"])
		if acp.StateUpdate(kind) {
			return class{state: kind}, ""
		}
		return class{}, updateStream(kind, rawKey(update["toolCallId"])) + "\x00" + session
	}
	_, isResult := m["result"]
	_, isError := m["error"]
	if !isResult && !isError {
		return class{}, JunkStream
	}
	result, _ := m["result"].(map[string]any)
	_, answer := result["stopReason"]
	return class{requests: true, answer: answer && isResult}, ""
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

// An item is a value of a stream being built: a normalized value, as
// emitted, or a message chunk whose text is not normalized yet.
type item struct {
	at    int // the frame's index in its turn
	v     json.RawMessage
	chunk *chunk
}

// split returns an item whose chunk had others joined to it early (see
// turnStreams) as the items it was made of.
func (it item) split() []item {
	c := it.chunk
	if c == nil || len(c.pieces) == 0 {
		return []item{it}
	}
	text := c.text.String()
	out := make([]item, 0, len(c.pieces)+1)
	at, start := it.at, 0
	for _, p := range append(c.pieces, piece{start: len(text)}) {
		// The pieces share the first's rest, which finishChunk fills
		// and emit turns into bytes at once.
		part := &chunk{rest: c.rest, key: c.key}
		part.text.WriteString(text[start:p.start])
		out = append(out, item{at: at, chunk: part})
		at, start = p.at, p.start
	}
	return out
}

// stateKey identifies a kind of state notification of a session.
type stateKey struct{ session, kind string }

func (s *State) key() stateKey { return stateKey{s.Session, s.Kind} }

// streamKey identifies a stream of a turn.
type streamKey struct{ name, session string }

// turn normalizes the frames of one turn, updating cum, the session's
// state as it stands, and adding the candidates of the state notifications
// that lead the turn to the previous turn, the last of done.
func (n *Normalizer) turn(seg *turnFrames, emit func(any) json.RawMessage, cum map[stateKey]json.RawMessage, done []Turn) (Turn, error) {
	frames := seg.frames
	turn := Turn{Answered: len(frames) > 0 && seg.class(len(frames)-1).answer}
	// Everything but chunk texts is normalized in this order, which
	// numbers the placeholders: the requests and responses, the streams,
	// the state notifications.
	requests, after, firstRequest, err := n.turnRequests(seg, emit)
	if err != nil {
		return Turn{}, err
	}
	keys, byKey, err := n.turnStreams(seg, emit)
	if err != nil {
		return Turn{}, err
	}
	leading, states, err := n.turnStates(seg, emit)
	if err != nil {
		return Turn{}, err
	}

	// Chunk runs are joined and their texts normalized.
	for _, k := range keys {
		its := byKey[k]
		slices.SortStableFunc(its, func(a, b item) int { return cmp.Compare(a.at, b.at) })
		turn.Streams = append(turn.Streams, Stream{Name: k.name, Session: k.session, Values: n.join(its, emit)})
	}
	if len(requests) > 0 {
		s := Stream{Name: RequestsStream, Values: requests, After: after}
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
		lateState(&done[len(done)-1], leading)
	}
	for _, st := range states {
		cum[st.k] = st.v
	}
	for k, v := range cum {
		turn.State = append(turn.State, State{Kind: k.kind, Session: k.session, Value: v})
	}
	sortState(turn.State)
	return turn, nil
}

// turnRequests normalizes the turn's requests and responses, in order,
// and returns them with the kind of the frame before each (see
// Stream.After) and the index of the first of them among the turn's
// frames (-1 if none).
func (n *Normalizer) turnRequests(seg *turnFrames, emit func(any) json.RawMessage) (requests []json.RawMessage, after []string, first int, err error) {
	first = -1
	kinds := newKindIndex(seg)
	for i, f := range seg.frames {
		if !seg.classes[f.class].requests {
			continue
		}
		if first < 0 {
			first = i
		}
		v, err := seg.value(i)
		if err != nil {
			return nil, nil, 0, err
		}
		requests = append(requests, emit(n.frame(f.side, v)))
		after = append(after, before(seg, kinds, i, seg.class(i).what))
	}
	return requests, after, first, nil
}

// turnStreams normalizes the frames of the turn's streams, a stream at a
// time in order of their first frames, and returns their items by stream,
// keyed as normalized (a user rule may have made two keys one), with the
// keys in order.
func (n *Normalizer) turnStreams(seg *turnFrames, emit func(any) json.RawMessage) ([]streamKey, map[streamKey][]item, error) {
	var order []string // the streams, keyed as written
	groups := map[string][]int{}
	for i := range seg.frames {
		if stream := seg.stream(i); stream != "" {
			if _, ok := groups[stream]; !ok {
				order = append(order, stream)
			}
			groups[stream] = append(groups[stream], i)
		}
	}
	var keys []streamKey
	byKey := map[streamKey][]item{}
	from := map[streamKey]string{} // the stream, as written, of each key's first item
	var mixed []streamKey          // keys of items of several streams as written
	for _, g := range order {
		for _, i := range groups[g] {
			v, err := seg.value(i)
			if err != nil {
				return nil, nil, err
			}
			it, k := n.item(i, seg.frames[i].side, v, emit)
			its, ok := byKey[k]
			if !ok {
				keys = append(keys, k)
				from[k] = g
			} else if from[k] != g && !slices.Contains(mixed, k) {
				mixed = append(mixed, k)
			}
			// A chunk like the one before it in its stream is joined to
			// it now rather than in join: a turn of ten thousand chunks
			// holds one text, not ten thousand.
			if c := it.chunk; c != nil && len(its) > 0 {
				if prev := its[len(its)-1].chunk; prev != nil && prev.key == c.key {
					prev.pieces = append(prev.pieces, piece{at: it.at, start: prev.text.Len()})
					prev.text.WriteString(c.text.String())
					continue
				}
			}
			byKey[k] = append(byKey[k], it)
		}
	}
	// The items of a key that several streams as written make (a rule
	// made their keys one) interleave by their frames' order, which
	// decides which chunks join: those joined early go apart again.
	for _, k := range mixed {
		var its []item
		for _, it := range byKey[k] {
			its = append(its, it.split()...)
		}
		byKey[k] = its
	}
	return keys, byKey, nil
}

// A turnState is a state notification, normalized: its key and its value.
type turnState struct {
	k stateKey
	v json.RawMessage
}

// turnStates normalizes the turn's state notifications, in order, and
// returns them, and those of them that lead the turn (before anything
// else).
func (n *Normalizer) turnStates(seg *turnFrames, emit func(any) json.RawMessage) (leading, states []turnState, err error) {
	lead := true
	for i, f := range seg.frames {
		if seg.classes[f.class].state == "" {
			lead = false
			continue
		}
		d, err := seg.value(i)
		if err != nil {
			return nil, nil, err
		}
		v := n.frame(f.side, d)
		st := turnState{stateKeyOf(v), emit(v)}
		states = append(states, st)
		if lead {
			leading = append(leading, st)
		}
	}
	return leading, states, nil
}

// lateState gives the previous turn, of each kind of state notification
// that leads the next turn, the first such notification as its Late
// value: it may be the previous turn's last word, sent late.
func lateState(prev *Turn, leading []turnState) {
	for _, st := range leading {
		k := st.k
		j := slices.IndexFunc(prev.State, func(s State) bool { return s.key() == k })
		if j < 0 {
			prev.State = append(prev.State, State{Kind: k.kind, Session: k.session})
			j = len(prev.State) - 1
		}
		if prev.State[j].Late == nil {
			prev.State[j].Late = st.v
		}
	}
	sortState(prev.State)
}

func sortState(s []State) {
	slices.SortFunc(s, func(a, b State) int {
		return cmp.Or(cmp.Compare(a.Session, b.Session), cmp.Compare(a.Kind, b.Kind))
	})
}

// item normalizes decoded frame v of side, the i-th of its turn,
// deferring the text of a message chunk, and returns it with the key of
// its stream.
func (n *Normalizer) item(i int, side lane.Lane, v any, emit func(any) json.RawMessage) (item, streamKey) {
	if n.coalesce {
		if c, ok := n.startChunk(side, v); ok {
			return item{at: i, chunk: c}, keyOf(c.rest)
		}
	}
	v = n.frame(side, v)
	return item{at: i, v: emit(v)}, keyOf(v)
}

// join returns the values of a stream's items, runs of chunks alike but
// for their text joined, and their texts normalized.
func (n *Normalizer) join(items []item, emit func(any) json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(items))
	var group *chunk
	flush := func() {
		if group != nil {
			out = append(out, emit(n.finishChunk(group)))
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
		out = append(out, it.v)
	}
	flush()
	return out
}

// keyOf returns the key of the stream of a normalized value (of a chunk,
// without its text): its stream's name and session.
func keyOf(v any) streamKey {
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

// strict normalizes frames in their order, joining adjacent chunks, and
// puts each value.
func (n *Normalizer) strict(lines lane.Lines, emit func(any) json.RawMessage, put func(json.RawMessage)) error {
	var group *chunk
	flush := func() {
		if group != nil {
			put(emit(n.finishChunk(group)))
			group = nil
		}
	}
	for i := range lines.Len() {
		f, err := lines.Line(i)
		if err != nil {
			return err
		}
		v := parseLine(f.Data)
		if f.Lane == lane.Editor && n.omitEditor {
			// Its request id is numbered as the editor sent it.
			if m, ok := v.(map[string]any); ok && m["method"] != nil && m["id"] != nil {
				n.rpcID(0, m["id"])
			}
			continue
		}
		if n.coalesce {
			if c, ok := n.startChunk(f.Lane, v); ok {
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
		v = n.frame(f.Lane, v)
		flush()
		put(emit(v))
	}
	flush()
	return nil
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

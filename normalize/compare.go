package normalize

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/acptap/acptap/mismatch"
)

// A Comparison is the outcome of Compare.
type Comparison struct {
	// Want and Got are the two transcripts as lists of JSON values, as
	// Transcript.Values lists them, but for a diff: their streams in one
	// order, and the state at each turn's end the value the two agree on,
	// shown on both sides where they do not.
	Want, Got []json.RawMessage
	// Diff is the first difference, nil when the transcripts are equal.
	Diff *Difference
}

// A Difference is the first place where two transcripts differ.
type Difference struct {
	// Turn is the turn's number in its session (see Turn.Session), from
	// 1; 0 under Strict. Answered says whether it ends with an answer (in
	// want, or in got if want lacks the turn).
	Turn     int
	Answered bool
	// Stream and Session name the stream (see Stream), or for a
	// difference in the state at the turn's end (State true), the kind
	// of state notification and its session. A stream of no session
	// (the requests and responses) in a turn of a second session or a
	// later one has the turn's session. Stream is "" under Strict.
	Stream  string
	Session string
	State   bool
	// Index is the position of the differing value in the stream, from
	// 1; 0 for the state, and for a stream one side lacks altogether
	// (WantLen or GotLen is 0).
	Index int
	// WantLen and GotLen are how many values the stream has on each side.
	WantLen, GotLen int
	// Mismatch is the first differing value inside the values at Index:
	// its Path ("$.params.update.status"), "$" when they are not alike
	// enough to compare member by member (an update of another kind, a
	// request of another method) or one side lacks a value; its Recorded
	// value, want's, and Live, got's, decoded, Missing for one a side
	// lacks.
	mismatch.Mismatch
	// MovedTo is, when want's value at Index stands elsewhere in got's
	// stream, its position there (from 1), else 0; MovedFrom is, when
	// got's value at Index stands elsewhere in want's stream, its
	// position there.
	MovedTo, MovedFrom int
	// Flat is the path of the difference in Comparison.Want
	// ("$[7].params.update.status"), or in Comparison.Got for a value
	// only got has; "" if neither lists it.
	Flat string
}

// Field returns the path of the difference inside the value as a report
// shows it: relative to the update of a session/update ("status",
// "content.text"), relative to the value otherwise ("result.stopReason",
// "params.toolCall.title"), "" for the whole value.
func (d *Difference) Field() string {
	p := d.Path
	if rest, ok := strings.CutPrefix(p, "$.params.update"); ok && d.Stream != RequestsStream && d.Stream != JunkStream && (rest == "" || rest[0] == '.' || rest[0] == '[') {
		p = "$" + rest
	}
	p = strings.TrimPrefix(p, "$")
	return strings.TrimPrefix(p, ".")
}

// Compare compares two transcripts, want (as recorded) and got (as
// replayed), normalized by Normalizers with the same options, and returns
// the first difference, if any, and both listed for a diff.
//
// Under ByStream the turns are compared in order, and in each turn the
// streams of want in order, then those only got has, by name and
// session: the values of a stream one by one; then the state at the
// turn's end, each kind by its value (see State: equal when both have the
// same value before the answer, or when one has the value that the other
// got right after it, or when one has the kind's first value and the
// other has none yet but gets that value in a later turn); then the
// requests and responses. Under Strict the one stream
// of each is compared value by value.
//
// In a turn that both answered with stopReason "cancelled", the last
// value of a message or thought stream may have more text on one side
// than on the other (see cutShort): how far an agent streams between the
// editor's session/cancel and acting on it is a race. The text both have
// must be the same.
func Compare(want, got *Transcript) Comparison {
	c := &comparison{order: want.Order, sides: [2]*Transcript{want, got}}
	prevW := map[stateKey]json.RawMessage{}
	prevG := map[stateKey]json.RawMessage{}
	numbers := [2][]int{turnNumbers(want), turnNumbers(got)}
	for i := range max(len(want.Turns), len(got.Turns)) {
		tw, tg := turnAt(want, i), turnAt(got, i)
		side, t := 0, tw
		if i >= len(want.Turns) {
			side, t = 1, tg
		}
		c.turn, c.session, c.answered = numbers[side][i], t.Session, t.Answered
		// The requests and responses but the answer are listed first, as
		// Values lists them, and compared last.
		rw, aw := tw.requests()
		rg, ag := tg.requests()
		c.cancelled = c.order != Strict && stopReason(aw) == "cancelled" && stopReason(ag) == "cancelled"
		wAt, gAt := len(c.want), len(c.got)
		c.want, c.got = append(c.want, rw...), append(c.got, rg...)
		keys, values := streamKeys(tw, tg)
		for _, k := range keys {
			c.stream(k, values[k][0], values[k][1])
		}
		c.states(tw, tg, prevW, prevG)
		if aw != nil {
			c.want = append(c.want, aw)
		}
		if ag != nil {
			c.got = append(c.got, ag)
		}
		if c.diff == nil {
			c.compareRequests(rw, aw, rg, ag, wAt, gAt)
		}
	}
	return Comparison{Want: c.want, Got: c.got, Diff: c.diff}
}

// comparison is the state of a Compare.
type comparison struct {
	order     Order
	turn      int    // the current turn's number in its session
	session   string // the current turn's session (Turn.Session)
	answered  bool
	cancelled bool           // both sides answered the turn with stopReason cancelled
	sides     [2]*Transcript // want and got
	want, got []json.RawMessage
	diff      *Difference
}

// turnNumbers returns the number of each turn of t in its session, from
// 1.
func turnNumbers(t *Transcript) []int {
	numbers := make([]int, len(t.Turns))
	for i := range t.Turns {
		numbers[i] = 1
		if i > 0 && t.Turns[i-1].Session == t.Turns[i].Session {
			numbers[i] = numbers[i-1] + 1
		}
	}
	return numbers
}

// turnAt returns turn i of t, or for a turn it lacks, an empty one with
// the state of its last.
func turnAt(t *Transcript, i int) *Turn {
	if i < len(t.Turns) {
		return &t.Turns[i]
	}
	empty := &Turn{}
	if k := len(t.Turns); k > 0 {
		for _, st := range t.Turns[k-1].State {
			empty.State = append(empty.State, State{Kind: st.Kind, Session: st.Session, Value: or(st.Late, st.Value)})
		}
	}
	return empty
}

// streamKeys returns the keys of the streams of two turns but the
// requests and responses, want's in order, then those only got has, and
// the values of each on each side.
func streamKeys(tw, tg *Turn) ([]streamKey, map[streamKey][2][]json.RawMessage) {
	var keys []streamKey
	values := map[streamKey][2][]json.RawMessage{}
	for side, t := range []*Turn{tw, tg} {
		for _, s := range t.Streams {
			if s.requests() {
				continue
			}
			k := streamKey{s.Name, s.Session}
			v, ok := values[k]
			if !ok {
				keys = append(keys, k)
			}
			v[side] = s.Values
			values[k] = v
		}
	}
	return keys, values
}

// stream lists and compares one stream of the current turn.
func (c *comparison) stream(k streamKey, w, g []json.RawMessage) {
	wAt, gAt := len(c.want), len(c.got)
	c.want, c.got = append(c.want, w...), append(c.got, g...)
	if c.diff != nil {
		return
	}
	c.compareValues(k, w, g, wAt, gAt, nil)
}

// compareRequests compares the requests and responses of a turn, listed
// in two places: rw at wAt, the answer aw last.
func (c *comparison) compareRequests(rw []json.RawMessage, aw json.RawMessage, rg []json.RawMessage, ag json.RawMessage, wAt, gAt int) {
	w, wIdx := joined(rw, aw, wAt, len(c.want)-1)
	g, gIdx := joined(rg, ag, gAt, len(c.got)-1)
	name := RequestsStream
	if c.order == Strict {
		name = ""
	}
	c.compareValues(streamKey{name: name}, w, g, -1, -1, [][]int{wIdx, gIdx})
}

// joined returns the requests and responses of a turn and where each is
// listed: rs from at on, the answer a at last.
func joined(rs []json.RawMessage, a json.RawMessage, at, last int) ([]json.RawMessage, []int) {
	vs := slices.Clone(rs)
	idx := make([]int, len(rs), len(rs)+1)
	for i := range idx {
		idx[i] = at + i
	}
	if a != nil {
		vs = append(vs, a)
		idx = append(idx, last)
	}
	return vs, idx
}

// compareValues compares the values of a stream, listed in c.want from
// wAt and c.got from gAt, or where idx says.
func (c *comparison) compareValues(k streamKey, w, g []json.RawMessage, wAt, gAt int, idx [][]int) {
	where := func(side int, i int) int {
		if idx != nil {
			return idx[side][i]
		}
		return [2]int{wAt, gAt}[side] + i
	}
	d := &Difference{Stream: k.name, Session: cmp.Or(k.session, c.session), WantLen: len(w), GotLen: len(g)}
	if c.order != Strict {
		d.Turn, d.Answered = c.turn, c.answered
	}
	switch {
	case len(w) == 0 && len(g) == 0:
		return
	case len(w) == 0 && c.order != Strict:
		d.Path, d.Recorded, d.Live = "$", Missing{}, decodeValue(g[0])
		d.Flat = flat(where(1, 0), "$")
		c.diff = d
		return
	case len(g) == 0 && c.order != Strict:
		d.Path, d.Recorded, d.Live = "$", decodeValue(w[0]), Missing{}
		d.Flat = flat(where(0, 0), "$")
		c.diff = d
		return
	}
	for i := range max(len(w), len(g)) {
		d.Index = i + 1
		switch {
		case i >= len(w):
			d.Path, d.Recorded, d.Live = "$", Missing{}, decodeValue(g[i])
			d.Flat = flat(where(1, i), "$")
		case i >= len(g):
			d.Path, d.Recorded, d.Live = "$", decodeValue(w[i]), Missing{}
			d.Flat = flat(where(0, i), "$")
		default:
			if sameJSON(w[i], g[i]) {
				continue
			}
			if c.cancelled && chunkStream(k.name) && i == len(w)-1 && i == len(g)-1 && cutShort(w[i], g[i]) {
				continue
			}
			d.Path, d.Recorded, d.Live = valueDifference(w[i], g[i])
			d.Flat = flat(where(0, i), d.Path)
			d.MovedTo = positionOf(g, w[i], i)
			d.MovedFrom = positionOf(w, g[i], i)
		}
		c.diff = d
		return
	}
}

// positionOf returns the position (from 1) of v in vs other than at index
// skip, the nearest to it, or 0.
func positionOf(vs []json.RawMessage, v json.RawMessage, skip int) int {
	best := -1
	for j, x := range vs {
		if j != skip && sameJSON(x, v) && (best < 0 || abs(j-skip) < abs(best-skip)) {
			best = j
		}
	}
	return best + 1
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// states lists and compares the state at the current turn's end.
func (c *comparison) states(tw, tg *Turn, prevW, prevG map[stateKey]json.RawMessage) {
	var keys []stateKey
	states := [2]map[stateKey]State{{}, {}}
	for side, t := range []*Turn{tw, tg} {
		for _, st := range t.State {
			k := st.key()
			if _, ok := states[0][k]; !ok {
				if _, ok := states[1][k]; !ok {
					keys = append(keys, k)
				}
			}
			states[side][k] = st
		}
	}
	slices.SortFunc(keys, func(a, b stateKey) int {
		if a.session != b.session {
			return strings.Compare(a.session, b.session)
		}
		return strings.Compare(a.kind, b.kind)
	})
	for _, k := range keys {
		vw, vg, agree := choose(stateOr(states[0], k), stateOr(states[1], k))
		if !agree && (vw == nil) != (vg == nil) {
			// The first of its kind on one side only: it may come later
			// on the other, as agents send them from background tasks.
			if vw != nil {
				agree = sameJSON(vw, c.firstAfter(1, k))
			} else {
				agree = sameJSON(vg, c.firstAfter(0, k))
			}
		}
		var wAt, gAt = -1, -1
		if vw != nil && (!sameJSON(vw, prevW[k]) || !agree) {
			wAt = len(c.want)
			c.want = append(c.want, vw)
			prevW[k] = vw
		}
		if vg != nil && (!sameJSON(vg, prevG[k]) || !agree) {
			gAt = len(c.got)
			c.got = append(c.got, vg)
			prevG[k] = vg
		}
		if agree || c.diff != nil {
			continue
		}
		d := &Difference{Stream: k.kind, Session: k.session, State: true, Turn: c.turn, Answered: c.answered, Mismatch: mismatch.Mismatch{Path: "$", Recorded: Missing{}, Live: Missing{}}}
		switch {
		case vw != nil && vg != nil:
			d.Path, d.Recorded, d.Live = valueDifference(vw, vg)
		case vw != nil:
			d.Recorded = decodeValue(vw)
		case vg != nil:
			d.Live = decodeValue(vg)
		}
		switch {
		case wAt >= 0:
			d.Flat = flat(wAt, d.Path)
		case gAt >= 0:
			d.Flat = flat(gAt, d.Path)
		}
		c.diff = d
	}
}

// stateOr returns state k of a turn's states, with no value if it is not
// there.
// firstAfter returns the first value of state kind k on side (0 want, 1
// got) in the turns after the current one, nil if none comes.
func (c *comparison) firstAfter(side int, k stateKey) json.RawMessage {
	turns := c.sides[side].Turns
	for i := c.turn; i < len(turns); i++ {
		for _, st := range turns[i].State {
			if st.key() != k {
				continue
			}
			if st.Value != nil {
				return st.Value
			}
			if st.Late != nil {
				return st.Late
			}
		}
	}
	return nil
}

func stateOr(states map[stateKey]State, k stateKey) State {
	if st, ok := states[k]; ok {
		return st
	}
	return State{Kind: k.kind, Session: k.session}
}

// choose returns the value of a state at a turn's end that want and got
// agree on, twice, and true: both have the same value before the answer,
// or one has the value the other got right after it. When they do not
// agree, it returns the value of each, the one right after the answer if
// it had none before, and false.
func choose(w, g State) (json.RawMessage, json.RawMessage, bool) {
	switch {
	case sameJSON(w.Value, g.Value):
		return w.Value, g.Value, true
	case g.Late != nil && sameJSON(w.Value, g.Late):
		return w.Value, g.Late, true
	case w.Late != nil && sameJSON(w.Late, g.Value):
		return w.Late, g.Value, true
	}
	return or(w.Value, w.Late), or(g.Value, g.Late), false
}

// or returns a if it is not nil, else b.
func or(a, b json.RawMessage) json.RawMessage {
	if a != nil {
		return a
	}
	return b
}

// valueDifference returns where two different values differ: member by
// member when they are alike (the same kind of message: see kindOf), else
// as a whole. An update's status and title are compared before its other
// members: they say most about it.
func valueDifference(a, b json.RawMessage) (string, any, any) {
	va, vb := decodeValue(a), decodeValue(b)
	if kindOf(va) != kindOf(vb) {
		return "$", va, vb
	}
	for _, key := range []string{"status", "title"} {
		x, okA := member(va, "params", "update", key)
		y, okB := member(vb, "params", "update", key)
		if okA || okB {
			if path, x, y, differ := FirstDifference(orMissing(x, okA), orMissing(y, okB)); differ {
				return "$.params.update." + key + strings.TrimPrefix(path, "$"), x, y
			}
		}
	}
	path, x, y, _ := FirstDifference(va, vb)
	return path, x, y
}

// member returns the value at a chain of keys of a decoded value.
func member(v any, keys ...string) (any, bool) {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

func orMissing(v any, ok bool) any {
	if !ok {
		return Missing{}
	}
	return v
}

// kindOf says what kind of message a decoded value is: the method and
// update kind of a notification, the method of a request, "response" or
// "error", or "" for anything else.
func kindOf(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if method, ok := m["method"].(string); ok {
		params, _ := m["params"].(map[string]any)
		update, _ := params["update"].(map[string]any)
		kind, _ := update["sessionUpdate"].(string)
		if _, isRequest := m["id"]; isRequest {
			return "request " + method
		}
		return "notification " + method + " " + kind
	}
	if _, ok := m["error"]; ok {
		return "error"
	}
	if _, ok := m["result"]; ok {
		return "response"
	}
	return ""
}

func decodeValue(v json.RawMessage) any {
	x, ok := decode(v)
	if !ok {
		return string(v)
	}
	return x
}

// flat returns the path of a value listed at index i, path inside it.
func flat(i int, path string) string {
	return "$[" + strconv.Itoa(i) + "]" + strings.TrimPrefix(path, "$")
}

// stopReason returns the result.stopReason of an answer, "" if none.
func stopReason(answer json.RawMessage) string {
	var a struct {
		Result struct {
			StopReason string `json:"stopReason"`
		} `json:"result"`
	}
	if answer == nil || json.Unmarshal(answer, &a) != nil {
		return ""
	}
	return a.Result.StopReason
}

// chunkStream reports whether a stream is of message or thought chunks,
// whose text an agent streams from the model.
func chunkStream(name string) bool {
	return name == "agent message" || name == "agent thought"
}

// cutShort reports whether two chunk notifications are alike but for
// their text, one of which begins with the other: the same answer,
// streamed for longer on one side. In a turn the editor cancelled, how
// much an agent streams between the session/cancel and acting on it is a
// race against the model's stream (the driver sends the cancel once the
// recorded text before it has come again), so the last run of a chunk
// stream may be cut anywhere after that.
func cutShort(a, b json.RawMessage) bool {
	va, vb := decodeValue(a), decodeValue(b)
	ta, okA := textOf(va)
	tb, okB := textOf(vb)
	if !okA || !okB || !(strings.HasPrefix(ta, tb) || strings.HasPrefix(tb, ta)) {
		return false
	}
	setText(va, "")
	setText(vb, "")
	_, _, _, differ := FirstDifference(va, vb)
	return !differ
}

// textOf returns params.update.content.text of a decoded notification.
func textOf(v any) (string, bool) {
	c, ok := member(v, "params", "update", "content")
	if !ok {
		return "", false
	}
	t, ok := member(c, "text")
	s, isString := t.(string)
	return s, ok && isString
}

// setText sets params.update.content.text of a decoded notification that
// has one.
func setText(v any, text string) {
	if c, ok := member(v, "params", "update", "content"); ok {
		if m, ok := c.(map[string]any); ok {
			m["text"] = text
		}
	}
}

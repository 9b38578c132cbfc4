package normalize

import (
	"encoding/json"
	"maps"
	"strconv"

	"github.com/acptap/acptap/lane"
)

// sessionTable follows the sessions of one ACP stream as it is read: to
// which session each frame belongs, by the session ids frames name and by
// the requests they answer. While reading, a session is known by a ref,
// handed out at its first sight: the editor's session/new request, or a
// frame naming an id not seen before (an agent may announce a session
// before it answers the session/new that made it, and an editor may load
// a session made before). Once all is read, order numbers the sessions:
// first as the editor asked for them (its session/new requests, not
// their answers, which may come out of order), then the others in the
// order of first sight.
type sessionTable struct {
	refs  map[string]int // a session id's raw key → its ref
	ids   []any          // ref r's session id, decoded, at r-1; nil for a session/new not yet answered
	alias []int          // ref r stands for ref alias[r-1] if not 0 (see resolve)
	news  []int          // the refs of the editor's session/new requests, in order
	// open are the requests not yet answered, by id: [0] those the
	// editor sent, [1] the agent's.
	open [2]idMap[request]
	// methods holds each method name once, for open.
	methods map[string]string
	// sent, if not nil, is called with the id of each of the editor's
	// requests, in the order sent.
	sent func(id any)
	// last is the ref of the last frame that had one.
	last int
}

// request is what an open request asked, and the ref of its session.
type request struct {
	method string
	ref    int
}

func newSessionTable() *sessionTable {
	return &sessionTable{refs: map[string]int{}, methods: map[string]string{}}
}

// An idMap maps JSON-RPC ids, decoded (a string or a json.Number), to V.
// Integer ids, the most common, are held by value: a stream of a hundred
// thousand requests never answered holds no string for each.
type idMap[V any] struct {
	ints map[int64]V
	keys map[string]V // the others, by rawKey
}

// intID returns the value of an integer id.
func intID(id any) (int64, bool) {
	n, ok := id.(json.Number)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	return v, err == nil && strconv.FormatInt(v, 10) == string(n)
}

func (m *idMap[V]) get(id any) (V, bool) {
	if v, ok := intID(id); ok {
		x, ok := m.ints[v]
		return x, ok
	}
	x, ok := m.keys[rawKey(id)]
	return x, ok
}

func (m *idMap[V]) set(id any, x V) {
	if v, ok := intID(id); ok {
		if m.ints == nil {
			m.ints = make(map[int64]V)
		}
		m.ints[v] = x
		return
	}
	if m.keys == nil {
		m.keys = make(map[string]V)
	}
	m.keys[rawKey(id)] = x
}

func (m *idMap[V]) delete(id any) {
	if v, ok := intID(id); ok {
		delete(m.ints, v)
		return
	}
	delete(m.keys, rawKey(id))
}

// refOf returns the ref of a session id, handing out the next the first
// time.
func (t *sessionTable) refOf(id any) int {
	k := rawKey(id)
	if r, ok := t.refs[k]; ok {
		return r
	}
	r := t.newRef(id)
	t.refs[k] = r
	return r
}

func (t *sessionTable) newRef(id any) int {
	t.ids = append(t.ids, id)
	t.alias = append(t.alias, 0)
	return len(t.ids)
}

// resolve returns the ref that r stands for: a session/new request's ref
// stands for the ref its session had before the answer named it, if it
// was seen before; one answered with an error stands for none (0).
func (t *sessionTable) resolve(r int) int {
	for r > 0 && t.alias[r-1] != 0 {
		r = t.alias[r-1]
	}
	return max(r, 0)
}

// answered takes the answer to the session/new request of ref r: its
// session's id, or nil for an error.
func (t *sessionTable) answered(r int, id any) {
	if id == nil {
		t.alias[r-1] = -1
		return
	}
	k := rawKey(id)
	if seen, ok := t.refs[k]; ok {
		t.alias[r-1] = seen
		return
	}
	t.refs[k] = r
	t.ids[r-1] = id
}

// place reads decoded frame v, written by side, of class c, and returns
// the ref of its session (0 for none) and whether it ends a turn of that
// session: an answer to session/prompt (c.answer), or to session/load,
// whose history the agent sends before it answers.
//
// A request's session is the one its params name; a session/new request
// of the editor's is the session it makes. A response belongs to its
// request's session. Without the request (a stream of the agent's frames
// only), a response belongs to the session its result names, and an
// answer to session/prompt to the session of the frame before it.
func (t *sessionTable) place(side lane.Lane, v any, c class) (ref int, answer bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return 0, false
	}
	id, hasID := m["id"]
	hasID = hasID && id != nil
	params, _ := m["params"].(map[string]any)
	sender := 0 // of the request, for a request or a response
	if side != lane.Editor {
		sender = 1
	}
	answer = c.answer
	switch method, isCall := m["method"].(string); {
	case isCall && hasID:
		switch {
		case method == "session/new" && side == lane.Editor:
			ref = t.newRef(nil)
			t.news = append(t.news, ref)
		case params["sessionId"] != nil:
			ref = t.refOf(params["sessionId"])
		}
		name, ok := t.methods[method]
		if !ok {
			name = method
			t.methods[method] = name
		}
		t.open[sender].set(id, request{method: name, ref: ref})
		if side == lane.Editor && t.sent != nil {
			t.sent(id)
		}
	case isCall:
		if params["sessionId"] != nil {
			ref = t.refOf(params["sessionId"])
		}
	case hasID && c.requests:
		result, isResult := m["result"].(map[string]any)
		// The request was sent by the other side; in a stream whose
		// sides are lost (a normalized one, read again), by either.
		from := 1 - sender
		r, ok := t.open[from].get(id)
		if !ok {
			from = sender
			r, ok = t.open[from].get(id)
		}
		switch {
		case ok:
			t.open[from].delete(id)
			ref = r.ref
			if r.method == "session/new" && ref > 0 && t.ids[ref-1] == nil && t.alias[ref-1] == 0 {
				t.answered(ref, result["sessionId"])
			}
			answer = answer || r.method == "session/load" && isResult
		case isResult && result["sessionId"] != nil:
			ref = t.refOf(result["sessionId"])
		case answer:
			ref = t.last
		}
	}
	if ref > 0 {
		t.last = ref
	}
	return ref, answer
}

// order returns, once the stream is read, the slot of each ref (index
// r-1), numbered from 1 as the sessions are ordered (the editor's
// session/new requests first, then first sight), 0 for a ref that stands
// for no session; and the sessions' ids by slot (index slot-1), nil for
// one never named.
func (t *sessionTable) order() (slots []int, ids []any) {
	slotOf := map[int]int{} // a resolved ref's slot
	take := func(r int) {
		if r = t.resolve(r); r > 0 && slotOf[r] == 0 {
			ids = append(ids, t.ids[r-1])
			slotOf[r] = len(ids)
		}
	}
	for _, r := range t.news {
		take(r)
	}
	for r := range t.ids {
		take(r + 1)
	}
	slots = make([]int, len(t.ids))
	for x := range t.ids {
		slots[x] = slotOf[t.resolve(x+1)]
	}
	return slots, ids
}

// linkKey returns the key under which a session id is linked to its
// placeholder (see Normalizer.link).
func linkKey(id any) (string, bool) {
	switch x := id.(type) {
	case string:
		return valueKey(x), x != "" && !isPlaceholder(x)
	case json.Number:
		return "n:" + string(x), true
	}
	return "", false
}

// scope is the numbering of placeholders at one point: the links, the
// counts and the agent's request ids.
type scope struct {
	links  map[string]string
	counts map[string]int
	rpc    rpcIDs
}

// scope returns the numbering as it stands.
func (n *Normalizer) scope() scope {
	return scope{links: n.links, counts: n.counts, rpc: n.rpc[1]}
}

// enter starts numbering from a copy of sc: what is linked from here on
// is linked in the copy only. Each session of a stream is normalized in a
// copy of the connection's numbering, so that its toolCallIds, terminal
// ids and the agent's request ids are numbered within it, whatever the
// other sessions did; the session ids themselves are linked before.
// The editor's request ids stay shared: they are numbered in the order
// the editor sent them.
func (n *Normalizer) enter(sc scope) {
	n.links = maps.Clone(sc.links)
	n.counts = maps.Clone(sc.counts)
	n.rpc[1] = sc.rpc.clone()
}

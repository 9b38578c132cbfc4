package normalize

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"net/http"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/acptap/acptap/internal/jsonscan"
)

// Requests normalizes LLM requests as a fresh Normalizer of its Options
// each, New(opts).Request(...), and remembers what the parts of each body
// became: the elements of its top-level arrays ("messages", "input",
// "contents", "tools", ...) and its other large members. A request that
// repeats parts of an earlier one, as an LLM conversation is sent again
// whole with each turn, normalizes only what it adds, so the time a
// request takes grows with what is new in it rather than with the length
// of the conversation. The results are the same as without it.
//
// A remembered part is used again only where it normalizes alike: its
// bytes are the same and the values it links to placeholders (ids, UUIDs)
// get the same placeholders in the request at hand. Share one Requests
// between the recorded requests of a replay and the live ones, so that
// the parts both have in common are the same values and their
// comparison is quick. The values returned must not be changed. Safe for
// concurrent use.
type Requests struct {
	opts Options

	mu    sync.Mutex
	parts map[uint64][]*part // by partKey
	calls uint64             // Request calls so far: the clock of part.used
	hits  int                // parts used again, for tests
}

// NewRequests returns a Requests normalizing with opts.
func NewRequests(opts Options) *Requests {
	return &Requests{opts: opts, parts: make(map[uint64][]*part)}
}

// Request is New(opts).Request(method, rawURL, header, body).
func (r *Requests) Request(method, rawURL string, header http.Header, body []byte) any {
	r.mu.Lock()
	r.calls++
	if r.calls%sweepEvery == 0 {
		r.sweep()
	}
	r.mu.Unlock()
	n := New(r.opts)
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.request(method, rawURL, header, body, r)
}

const (
	// minPart is the size of the smallest part worth remembering: less
	// than a short chat message.
	minPart = 24
	// keepCalls is how many Request calls a part is kept unused: enough
	// for the requests of a few queues to interleave (a main turn, a
	// title call, the recorded and the live side of each). A sweep visits
	// every part, about one per message of the conversation: made every
	// keepCalls calls, it costs a call a 64th of that.
	keepCalls  = 64
	sweepEvery = keepCalls
	// maxTwins bounds the parts remembered for the same bytes, which
	// differ in the placeholders they link to.
	maxTwins = 4
)

// sweep forgets the parts unused for keepCalls calls. r.mu is held.
func (r *Requests) sweep() {
	for k, ps := range r.parts {
		ps = slices.DeleteFunc(ps, func(p *part) bool { return p.used+keepCalls < r.calls })
		if len(ps) == 0 {
			delete(r.parts, k)
		} else {
			r.parts[k] = ps
		}
	}
}

// A part is a remembered part of a request body: its bytes, what it
// normalized to, and the placeholders it linked.
type part struct {
	key     string // the member's normalized key; "" for an array element
	inUsage bool   // an element of a usage report
	raw     []byte
	out     any
	refs    refs
	used    uint64 // Requests.calls when last used
}

// refs are the linked values a part looked up, in the order it first
// looked each up, with what they were; counts are, for each kind it
// handed out new placeholders of, the count before and after.
type refs struct {
	looked []ref
	seen   map[string]bool
	counts map[string][2]int
}

type ref struct {
	key, placeholder string
	isNew            bool
}

// note records a lookup of link, made with the count of kind after it.
func (t *refs) note(kind, key, placeholder string, isNew bool, count int) {
	if t.seen[key] {
		return
	}
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	t.seen[key] = true
	t.looked = append(t.looked, ref{key, placeholder, isNew})
	if isNew {
		c, ok := t.counts[kind]
		if !ok {
			c[0] = count - 1
		}
		c[1] = count
		if t.counts == nil {
			t.counts = map[string][2]int{}
		}
		t.counts[kind] = c
	}
}

// holds reports whether the lookups of t give the same placeholders in
// the state of n: each value seen before linked alike, each new one
// still new, and the counts of the kinds handed out where they were.
func (t *refs) holds(n *Normalizer) bool {
	for _, l := range t.looked {
		p, ok := n.links[l.key]
		if l.isNew == ok || ok && p != l.placeholder {
			return false
		}
	}
	for kind, c := range t.counts {
		if n.counts[kind] != c[0] {
			return false
		}
	}
	return true
}

// apply links in n what the part linked when it was normalized.
func (t *refs) apply(n *Normalizer) {
	for _, l := range t.looked {
		if l.isNew {
			n.links[l.key] = l.placeholder
		}
	}
	for kind, c := range t.counts {
		n.counts[kind] = c[1]
	}
}

var seed = maphash.MakeSeed()

func partKey(key string, raw []byte, inUsage bool) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(key)
	if inUsage {
		h.WriteByte(1)
	} else {
		h.WriteByte(0)
	}
	h.Write(raw)
	return h.Sum64()
}

// bodyParts normalizes a JSON object body as n.value(decode(b)) would,
// with the parts r remembers. ok is false for a body that is not a JSON
// object, which the caller normalizes as usual.
func (n *Normalizer) bodyParts(b []byte, r *Requests) (any, bool) {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	// As decoding into a map does: the last of equal keys wins.
	members := map[string][]byte{}
	valid := jsonscan.ValidMembers(b, func(k, v []byte) bool {
		var key string
		if bytes.IndexByte(k, '\\') < 0 && utf8.Valid(k) {
			key = string(k[1 : len(k)-1])
		} else if json.Unmarshal(k, &key) != nil {
			// (encoding/json also replaces bytes that are not UTF-8.)
			return true // cannot happen in valid JSON
		}
		members[key] = v
		return true
	})
	if !valid {
		return nil, false
	}
	out := make(map[string]any, len(members))
	for _, k := range sortedKeys(members) {
		nk := n.str(k, fromWire)
		out[nk] = n.memberParts(nk, members[k], r)
	}
	return out, true
}

// memberParts normalizes the raw value of a top-level member of a body as
// n.member(key, decode(raw), fromWire, false) would.
func (n *Normalizer) memberParts(key string, raw []byte, r *Requests) any {
	if raw[0] != '[' {
		return n.remembered(key, raw, false, r)
	}
	// An array is normalized element by element, nothing depending on
	// its key but whether it is a usage report (see member).
	inUsage := n.defaults && usageKey(foldKey(key))
	out := []any{}
	jsonscan.Elements(raw, func(e []byte) bool {
		out = append(out, n.remembered("", e, inUsage, r))
		return true
	})
	return out
}

// remembered normalizes raw, a member's value (key set) or an array
// element (key ""), with a part r remembers if one holds, else as usual,
// then remembers it.
func (n *Normalizer) remembered(key string, raw []byte, inUsage bool, r *Requests) any {
	normal := func(t *refs) any {
		n.refs = t
		defer func() { n.refs = nil }()
		v, _ := decode(raw) // raw is valid: bodyParts checked the body
		if key != "" {
			return n.member(key, v, fromWire, false)
		}
		return n.value(v, fromWire, inUsage)
	}
	if len(raw) < minPart {
		return normal(nil)
	}
	h := partKey(key, raw, inUsage)
	r.mu.Lock()
	for _, p := range r.parts[h] {
		if p.key == key && p.inUsage == inUsage && bytes.Equal(p.raw, raw) && p.refs.holds(n) {
			p.used = r.calls
			r.hits++
			r.mu.Unlock()
			p.refs.apply(n)
			return n.own(p.out)
		}
	}
	r.mu.Unlock()
	t := &refs{}
	out := normal(t)
	t.seen = nil
	p := &part{key: key, inUsage: inUsage, raw: bytes.Clone(raw), out: out, refs: *t}
	r.mu.Lock()
	p.used = r.calls
	ps := r.parts[h]
	if len(ps) >= maxTwins {
		ps = ps[1:]
	}
	r.parts[h] = append(ps, p)
	r.mu.Unlock()
	return n.own(out)
}

// own returns a remembered value for a request: itself, unless user rules
// will rewrite the request in place, then a copy.
func (n *Normalizer) own(v any) any {
	if len(n.rules) == 0 {
		return v
	}
	return deepCopy(v)
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

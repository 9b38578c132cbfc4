package proxy

import (
	"bytes"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/httpcoding"
	"github.com/acptap/acptap/internal/wire"
)

// record is the recording of one exchange. The forwarding path feeds it
// what it sees and never waits for it, nor shares the CPU with it while
// the exchange waits for its first response bytes: decoding, redaction and
// encoding run on goroutines of their own, the request's once the
// exchange has been in flight for inFlightDelay (or with the end's, if
// sooner), the end's within endDelay of it, and the response body is kept
// as received until then. A nil *record records nothing.
type record struct {
	t     *Tap
	id    uint64        // the Recorder's, from Begin
	at    time.Duration // when the request arrived, since Config.Start
	start time.Time
	u     *url.URL          // the upstream URL, for notices
	x     exchange.Exchange // written by the forwarding path until end, then by finish

	// The request as sent upstream, which nothing changes once sent: the
	// recording reads and copies them off the forwarding path.
	sentHeader http.Header
	sentBody   []byte

	// due is set by whichever of timer and end comes first, which has
	// the request recorded; end stops timer.
	due   atomic.Bool
	timer *time.Timer

	reqDone   chan struct{} // closed once the request is decoded, after Started if it is called
	reqHeader http.Header   // the request header; set before reqDone is closed
	reqBody   []byte        // the decoded request body; set before reqDone is closed
	reqEnc    string        // its encoding as recorded; set before reqDone is closed

	respHeader http.Header // the response's header, copied into x by finish
	body       arena       // the response body as received
	ends       []chunkEnd  // the chunks of body
}

// inFlightDelay is how long an exchange is in flight before its request is
// recorded (Recorder.Started). Until then the recording does nothing that
// competes for the CPU with forwarding the request and the first response
// bytes, and an exchange that ends sooner, as non-streaming ones and local
// streams often do, is recorded by Ended alone, once: encoding a
// conversation-sized request twice was a third of the recording's CPU. A
// recording that stops within it loses the exchange, as one stopping
// before a commit did anyway.
const inFlightDelay = 10 * time.Millisecond

// finalEventSent reports whether the decoded body the agent received holds
// a complete response of a known wire format: one that says how it
// stopped, and ends at an event boundary.
func finalEventSent(x *exchange.Exchange) bool {
	if x.Status < 200 || x.Status > 299 || x.ResponseEncoding == "" && x.ResponseHeaders.Get("Content-Encoding") != "" {
		return false // not decoded: cannot tell
	}
	f := wire.Detect(x.Method, x.URL, x.ResponseHeaders)
	if f == wire.Unknown {
		return false
	}
	m, err := wire.Reassemble(f, x.Body())
	return err == nil && m.StopReason != ""
}

// maxPresize bounds the buffer allocated up front for a request body of
// known length.
const maxPresize = 4 << 20

// maxDecodedBody bounds a request body decoded for the recording, against
// decompression bombs: one that decodes to more is recorded as sent. It is
// the most the store keeps of one event (store.MaxDataSize), which the
// whole exchange must fit in anyway.
const maxDecodedBody = 256 << 20

// chunkEnd is where a chunk of the response body ends in the arena, and
// when it arrived; binary marks a binary WebSocket message.
type chunkEnd struct {
	end    int
	at     time.Duration
	binary bool
}

// newRecord starts recording an exchange, which Begin places among what
// the Recorder records; it returns nil when the tap has no Recorder.
func (t *Tap) newRecord(start time.Time, method string, tg target) *record {
	if t.recorder == nil {
		return nil
	}
	id, at := t.recorder.Begin()
	if !at.IsZero() {
		start = at
	}
	rec := &record{
		t:     t,
		id:    id,
		at:    start.Sub(t.start),
		start: start,
		u:     tg.url,
		x: exchange.Exchange{
			Route:      tg.route,
			BaseURLVar: tg.varName,
			Method:     method,
			URL:        tg.url.String(),
		},
	}
	if tg.mcp != nil {
		rec.x.MCPServer = tg.mcp.mcpServer
	}
	return rec
}

// request takes the request header and body as sent upstream, to record
// the exchange in flight once it has been for inFlightDelay, or when it
// ends. h and body must not change afterwards; the record copies them.
func (r *record) request(h http.Header, body []byte) {
	if r == nil {
		return
	}
	r.sentHeader, r.sentBody = h, body
	r.reqDone = make(chan struct{})
	// For recordRequest, by whoever runs it; added by the forwarding
	// path, which is active, so that Close waits for it.
	r.t.active.Add(1)
	r.timer = time.AfterFunc(inFlightDelay, func() {
		if r.due.CompareAndSwap(false, true) {
			r.recordRequest(true)
		}
	})
}

// recordRequest decodes the request for Ended and, if started, has the
// Recorder record the exchange in flight.
func (r *record) recordRequest(started bool) {
	defer r.t.active.Done()
	defer close(r.reqDone) // after Started, which Ended must follow
	h, body := r.sentHeader, r.sentBody
	req := exchange.Exchange{ // the request line, before the response is known: in flight
		Route:      r.x.Route,
		BaseURLVar: r.x.BaseURLVar,
		MCPServer:  r.x.MCPServer,
		Method:     r.x.Method,
		URL:        r.x.URL,
	}
	sent, codings := httpcoding.Parse(h)
	decoded, err := httpcoding.Decode(body, codings, maxDecodedBody)
	switch {
	case err != nil:
		r.t.logf("http tap: recording the request body of %s %s://%s%s undecoded: %v", req.Method, r.u.Scheme, r.u.Host, r.u.EscapedPath(), err)
		decoded, sent = bytes.Clone(body), ""
	case len(codings) == 0 || len(body) == 0:
		// body is the upstream request's too; the recording must be
		// free to change its copy.
		decoded = bytes.Clone(body)
	}
	r.reqHeader, r.reqBody, r.reqEnc = h.Clone(), decoded, sent
	if !started {
		return
	}

	// Redact changes what it is given: give it copies.
	req.RequestHeaders = h.Clone()
	req.RequestBody = bytes.Clone(decoded)
	req.RequestEncoding = sent
	r.t.redactExchange(&req)
	r.t.recorder.Started(r.id, r.at, &req)
}

// response records the response's status and header, received ttfb after
// the request started. resp.Header must not change afterwards; finish
// copies it.
func (r *record) response(resp *http.Response, ttfb time.Duration) {
	if r == nil {
		return
	}
	r.x.Status = resp.StatusCode
	r.x.Proto = resp.Proto
	r.respHeader = resp.Header
	r.x.TTFB = ttfb
}

// chunk records a chunk of the response body that arrived at at.
func (r *record) chunk(p []byte, at time.Duration) {
	if r == nil {
		return
	}
	r.body.write(p)
	r.ends = append(r.ends, chunkEnd{end: r.body.n, at: at})
}

// message records a message of a WebSocket's server that arrived at at,
// binary or text, as a chunk of its own.
func (r *record) message(p []byte, at time.Duration, binary bool) {
	if r == nil {
		return
	}
	r.body.write(p)
	r.ends = append(r.ends, chunkEnd{end: r.body.n, at: at, binary: binary})
}

// end finishes the exchange, ended as how says, failed with err unless
// how is EndComplete, and has it recorded in the background, within
// endDelay.
func (r *record) end(how exchange.End, err error) {
	if r == nil {
		return
	}
	r.x.Duration = time.Since(r.start)
	r.x.End = how
	if err != nil {
		r.x.Error = err.Error()
	}
	// An exchange that ends before the timer has its request recorded
	// by Ended alone: a Started now would be replaced at once, after
	// costing as much as Ended to encode and append.
	request := r.reqDone != nil && r.due.CompareAndSwap(false, true)
	if request {
		r.timer.Stop()
	}
	r.t.active.Add(1)
	r.t.ends.add(func() {
		defer r.t.active.Done()
		if request {
			r.recordRequest(false)
		}
		r.finish()
	})
}

// endDelay is how long the recording of an ended exchange waits for those
// of the exchanges that end after it: each is recorded within endDelay of
// its end, and a Recorder writing to disk commits them together. A
// commit that followed each end at once fell on the next request's first
// byte (in a benchmark streaming back to back: +70 µs of time to first
// event) and cost the recording process a commit's CPU per exchange. A
// recording that stops within it keeps the exchange as Started recorded
// it, or loses it if it was shorter.
const endDelay = 10 * time.Millisecond

// An endQueue holds the recordings of ended exchanges for up to endDelay.
// The zero value is ready.
type endQueue struct {
	mu    sync.Mutex
	funcs []func() // in the order the exchanges ended
}

// add queues f, to run within endDelay.
func (q *endQueue) add(f func()) {
	q.mu.Lock()
	first := len(q.funcs) == 0
	q.funcs = append(q.funcs, f)
	q.mu.Unlock()
	if first {
		time.AfterFunc(endDelay, q.run)
	}
}

// run runs what is queued, in order.
func (q *endQueue) run() {
	q.mu.Lock()
	funcs := q.funcs
	q.funcs = nil
	q.mu.Unlock()
	for _, f := range funcs {
		f()
	}
}

// finish decodes the response body and has the Recorder record the
// exchange as it ended.
func (r *record) finish() {
	if r.reqDone != nil {
		<-r.reqDone
		r.x.RequestHeaders, r.x.RequestBody, r.x.RequestEncoding = r.reqHeader, r.reqBody, r.reqEnc
	}
	if r.respHeader != nil {
		r.x.ResponseHeaders = r.respHeader.Clone()
	}
	var codings []string
	r.x.ResponseEncoding, codings = httpcoding.Parse(r.x.ResponseHeaders)
	// One buffer of the body's size, which the Recorder keeps; the
	// arena's blocks go back to their pool.
	data := r.body.bytes()
	r.body.release()
	chunks := make([]exchange.Chunk, len(r.ends))
	from := 0
	for i, e := range r.ends {
		chunks[i] = exchange.Chunk{At: e.at, Data: data[from:e.end:e.end], Binary: e.binary}
		from = e.end
	}
	if len(codings) > 0 {
		decoded, err := decodeChunks(chunks, codings, r.x.End != exchange.EndComplete)
		if err != nil {
			r.t.logf("http tap: recording the response body of %s %s://%s%s undecoded: %v", r.x.Method, r.u.Scheme, r.u.Host, r.u.EscapedPath(), err)
			r.x.ResponseEncoding = ""
		} else {
			chunks = decoded
		}
	}
	r.x.Chunks = chunks
	if r.x.End == exchange.EndClientGone && finalEventSent(&r.x) {
		// Agents hang up as soon as they have the final event (Codex
		// does, right after response.completed), often before the tap
		// sees the upstream's end of body: the response was complete.
		r.x.End, r.x.Error = exchange.EndComplete, ""
	}
	r.t.redactExchange(&r.x)
	r.t.recorder.Ended(r.id, r.at, &r.x)
}

// An arena's blocks grow from minBlock to maxBlock, doubling: a short
// response takes little memory, and a long one few blocks.
const (
	minBlock    = 4 << 10
	maxBlock    = 64 << 10
	blockLevels = 5 // minBlock<<(blockLevels-1) == maxBlock
)

// blockPools hold the blocks of arenas, by size: minBlock<<i in the i-th.
var blockPools [blockLevels]sync.Pool

// getBlock returns the i-th block of an arena.
func getBlock(i int) *[]byte {
	level := min(i, blockLevels-1)
	if b, ok := blockPools[level].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, minBlock<<level)
	return &b
}

// An arena keeps a response body as it arrives, in pooled blocks that are
// never moved or grown: a chunk is copied once, on arrival, where one
// growing slice copied all before it again at each growth, on the
// forwarding path. bytes joins the blocks, off it.
type arena struct {
	blocks []*[]byte // full but for the last
	used   int       // bytes used of the last block
	n      int       // bytes written
}

// write appends p.
func (a *arena) write(p []byte) {
	for len(p) > 0 {
		if len(a.blocks) == 0 || a.used == len(*a.blocks[len(a.blocks)-1]) {
			a.blocks = append(a.blocks, getBlock(len(a.blocks)))
			a.used = 0
		}
		c := copy((*a.blocks[len(a.blocks)-1])[a.used:], p)
		p = p[c:]
		a.used += c
		a.n += c
	}
}

// bytes returns what was written, in a buffer of its own.
func (a *arena) bytes() []byte {
	if a.n == 0 {
		return nil
	}
	out := make([]byte, 0, a.n)
	for _, b := range a.blocks[:len(a.blocks)-1] {
		out = append(out, *b...)
	}
	return append(out, (*a.blocks[len(a.blocks)-1])[:a.used]...)
}

// release returns the blocks to their pools; the arena is empty after.
func (a *arena) release() {
	for i, b := range a.blocks {
		blockPools[min(i, blockLevels-1)].Put(b)
	}
	a.blocks, a.used, a.n = nil, 0, 0
}

// redactExchange applies Config.Redact to x.
func (t *Tap) redactExchange(x *exchange.Exchange) {
	if t.redact != nil {
		t.redact(x)
	}
}

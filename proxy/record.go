package proxy

import (
	"bytes"
	"net/http"
	"net/url"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/httpcoding"
	"github.com/acptap/acptap/internal/wire"
)

// record is the recording of one exchange. The forwarding path feeds it
// what it sees and never waits for it: decoding, redaction and encoding run
// on goroutines of their own, and the response body is kept as received
// until the exchange ends. A nil *record records nothing.
type record struct {
	t     *Tap
	id    uint64        // the Recorder's, from Begin
	at    time.Duration // when the request arrived, since Config.Start
	start time.Time
	u     *url.URL          // the upstream URL, for notices
	x     exchange.Exchange // written by the forwarding path until end, then by finish

	reqDone   chan struct{} // closed once the request is decoded and its incomplete event appended
	reqHeader http.Header   // the request header; set before reqDone is closed
	reqBody   []byte        // the decoded request body; set before reqDone is closed
	reqEnc    string        // its encoding as recorded; set before reqDone is closed

	respCodings   []string   // the response's Content-Encoding, to undo
	contentLength int        // the response's Content-Length, -1 if unknown, at most maxPresize
	arena         []byte     // the response body as received
	ends          []chunkEnd // the chunks of arena
}

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

// maxPresize bounds the arena allocated up front for a response of known
// length.
const maxPresize = 4 << 20

// maxDecodedBody bounds a request body decoded for the recording, against
// decompression bombs: one that decodes to more is recorded as sent. It is
// the most the store keeps of one event (store.MaxDataSize), which the
// whole exchange must fit in anyway.
const maxDecodedBody = 256 << 20

// chunkEnd is where a chunk of the response body ends in the arena, and
// when it arrived.
type chunkEnd struct {
	end int
	at  time.Duration
}

// newRecord starts recording an exchange, which Begin places among what
// the Recorder records; it returns nil when the tap has no Recorder.
func (t *Tap) newRecord(start time.Time, method string, tg target) *record {
	if t.recorder == nil {
		return nil
	}
	return &record{
		t:     t,
		id:    t.recorder.Begin(),
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
}

// request records the request header and body as sent upstream, and
// has the Recorder record the exchange in flight. h and body must not
// change afterwards; the record copies them.
func (r *record) request(h http.Header, body []byte) {
	if r == nil {
		return
	}
	req := r.x // the request line, before the response is known: in flight
	r.reqDone = make(chan struct{})
	r.t.active.Add(1)
	go func() {
		defer r.t.active.Done()
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

		// Redact changes what it is given: give it copies.
		req.RequestHeaders = h.Clone()
		req.RequestBody = bytes.Clone(decoded)
		req.RequestEncoding = sent
		r.t.redactExchange(&req)
		r.t.recorder.Started(r.id, r.at, &req)
		close(r.reqDone) // after Started, which Ended must follow
	}()
}

// response records the response's status and header, received ttfb after
// the request started.
func (r *record) response(resp *http.Response, ttfb time.Duration) {
	if r == nil {
		return
	}
	r.x.Status = resp.StatusCode
	r.x.Proto = resp.Proto
	r.x.ResponseHeaders = resp.Header.Clone()
	r.x.TTFB = ttfb
	r.x.ResponseEncoding, r.respCodings = httpcoding.Parse(resp.Header)
	r.contentLength = int(min(resp.ContentLength, maxPresize))
}

// chunk records a chunk of the response body that arrived at at.
func (r *record) chunk(p []byte, at time.Duration) {
	if r == nil {
		return
	}
	if r.arena == nil {
		r.arena = make([]byte, 0, max(len(p), r.contentLength))
	}
	r.arena = append(r.arena, p...)
	r.ends = append(r.ends, chunkEnd{end: len(r.arena), at: at})
}

// end finishes the exchange, ended as how says, failed with err unless
// how is EndComplete, and has it recorded in the background.
func (r *record) end(how exchange.End, err error) {
	if r == nil {
		return
	}
	r.x.Duration = time.Since(r.start)
	r.x.End = how
	if err != nil {
		r.x.Error = err.Error()
	}
	r.t.active.Add(1)
	go func() {
		defer r.t.active.Done()
		r.finish()
	}()
}

// finish decodes the response body and has the Recorder record the
// exchange as it ended.
func (r *record) finish() {
	if r.reqDone != nil {
		<-r.reqDone
		r.x.RequestHeaders, r.x.RequestBody, r.x.RequestEncoding = r.reqHeader, r.reqBody, r.reqEnc
	}
	chunks := make([]exchange.Chunk, len(r.ends))
	from := 0
	for i, e := range r.ends {
		chunks[i] = exchange.Chunk{At: e.at, Data: r.arena[from:e.end:e.end]}
		from = e.end
	}
	if len(r.respCodings) > 0 {
		decoded, err := decodeChunks(chunks, r.respCodings, r.x.End != exchange.EndComplete)
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

// redactExchange applies Config.Redact to x.
func (t *Tap) redactExchange(x *exchange.Exchange) {
	if t.redact != nil {
		t.redact(x)
	}
}

// Package llmserver answers an agent's HTTP requests from a recording, its LLM's positionally and the others by URL, without touching the network.
//
// A Server is an http.RoundTripper for proxy.Config.Transport: the tap
// takes the agent's requests, through its forward proxy or its base-URL
// routes, and the Server answers each one from the recorded exchanges. It
// never dials anything.
//
// # Queues
//
// The recorded exchanges wait in queues, one per request key: the method,
// the URL path and the model of a request, as in "POST /v1/responses model
// gpt-5". The model is the "model" field of the JSON request body, decoded
// from its Content-Encoding, or, for Gemini and for Anthropic on Vertex
// AI, the model the URL names, as wire.RequestInfo reads it; a request
// without one has a key without a model. A request that asks for
// structured output (a JSON schema or JSON mode) has ", structured
// output" at the end of its key: it is an agent's side call (Claude Code
// titles its sessions so, with the main model when its base URL is not
// Anthropic's), not a turn of the conversation, even with the same
// model. The host and the query are not part of the key. Each queue keeps its own cursor: the n-th request of a
// key gets the n-th recorded exchange of its queue. Requests of different
// queues may come in any order, so a title-generation call racing the main
// turn cannot take the main turn's response, while within a queue the
// recorded order holds.
//
// A request whose queue has no recorded exchange left, or none at all, is
// never forwarded anywhere: it is answered 400, a status agents do not
// retry, with an error body in the shape of the request's wire format
// whose message starts "acptap replay: no recorded exchange for", and it
// is listed in Report.Unanswered.
//
// # Matching
//
// With Options.Conversation, as for a recording of several sessions whose
// turns may call the same model at once, the n-th request of a queue is
// not simply given the n-th exchange: of the first few exchanges of its
// queue not yet served (up to 8, in recorded order), it gets the one whose
// recorded request has the same conversation as it (its system prompt and
// messages, normalized), else the one whose conversation it shares the
// longest beginning with, else, if it shares nothing with any, the first.
// A request that shares the same longest beginning with two exchanges whose
// conversations go on otherwise cannot tell them apart: it gets the first,
// and the choice is listed in Report.Ambiguous with both.
//
// # Classes
//
// Each exchange has a class (wire.Class), the recorded ones and the
// live requests alike: an exchange is wire.ClassLLM if it came
// through a base-URL route (the tap puts the route into the request's
// context) or its request is a generation call of an LLM API, and
// wire.ClassHTTP otherwise: a registry lookup, an update check,
// telemetry, a probe. The queues above are for LLM exchanges. An
// exchange with an HTTP MCP server (wire.ClassMCP) is numbered with the
// others but never served here: the agent reaches the server's stand-in,
// which answers it (see replay).
//
// HTTP exchanges are not the conversation, and the agent makes them in
// whatever order and number its start-up and its timers make them: they
// are answered by key, Options.HTTPKey of their method and URL, in any
// order and as often as asked. The n-th request of a key gets the n-th
// recorded exchange of that key, and every request after the last gets
// the last again. A request of a key with no recorded exchange is
// answered 502 with a plain text body starting "acptap replay: no
// recorded answer for", as the tap answers a request whose upstream is
// down (agents survive being offline; a 404 would tell them that the
// thing they asked for does not exist), and is listed in
// Report.HTTPUnanswered; recorded HTTP exchanges no request asked for are
// listed in Report.HTTPUnrequested. Their requests are not compared with
// the recorded ones.
//
// # Responses
//
// A recorded response is replayed with its status and header, without
// hop-by-hop headers and without Content-Encoding: recorded bodies are
// decoded, and are sent decoded. A response recorded with a Content-Length
// gets one for the body sent; the others are sent chunked. The body comes
// in the recorded chunks: each Read returns at most one, so the tap
// flushes to the agent the pieces it got when recording. With
// Options.Speed set, the header and each chunk wait for their recorded
// time, divided by Speed, since the request arrived.
//
// An exchange recorded without a response fails its round trip, which the
// tap answers 502. One whose body was cut sends the recorded bytes and
// then fails a Read, which the tap passes on as a broken stream. One that
// the agent walked away from, or that the end of the recording cut short,
// never ended for the agent: after its recorded bytes, if any, it waits
// until the request is cancelled.
//
// Responses the Server makes up rather than replays carry the header
// X-Acptap-Replay: "unanswered" for a request the recording cannot answer,
// of either class, "fault" for an injected error status.
//
// # Faults
//
// Options.Faults injects failures into chosen exchanges, of either class;
// see Fault.
//
// # Drift
//
// Each LLM request is paired with its recorded twin, the exchange its
// queue's cursor gives it, and if Options.Compare says they differ, the
// first difference is listed in Report.Drift.
//
// # Memory
//
// The Server keeps of each recorded exchange only its head (Exchanges.Head:
// what queues it and names it in a Report), and loads the whole exchange
// (Exchanges.Load) when a request is served from it, holding it while it
// answers and compares that request: a long session's requests, each
// carrying the conversation so far, are in memory one at a time rather
// than all together. List holds them all in memory, for recordings made
// up in tests.
//
// # Identity
//
// An exchange is its number, 1-based in recorded order, from the
// recording through the Server to the report: Options.Faults, Compare,
// Drift, LoadError and Report name exchanges by it. The forms an exchange
// takes here are the head the queues hold (Recorded) and the whole
// exchange loaded to serve one request (exchange.Exchange).
package llmserver

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/hop"
	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/internal/wire"
	"github.com/acptap/acptap/mismatch"
)

// Exchanges are the recorded exchanges a Server answers from, numbered 1
// to Len in recorded order, as `acptap show` numbers the events of its llm
// lane ("llm #3"). The number is an exchange's one identity: faults name
// it, Compare is given it, and the Report lists it.
type Exchanges interface {
	// Len returns how many exchanges there are.
	Len() int
	// Head returns exchange n, 1-based: enough of it to queue it and
	// name it in a Report (see Recorded). New calls it once for each.
	Head(n int) Recorded
	// Load returns the whole of exchange n when a request is served from
	// it, so that a Server holds an exchange only while it serves it and
	// compares its request. An error fails the request's round trip with
	// a *LoadError, which the tap answers 502, and is listed in
	// Report.LoadErrors. It is called concurrently, and again for each
	// request served from the same exchange.
	Load(n int) (*exchange.Exchange, error)
}

// List is Exchanges held whole in memory: exchange n is List[n-1].
type List []Recorded

// Len returns len(l).
func (l List) Len() int { return len(l) }

// Head returns l[n-1].
func (l List) Head(n int) Recorded { return l[n-1] }

// Load returns l[n-1]'s Exchange.
func (l List) Load(n int) (*exchange.Exchange, error) { return l[n-1].Exchange, nil }

// Recorded is the head of one recorded exchange, of either class.
type Recorded struct {
	// Number is the exchange's number in Exchanges; the Server sets it.
	Number int
	// Seq is the exchange's event Seq in the recording, which messages
	// name beside its number.
	Seq uint64
	// Exchange is the exchange, or only its head: its Route, Method, URL
	// and Status, and its RequestBody unless Facts are read. The Server
	// does not change it.
	Exchange *exchange.Exchange
	// Facts, if read (ReadRequestFacts), are what the Server reads of the
	// request body, which Exchange then need not carry: a caller that
	// loads exchanges as they are served reads them when it has the body
	// at hand, and keeps only the head.
	Facts RequestFacts
}

// RequestFacts are what a Server reads of a recorded request's body for
// the request's queue key: the model it asks for and whether it asks for
// structured output. The zero value is facts not read.
type RequestFacts struct {
	model      string
	structured bool
	read       bool
}

// ReadRequestFacts reads the facts of x's request body, if x is an LLM
// exchange (wire.ClassLLM): an http exchange is keyed by its method
// and URL alone. It is what New does with an exchange without them.
func ReadRequestFacts(x *exchange.Exchange) RequestFacts {
	f := RequestFacts{read: true}
	if wire.ClassOfExchange(x) == wire.ClassLLM {
		f.model, f.structured = requestFacts(wire.Detect(x.Method, x.URL, nil), x.URL, x.RequestBody)
	}
	return f
}

// Options configures a Server. The zero value works: it answers every
// request as unanswerable.
type Options struct {
	// Exchanges are the recorded exchanges. If nil, there are none.
	Exchanges Exchanges

	// Speed scales the recorded timing: 0 sends everything as fast as it
	// can, without waiting; N > 0 waits for the recorded time to first
	// byte and chunk arrival times divided by N (1 is the recorded pace).
	Speed float64

	// Faults are failures to inject, by exchange Number.
	Faults map[int]Fault

	// HTTPKey, if not nil, returns the key of an http exchange
	// (wire.ClassHTTP) from its method and URL, for the recorded
	// exchanges and the live requests alike: requests are answered with
	// the recorded exchanges of their key. It is given a recorded URL as
	// recorded, with credentials masked, and a live one as requested, and
	// should make the two alike: drop credentials, replace the values that
	// differ from run to run. If nil, the key is the method and the URL
	// with its credentials masked as a recording masks them. It is called
	// concurrently.
	HTTPKey func(method, rawURL string) string

	// Compare, if not nil, compares each LLM request with its recorded twin:
	// number is the recorded exchange's, recorded the exchange (loaded for
	// the request) and live the request as it came,
	// with its body decoded and credentials in well-known headers and
	// query keys masked as a recording masks them (redact.Redactor's zero
	// value); only live's request fields are set. If they differ, it
	// returns the first difference, its Path, Recorded, Live and More
	// set (the Server sets Number), and true. It is called concurrently,
	// and must not change its arguments.
	Compare func(number int, recorded, live *exchange.Exchange) (Drift, bool)

	// Conversation, if not nil, returns the conversation of an LLM
	// request, each message as a string that compares equal when the
	// messages are alike (normalize.Conversation of the normalized
	// request), given the recorded exchanges and the live requests as
	// Compare is. With it, a request is matched by the conversation it
	// continues rather than by position alone: see Matching. It is
	// called concurrently, and must not change its argument.
	Conversation func(x *exchange.Exchange) []string
}

// A Server answers LLM requests from recorded exchanges. Its methods are
// safe for concurrent use.
type Server struct {
	speed     float64
	compare   func(number int, recorded, live *exchange.Exchange) (Drift, bool)
	converse  func(x *exchange.Exchange) []string
	seed      maphash.Seed
	exchanges Exchanges
	entries   []*entry // in recorded order
	httpKey   func(method, rawURL string) string

	hooks hooks // set by tests before the first request

	comparing sync.WaitGroup // request comparisons under way

	mu         sync.Mutex        // guards the fields below, and those of queues and entries marked so
	queues     map[string]*queue // by key; queues that were not recorded are added as requests come
	http       map[string]*queue // the http exchanges, by Options.HTTPKey
	served     int               // exchanges consumed
	unanswered []Request
	httpMissed []Request // http requests without a recorded answer
	drift      []Drift
	faulted    []AppliedFault // in order of application
	loadErrs   []*LoadError
	ambiguous  []Ambiguity
}

// queue is the recorded exchanges of one request key and its cursor. An
// http queue's cursor stays on its last entry once there.
type queue struct {
	key     string
	entries []*entry
	next    int // guarded by Server.mu: index of the entry the next request gets
	live    int // guarded by Server.mu: requests so far
}

// entry is a recorded exchange and what became of it.
type entry struct {
	Recorded
	class wire.Class
	fault *Fault // nil for none

	faultApplied bool // guarded by Server.mu
	served       bool // guarded by Server.mu: consumed by a request
	drifted      bool // guarded by Server.mu: a Drift is reported
	// conversation is its request's conversation, hashed, once matching
	// needed it (see Matching); guarded by Server.mu.
	conversation []uint64
	conversed    bool
}

// New returns a Server answering from opts.Exchanges.
func New(opts Options) (*Server, error) {
	if opts.Speed < 0 || math.IsNaN(opts.Speed) {
		return nil, fmt.Errorf("%w: speed %v, want 0 or more", ErrInvalidOptions, opts.Speed)
	}
	s := &Server{
		speed:     opts.Speed,
		compare:   opts.Compare,
		converse:  opts.Conversation,
		seed:      maphash.MakeSeed(),
		exchanges: opts.Exchanges,
		httpKey:   opts.HTTPKey,
		queues:    make(map[string]*queue),
		http:      make(map[string]*queue),
	}
	if s.exchanges == nil {
		s.exchanges = List(nil)
	}
	if s.httpKey == nil {
		s.httpKey = defaultHTTPKey
	}
	count := s.exchanges.Len()
	for n := 1; n <= count; n++ {
		r := s.exchanges.Head(n)
		if r.Exchange == nil {
			return nil, fmt.Errorf("%w: llm #%d of %d has no Exchange", ErrInvalidOptions, n, count)
		}
		r.Number = n
		x := r.Exchange
		class := wire.ClassOfExchange(x)
		if class == wire.ClassMCP {
			// Served by the MCP server's stand-in, not here: numbered,
			// never queued.
			s.entries = append(s.entries, &entry{Recorded: r, class: class})
			continue
		}
		queues, key := s.queues, ""
		if class == wire.ClassHTTP {
			queues, key = s.http, s.httpKey(x.Method, x.URL)
		} else {
			f := r.Facts
			if !f.read {
				f = ReadRequestFacts(x)
			}
			key = requestKey(x.Method, recordedPath(x.URL), f.model, f.structured)
		}
		q := queues[key]
		if q == nil {
			q = &queue{key: key}
			queues[key] = q
		}
		e := &entry{Recorded: r, class: class}
		q.entries = append(q.entries, e)
		s.entries = append(s.entries, e)
	}
	for _, n := range slices.Sorted(maps.Keys(opts.Faults)) {
		f := opts.Faults[n]
		if n < 1 || n > count {
			return nil, fmt.Errorf("%w: fault %s for llm #%d, which is not in the recording", ErrInvalidOptions, f, n)
		}
		e := s.entries[n-1]
		if e.class == wire.ClassMCP {
			return nil, fmt.Errorf("%w %s for llm #%d: it is an exchange with MCP server %d, whose faults are mcp:NAME:N", ErrInvalidFault, f, n, e.Exchange.MCPServer)
		}
		if err := f.validate(); err != nil {
			return nil, fmt.Errorf("fault for llm #%d: %w", n, err)
		}
		if e.Exchange.Status == 0 && (f.Kind == FaultCut || f.Kind == FaultReset || f.Kind == FaultMalformed) {
			return nil, fmt.Errorf("%w %s for llm #%d: the exchange has no recorded response to change", ErrInvalidFault, f, n)
		}
		e.fault = &f
	}
	return s, nil
}

// requestKey returns the key of a request, which names its queue.
func requestKey(method, path, model string, structured bool) string {
	key := method + " " + path
	if model != "" {
		key += " model " + model
	}
	if structured {
		key += ", structured output"
	}
	return key
}

// defaultHTTPKey is the key of an http exchange without Options.HTTPKey:
// its method and URL, credentials masked.
func defaultHTTPKey(method, rawURL string) string {
	return method + " " + masker.URL(rawURL)
}

// recordedPath returns the path of a recorded URL, as a request for it
// has in URL.Path.
func recordedPath(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		return u.Path
	}
	if i := strings.IndexAny(rawURL, "?#"); i >= 0 {
		rawURL = rawURL[:i]
	}
	return rawURL
}

// masker masks credentials in live requests as a recording does.
var masker redact.Redactor

// RoundTrip answers req from the recording. It never dials: a request the
// recording cannot answer gets an error response. It returns an error
// only where the recording has the agent get none (an exchange recorded
// without a response), or when req is cancelled while it waits.
func (s *Server) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	raw, err := readBody(req)
	if err != nil {
		return nil, fmt.Errorf("replaying %s %s: reading the request body: %w", req.Method, masker.URL(req.URL.String()), err)
	}
	route, _, _ := exchange.RouteFromContext(req.Context())
	if isWebSocketUpgrade(req) {
		return s.roundTripWebSocket(req, start)
	}
	if wire.ClassOf(route, req.Method, req.URL.String()) == wire.ClassHTTP {
		return s.roundTripHTTP(req, start)
	}
	body, encoding, decodeErr := decodeRequestBody(req.Header, raw)
	format := wire.Detect(req.Method, req.URL.String(), nil)
	model, structured := requestFacts(format, req.URL.String(), body)
	key := requestKey(req.Method, req.URL.Path, model, structured)

	live := &exchange.Exchange{
		Method:          req.Method,
		URL:             req.URL.String(),
		Proto:           req.Proto,
		RequestHeaders:  req.Header.Clone(),
		RequestBody:     body,
		RequestEncoding: encoding,
	}
	e, fault, reason := s.takeLLM(key, live, decodeErr)
	if e == nil {
		msg := "acptap replay: no recorded exchange for " + key + " (" + reason + ")"
		return errorResponse(req, format, http.StatusBadRequest, "acptap_replay", msg, http.Header{markHeader: {"unanswered"}}), nil
	}
	x, err := s.loadAndCompare(e, fault, live)
	if err != nil {
		return nil, err
	}
	return s.answer(req, start, format, e, x, fault)
}

// takeLLM takes the recorded exchange that answers live, an LLM request
// of key: its queue's cursor's, or the one it matches (see Matching),
// with its fault if it is the first request it is due for. A request
// whose queue has none left gets none: it is listed in
// Report.Unanswered, and takeLLM returns why.
func (s *Server) takeLLM(key string, live *exchange.Exchange, decodeErr error) (*entry, *Fault, string) {
	var matched *entry
	if s.converse != nil {
		matched = s.match(key, live)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[key]
	if q == nil {
		q = &queue{key: key}
		s.queues[key] = q
	}
	q.live++
	if q.next == len(q.entries) {
		// The wording, from before queues had their name, is kept:
		// users' scripts may match it.
		reason := fmt.Sprintf("lane has %d recorded, this is request %d", len(q.entries), q.live)
		if decodeErr != nil {
			reason += "; " + decodeErr.Error()
		}
		s.unanswered = append(s.unanswered, Request{Method: live.Method, URL: masker.URL(live.URL), Queue: key, Reason: reason})
		return nil, nil, reason
	}
	e := q.entries[q.next]
	if matched != nil && !matched.served {
		e = matched
	}
	return e, s.take(q, e), ""
}

// loadAndCompare loads the whole exchange of e, if the answer or the
// comparison needs it, and compares live with it in the background.
func (s *Server) loadAndCompare(e *entry, fault *Fault, live *exchange.Exchange) (*exchange.Exchange, error) {
	var x *exchange.Exchange
	if s.compare != nil || replays(fault) {
		var err error
		if x, err = s.exchangeOf(e); err != nil {
			return nil, err
		}
	}
	if s.compare != nil {
		// Off the response path: normalizing a request that carries a
		// whole conversation takes milliseconds, and the agent should
		// not wait for it. Report waits for every comparison.
		s.comparing.Go(func() { s.checkDrift(e, x, live) })
	}
	return x, nil
}

// exchangeOf returns the whole recorded exchange of e, as Exchanges.Load
// gives it, which fails with a *LoadError, listed for the Report.
func (s *Server) exchangeOf(e *entry) (*exchange.Exchange, error) {
	x, err := s.exchanges.Load(e.Number)
	if err == nil && x == nil {
		err = errNoExchange
	}
	if err != nil {
		le := &LoadError{Number: e.Number, Seq: e.Seq, Err: err}
		s.mu.Lock()
		s.loadErrs = append(s.loadErrs, le)
		s.mu.Unlock()
		return nil, le
	}
	return x, nil
}

// take consumes e, the entry q's cursor is on, for a request, and returns
// its fault if it is the first request e is due for. A fault other than
// FaultMalformed leaves e for the next request, the agent's retry. An
// http queue's cursor stays on its last entry. s.mu must be held.
func (s *Server) take(q *queue, e *entry) *Fault {
	var fault *Fault
	if e.fault != nil && !e.faultApplied {
		e.faultApplied = true
		fault = e.fault
		s.faulted = append(s.faulted, AppliedFault{e.Number, *fault})
	}
	if fault == nil || fault.Kind == FaultMalformed {
		if !e.served {
			e.served = true
			s.served++
		}
		if e.class == wire.ClassHTTP {
			q.next = min(q.next+1, len(q.entries)-1)
		}
		// An LLM request may have been matched past the cursor (see
		// Matching): the cursor is the first exchange not served.
		for e.class != wire.ClassHTTP && q.next < len(q.entries) && q.entries[q.next].served {
			q.next++
		}
	}
	return fault
}

// roundTripHTTP answers an http request (wire.ClassHTTP) with the
// recorded exchanges of its key, in turn, the last one again and again.
func (s *Server) roundTripHTTP(req *http.Request, start time.Time) (*http.Response, error) {
	u := req.URL.String()
	key := s.httpKey(req.Method, u)
	s.mu.Lock()
	q := s.http[key]
	if q == nil {
		s.httpMissed = append(s.httpMissed, Request{Method: req.Method, URL: masker.URL(u), Queue: key, Reason: "no http exchange of this method and URL was recorded"})
		s.mu.Unlock()
		msg := fmt.Sprintf("acptap replay: no recorded answer for %s %s (http exchanges are answered by method and URL, and none was recorded as %q)\n", req.Method, masker.URL(u), key)
		h := http.Header{
			markHeader:       {"unanswered"},
			"Content-Type":   {"text/plain; charset=utf-8"},
			"Content-Length": {strconv.Itoa(len(msg))},
		}
		return newResponse(req, http.StatusBadGateway, h, io.NopCloser(strings.NewReader(msg)), int64(len(msg))), nil
	}
	q.live++
	e := q.entries[q.next]
	fault := s.take(q, e)
	s.mu.Unlock()
	var x *exchange.Exchange
	if replays(fault) {
		var err error
		if x, err = s.exchangeOf(e); err != nil {
			return nil, err
		}
	}
	return s.answer(req, start, wire.Unknown, e, x, fault)
}

// replays reports whether a request answered with fault, nil for none,
// is answered with the recorded response: an injected status or hang
// is not.
func replays(fault *Fault) bool {
	return fault == nil || fault.Kind != FaultStatus && fault.Kind != FaultHang
}

// answer answers req with e's recorded response, of x, its whole
// exchange (nil if fault does not replay it), or with fault if it is not
// nil; format shapes the error body of a FaultStatus.
func (s *Server) answer(req *http.Request, start time.Time, format wire.Format, e *entry, x *exchange.Exchange, fault *Fault) (*http.Response, error) {
	switch {
	case fault != nil && fault.Kind == FaultStatus:
		h := http.Header{markHeader: {"fault"}}
		if fault.RetryAfter != "" {
			h.Set("Retry-After", fault.RetryAfter)
		}
		msg := fmt.Sprintf("acptap replay: injected fault %s on llm #%d", fault, e.Number)
		return errorResponse(req, format, fault.Status, "acptap_fault", msg, h), nil
	case fault != nil && fault.Kind == FaultHang:
		return nil, s.waitCancel(req.Context(), e.Number, "hanging as injected")
	}
	return s.replay(req, start, e, x, fault)
}

// readBody reads and closes the body of req.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil {
		return nil, nil
	}
	defer req.Body.Close()
	// Into one buffer of the declared length: growing one was a tenth
	// of a long replay's time. The tap has read the body already, so
	// the length is known.
	buf := bytes.NewBuffer(make([]byte, 0, min(max(req.ContentLength, 0), maxPresize)+bytes.MinRead))
	_, err := buf.ReadFrom(req.Body)
	return buf.Bytes(), err
}

// maxPresize bounds the buffer readBody allocates on a request's word.
const maxPresize = 4 << 20

// checkDrift compares a request with its recorded twin, x of e.
func (s *Server) checkDrift(e *entry, x, live *exchange.Exchange) {
	masker.Exchange(live)
	d, differ := s.compare(e.Number, x, live)
	if !differ {
		return
	}
	d.Number = e.Number
	s.mu.Lock()
	defer s.mu.Unlock()
	if !e.drifted {
		e.drifted = true
		s.drift = append(s.drift, d)
	}
}

// waitCancel waits until ctx ends and returns an error saying why the
// request of exchange number waited.
func (s *Server) waitCancel(ctx context.Context, number int, why string) error {
	if s.hooks.wait != nil {
		s.hooks.wait(number)
	}
	<-ctx.Done()
	return fmt.Errorf("replaying llm #%d: %s: %w", number, why, context.Cause(ctx))
}

// agentLeft reports whether a recorded exchange ended because the agent
// went away or the recording stopped: the agent never saw it end.
func agentLeft(x *exchange.Exchange) bool {
	return x.End == exchange.EndClientGone || x.End == exchange.EndTapClosed
}

// replay answers req with the recorded response of e, of x, its whole
// exchange, with fault applied if it is not nil.
func (s *Server) replay(req *http.Request, start time.Time, e *entry, x *exchange.Exchange, fault *Fault) (*http.Response, error) {
	ctx := req.Context()
	if x.Status == 0 {
		if err := s.sleepUntil(ctx, nil, e.Number, start, x.Duration); err != nil {
			return nil, fmt.Errorf("replaying llm #%d: waiting for the recorded failure: %w", e.Number, err)
		}
		if agentLeft(x) {
			return nil, s.waitCancel(ctx, e.Number, "the agent got no response when recording")
		}
		why := x.Error
		if why == "" {
			why = "no response was recorded"
		}
		return nil, fmt.Errorf("replaying llm #%d: recorded without a response: %s", e.Number, why)
	}
	if err := s.sleepUntil(ctx, nil, e.Number, start, x.TTFB); err != nil {
		return nil, fmt.Errorf("replaying llm #%d: waiting for the recorded time to first byte: %w", e.Number, err)
	}
	b := &body{
		ctx:    ctx,
		s:      s,
		number: e.Number,
		start:  start,
		chunks: x.Chunks,
		closed: make(chan struct{}),
	}
	switch {
	case x.End == exchange.EndComplete:
	case agentLeft(x):
		b.endHangs = true
	default:
		b.endErr = fmt.Errorf("replaying llm #%d: the recorded response was cut (%s): %w", e.Number, x.Error, io.ErrUnexpectedEOF)
	}
	if fault != nil {
		full := x.Body()
		fr := framingOf(x.ResponseHeaders)
		switch fault.Kind {
		case FaultCut, FaultReset:
			n := afterEvents(full, fr, fault.Events)
			b.chunks = cutOut(x.Chunks, n, len(full))
			b.endHangs = false
			if fault.Kind == FaultCut {
				b.endErr = fmt.Errorf("replaying llm #%d: %s injected after %d bytes: %w", e.Number, fault, n, io.ErrUnexpectedEOF)
			} else {
				b.endErr = fmt.Errorf("replaying llm #%d: %s injected after %d bytes: %w", e.Number, fault, n, hop.ErrReset)
			}
		case FaultMalformed:
			if from, to, ok := garbleRange(full, fr); ok {
				b.chunks = cutOut(x.Chunks, from, to)
			}
		}
	}
	h := replayHeader(x.ResponseHeaders)
	length := int64(-1)
	if b.endErr == nil && !b.endHangs && x.ResponseHeaders.Get("Content-Length") != "" {
		length = int64(bodyLen(b.chunks))
		h.Set("Content-Length", strconv.FormatInt(length, 10))
	}
	return newResponse(req, x.Status, h, b, length), nil
}

// hooks let tests observe and pace a Server; they are nil outside tests.
type hooks struct {
	wait  func(number int)                                  // a request starts waiting for its cancellation
	sleep func(number int)                                  // a request or body waits for a recorded time, which may be past
	read  func(ctx context.Context, number, sent int) error // a body that has returned sent bytes is about to return more, or its end
}

// Report says how the replay went. Called after the agent is done, it is
// complete: everything a request changes is settled before the request's
// response is returned, but for the comparison with its recorded twin,
// which runs in the background and which Server.Report waits for.
type Report struct {
	// Served is the number of recorded exchanges, of both classes,
	// consumed by a request: Served plus len(Unrequested) plus
	// len(HTTPUnrequested) is the number recorded.
	Served int
	// Unanswered are the LLM requests the recording could not answer, in
	// the order they came.
	Unanswered []Request
	// Unrequested are the recorded LLM exchanges no request consumed, in
	// recorded order. An exchange whose injected fault (other than
	// FaultMalformed) was not followed by a retry is one.
	Unrequested []Recorded
	// HTTPUnanswered are the http requests (wire.ClassHTTP) of a key
	// the recording has no exchange of, in the order they came; each was
	// answered 502.
	HTTPUnanswered []Request
	// HTTPUnrequested are the recorded http exchanges no request
	// consumed, in recorded order.
	HTTPUnrequested []Recorded
	// Drift lists, by exchange Number, the first difference Compare found
	// between each recorded exchange and a request it was paired with.
	Drift []Drift
	// Faulted are the exchanges whose fault was applied, in the order
	// they were; a fault of Options.Faults missing here was never
	// reached.
	Faulted []AppliedFault
	// LoadErrors are the recorded exchanges Exchanges.Load failed to return
	// when a request came for them, in the order they came: the replay
	// could not serve its recording.
	LoadErrors []*LoadError
	// Ambiguous are the requests that continued two recorded
	// conversations alike (see Matching), in the order they came.
	Ambiguous []Ambiguity
}

// An AppliedFault is a fault of Options.Faults that a request met: the
// Number of the exchange it was injected in place of, or into.
type AppliedFault struct {
	Number int
	Fault
}

// Request is a request the recording could not answer.
type Request struct {
	Method string
	URL    string // credentials in the query masked
	// Queue is the request's key: for an LLM request its queue's, such
	// as "POST /v1/responses model gpt-5", for an http one what
	// Options.HTTPKey made of it.
	Queue  string
	Reason string // such as "lane has 2 recorded, this is request 3"
}

// String describes r in one line.
func (r Request) String() string {
	return fmt.Sprintf("%s %s: no recorded exchange for %s (%s)", r.Method, r.URL, r.Queue, r.Reason)
}

// Drift is a difference between a request and its recorded twin.
type Drift struct {
	Number int // the recorded exchange's
	// Mismatch is the first differing field, its Path as Compare names it.
	mismatch.Mismatch
	More int // how many other places of the request differ
}

// String describes d in one line: the first difference, two strings
// around the first character where they differ, and how many more there
// are.
func (d Drift) String() string {
	return fmt.Sprintf("llm #%d: the request differs from the recording %s", d.Number, d.Between("recorded", "live"))
}

// Between describes where and how d's two requests differ, naming them a
// and b: `at PATH: a "...", b "..." (and N more differences)`.
func (d Drift) Between(a, b string) string {
	c := mismatch.Pair(d.Recorded, d.Live)
	more := ""
	switch {
	case d.More == 1:
		more = " (and 1 more difference)"
	case d.More > 1:
		more = fmt.Sprintf(" (and %d more differences)", d.More)
	}
	return fmt.Sprintf("at %s%s: %s %s, %s %s%s", d.Path, c.Where(), a, c.A, b, c.B, more)
}

// Report returns what has happened so far, once the request comparisons
// under way have finished. Drift is in exchange order.
func (s *Server) Report() Report {
	s.comparing.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Report{
		Served:         s.served,
		Unanswered:     slices.Clone(s.unanswered),
		HTTPUnanswered: slices.Clone(s.httpMissed),
		Drift:          slices.SortedFunc(slices.Values(s.drift), func(a, b Drift) int { return a.Number - b.Number }),
		Faulted:        slices.Clone(s.faulted),
		LoadErrors:     slices.Clone(s.loadErrs),
		Ambiguous:      slices.Clone(s.ambiguous),
	}
	for _, e := range s.entries {
		switch {
		case e.served, e.class == wire.ClassMCP:
		case e.class == wire.ClassHTTP:
			r.HTTPUnrequested = append(r.HTTPUnrequested, e.Recorded)
		default:
			r.Unrequested = append(r.Unrequested, e.Recorded)
		}
	}
	slices.SortStableFunc(r.Drift, func(a, b Drift) int { return cmp.Compare(a.Number, b.Number) })
	return r
}

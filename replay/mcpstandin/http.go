package mcpstandin

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/hop"
	"github.com/acptap/acptap/internal/mcpwire"
	"github.com/acptap/acptap/internal/sse"
	"github.com/acptap/acptap/lane"
)

// Transports of an HTTP MCP server, as ACP names them.
const (
	TransportHTTP = "http" // Streamable HTTP: each POST is answered in its response
	TransportSSE  = "sse"  // HTTP+SSE: POSTs are answered on the GET stream
)

// TimedLine is a PlanLine and when it was sent, since the recording's
// start: the lines of an HTTP server's exchanges are put in the order
// they were sent (SortLines), the answers on an HTTP+SSE server's stream
// among the requests posted meanwhile.
type TimedLine struct {
	At time.Duration
	PlanLine
}

// ExchangeLines returns the MCP messages of exchange number x of an HTTP
// MCP server, which started at start, as lines of the server's, each at
// the time it was sent (mcpwire.Messages).
func ExchangeLines(number int, start time.Duration, x *exchange.Exchange) []TimedLine {
	var out []TimedLine
	for _, m := range mcpwire.Messages(x) {
		dir := lane.FromServer
		if m.ToServer {
			dir = lane.ToServer
		}
		out = append(out, TimedLine{At: start + m.At, PlanLine: PlanLine{Dir: dir, Line: string(m.Data), Exchange: number}})
	}
	return out
}

// SortLines returns the lines in the order they were sent.
func SortLines(lines []TimedLine) []PlanLine {
	slices.SortStableFunc(lines, func(a, b TimedLine) int { return int(a.At - b.At) })
	out := make([]PlanLine, len(lines))
	for i, l := range lines {
		out[i] = l.PlanLine
	}
	return out
}

// HTTPResponse is how a recorded exchange of an HTTP MCP server was
// answered, which the stand-in's answers to the requests it matches take
// after.
type HTTPResponse struct {
	Method string
	Status int // 0 when the tap got no response, and answered 502
	Header http.Header
	// Host and Error are, for an exchange without a response, the
	// server's host and why the tap got none (exchange.Exchange.Error).
	Host, Error string
}

// HTTPOptions configures an HTTP stand-in.
type HTTPOptions struct {
	// Plan is what it serves: the server's lines (ExchangeLines, in
	// SortLines order), its faults.
	Plan *Plan
	// Transport is TransportHTTP or TransportSSE. If "", TransportHTTP.
	Transport string
	// Responses are the recorded exchanges' responses, by exchange
	// number (PlanLine.Exchange). If nil, answers are JSON.
	Responses map[int]HTTPResponse
	// Log receives what it served, as a stand-in's LOG (see Read). If
	// nil, nothing is noted.
	Log io.Writer
	// Secret is the first segment of the paths it serves: a request
	// outside it gets 404. If "", every path is served.
	Secret string
	// Client sends the requests of a stand-in given the real server's
	// URL (SetLive). If nil, an http.Client without a proxy is used.
	Client *http.Client
}

// An HTTPStandIn serves one HTTP MCP server to a replayed agent from the
// recording, on a loopback port, in the server's place: the agent is
// given its URL (URL) for the server's in session/new.
//
// A POST's messages are answered as a stdio stand-in answers them (see
// Matcher), with a Streamable HTTP server as the recorded exchange that
// answered the matched request was (its status, its headers, Mcp-Session-Id
// included, a JSON body or an event stream), an HTTP+SSE server's on the
// GET stream, whose first event names the stand-in's own endpoint. A GET
// of a Streamable HTTP server is answered as it was recorded: a stream
// held open, or the status the server gave (405 when it offered none).
type HTTPStandIn struct {
	opts    HTTPOptions
	matcher *Matcher
	ln      net.Listener
	srv     *http.Server
	root    string // http://127.0.0.1:PORT/SECRET

	ctx    context.Context // cancelled by Close: streams and hangs end
	cancel context.CancelFunc

	mu      sync.Mutex    // guards the fields below
	streams []chan []byte // the open GET streams of an HTTP+SSE server, each fed its answers
	live    string        // the real server's URL (SetLive); "" to serve the recording

	closeOnce sync.Once
}

// StartHTTP starts an HTTP stand-in on a loopback port.
func StartHTTP(opts HTTPOptions) (*HTTPStandIn, error) {
	if opts.Plan == nil {
		opts.Plan = &Plan{}
	}
	if opts.Transport == "" {
		opts.Transport = TransportHTTP
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true}}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting the stand-in of MCP server %s: %w", opts.Plan.Server, err)
	}
	h := &HTTPStandIn{opts: opts, matcher: NewMatcher(opts.Plan, opts.Log), ln: ln, root: "http://" + ln.Addr().String()}
	if opts.Secret != "" {
		h.root += "/" + opts.Secret
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	go h.srv.Serve(ln)
	return h, nil
}

// URL returns the URL to give the agent in place of the server's URL
// recorded: its path and query under the stand-in's root.
func (h *HTTPStandIn) URL(recorded string) string {
	u, err := url.Parse(recorded)
	if err != nil {
		return h.root + "/"
	}
	out := h.root + u.EscapedPath()
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	return out
}

// SetLive has the stand-in forward each request to the real server at
// rawURL (replay --live-mcp), pass its answers on and compare them with
// the recorded ones, which it notes as a stdio stand-in does; for a
// Streamable HTTP server only: an HTTP+SSE server keeps being served
// from the recording.
func (h *HTTPStandIn) SetLive(rawURL string) {
	if h.opts.Transport != TransportHTTP {
		return
	}
	h.mu.Lock()
	h.live = rawURL
	h.mu.Unlock()
}

// Close stops the stand-in; calls after the first do nothing.
func (h *HTTPStandIn) Close() error {
	var err error
	h.closeOnce.Do(func() {
		h.cancel()
		err = h.srv.Close()
	})
	return err
}

// path returns r's path without the secret, false if it is outside it.
func (h *HTTPStandIn) path(r *http.Request) (string, bool) {
	if h.opts.Secret == "" {
		return r.URL.Path, true
	}
	prefix := "/" + h.opts.Secret
	p := r.URL.Path
	if len(p) < len(prefix) || subtle.ConstantTimeCompare([]byte(p[:len(prefix)]), []byte(prefix)) != 1 {
		return "", false
	}
	rest := p[len(prefix):]
	if rest != "" && rest[0] != '/' {
		return "", false
	}
	return rest, true
}

// ServeHTTP answers one request of the agent's.
func (h *HTTPStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path, ok := h.path(r)
	if !ok {
		http.Error(w, "acptap replay: not found", http.StatusNotFound)
		return
	}
	h.mu.Lock()
	live := h.live
	h.mu.Unlock()
	if live != "" {
		h.serveLive(w, r, live, path)
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.get(w, r)
	default:
		// DELETE ends a session; the recording has no more to say.
		h.recorded(w, r.Method, http.StatusOK)
	}
}

// recorded answers a request of method with no MCP message with the
// status of the first recorded exchange of that method, or else status.
func (h *HTTPStandIn) recorded(w http.ResponseWriter, method string, status int) {
	header := http.Header{}
	for _, n := range slices.Sorted(maps.Keys(h.opts.Responses)) {
		if resp := h.opts.Responses[n]; resp.Method == method {
			status, header = resp.Status, resp.Header
			break
		}
	}
	copyHeader(w.Header(), header)
	w.Header().Del("Content-Type")
	w.WriteHeader(status)
}

// post answers a POST: each of its messages, as the server answered.
func (h *HTTPStandIn) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	msgs := mcpwire.Split(body)
	if msgs == nil {
		http.Error(w, "acptap replay: the request body is not a JSON-RPC message", http.StatusBadRequest)
		return
	}
	var lines [][]byte
	number := 0 // the exchange that answered the first request
	hang := false
	for _, m := range msgs {
		rp, err := h.matcher.Reply(m)
		if errors.Is(err, ErrEnded) {
			if resp, ok := h.opts.Responses[rp.Exchange]; ok && resp.Status == 0 {
				// The tap got no response when recording, and said so.
				why := strings.TrimPrefix(resp.Error, "no response: ")
				http.Error(w, fmt.Sprintf("acptap: no response from %s: %s", resp.Host, why), http.StatusBadGateway)
				return
			}
			// The server went away instead of answering: so does the
			// connection.
			panic(http.ErrAbortHandler)
		}
		lines = append(lines, rp.Lines...)
		if number == 0 {
			number = rp.Exchange
		}
		hang = hang || rp.Hang
	}
	if h.opts.Transport == TransportSSE {
		w.WriteHeader(http.StatusAccepted)
		h.send(lines)
		return
	}
	if hang {
		select {
		case <-r.Context().Done():
		case <-h.ctx.Done():
		}
		return
	}
	resp, ok := h.opts.Responses[number]
	if len(lines) == 0 {
		// Notifications and responses only: accepted.
		status := http.StatusAccepted
		if ok {
			status = resp.Status
		}
		w.WriteHeader(status)
		return
	}
	copyHeader(w.Header(), resp.Header)
	if ok && mcpwire.IsEventStream(resp.Header) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(resp.Status)
		for _, l := range lines {
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", l)
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	status := http.StatusOK
	if ok {
		status = resp.Status
	}
	w.WriteHeader(status)
	if len(msgs) > 1 {
		// A batch is answered with a batch.
		w.Write(append(append([]byte("["), bytes.Join(lines, []byte(","))...), ']'))
		return
	}
	w.Write(lines[0])
}

// get answers a GET: the stream of an HTTP+SSE server, which begins with
// the endpoint the agent is to post to and carries the answers; for a
// Streamable HTTP server, what was recorded.
func (h *HTTPStandIn) get(w http.ResponseWriter, r *http.Request) {
	if h.opts.Transport != TransportSSE {
		for _, n := range slices.Sorted(maps.Keys(h.opts.Responses)) {
			if resp := h.opts.Responses[n]; resp.Method == http.MethodGet && resp.Status == http.StatusOK && mcpwire.IsEventStream(resp.Header) {
				copyHeader(w.Header(), resp.Header)
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-h.ctx.Done():
				}
				return
			}
		}
		h.recorded(w, http.MethodGet, http.StatusMethodNotAllowed)
		return
	}
	feed := make(chan []byte, 64)
	h.mu.Lock()
	h.streams = append(h.streams, feed)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.streams = slices.DeleteFunc(h.streams, func(c chan []byte) bool { return c == feed })
		h.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "event: endpoint\ndata: %s/messages\n\n", strings.TrimPrefix(h.root, "http://"+h.ln.Addr().String()))
	w.(http.Flusher).Flush()
	for {
		select {
		case l := <-feed:
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", l)
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
			return
		case <-h.ctx.Done():
			return
		}
	}
}

// send puts an HTTP+SSE server's answers on its open streams.
func (h *HTTPStandIn) send(lines [][]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.streams {
		for _, l := range lines {
			select {
			case s <- l:
			case <-h.ctx.Done():
				return
			}
		}
	}
}

// serveLive forwards a request to the real server and compares its
// answers with the recorded ones.
func (h *HTTPStandIn) serveLive(w http.ResponseWriter, r *http.Request, live, path string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	for _, m := range mcpwire.Split(body) {
		h.matcher.Request(m)
	}
	target, err := url.Parse(live)
	if err != nil {
		http.Error(w, "acptap replay: "+err.Error(), http.StatusBadGateway)
		return
	}
	target.Path, target.RawPath, target.RawQuery = path, "", r.URL.RawQuery
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "acptap replay: "+err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	hop.RemoveHeaders(req.Header)
	resp, err := h.opts.Client.Do(req)
	if err != nil {
		http.Error(w, "acptap replay: MCP server "+h.opts.Plan.Server+": "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	hop.RemoveHeaders(resp.Header)
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	if !mcpwire.IsEventStream(resp.Header) {
		b, _ := io.ReadAll(resp.Body)
		for _, m := range mcpwire.Split(b) {
			h.matcher.Answer(m)
		}
		w.Write(b)
		return
	}
	// A stream: passed on event by event, each answer compared.
	sr := sse.NewReader(resp.Body)
	for {
		ev, err := sr.Next()
		if err != nil {
			w.Write(sr.Rest())
			return
		}
		if ev.Type == "message" {
			for _, m := range mcpwire.Split([]byte(ev.Data)) {
				h.matcher.Answer(m)
			}
		}
		w.Write(ev.Raw)
		w.(http.Flusher).Flush()
	}
}

// copyHeader copies src into dst, without hop-by-hop headers and those
// of the recorded body's length and encoding, which the answer sets anew.
func copyHeader(dst, src http.Header) {
	for k, vv := range src {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Content-Encoding", "Transfer-Encoding", "Connection", "Keep-Alive", "Date":
			continue
		}
		dst[k] = slices.Clone(vv)
	}
}

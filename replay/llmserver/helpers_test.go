package llmserver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/ndjson"
	"github.com/acptap/acptap/internal/sse"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/replay/llmserver"
)

// hangGuard bounds every wait of the tests. It is not a timing assertion:
// the tests wait for things that must happen, and fail instead of hanging
// when they don't.
const hangGuard = 20 * time.Second

// capture is a real LLM response from the wire samples.
type capture struct {
	file        string
	contentType string
	path        string // the request path
	model       string // in the request body
}

// captures are one real response of each wire format.
var captures = []capture{
	{"oai_chat_tool_real.sse", "text/event-stream", "/v1/chat/completions", "gpt-4o-mini"},
	{"resp_text.sse", "text/event-stream", "/v1/responses", "gpt-4o-mini"},
	{"anth_tool_real.sse", "text/event-stream", "/v1/messages", "claude-sonnet-4"},
	{"gem_real.sse", "text/event-stream", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", ""},
	{"ollama_tool.ndjson", "application/x-ndjson", "/api/chat", "qwen3"},
}

// readCapture returns the bytes of a capture, or of a synthetic body of
// the wire package's tests ("synthetic/NAME").
func readCapture(t testing.TB, file string) []byte {
	t.Helper()
	if strings.HasPrefix(file, "synthetic/") {
		b, err := os.ReadFile(filepath.Join("..", "..", "internal", "wire", "testdata", filepath.FromSlash(file)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return testkit.WireSample(t, file)
}

// splitEvents splits body into its events (SSE) or lines (NDJSON), with
// anything after the last one as a last piece of its own.
func splitEvents(body []byte, ndjsonLines bool) [][]byte {
	var ends []int
	if ndjsonLines {
		for i, b := range body {
			if b == '\n' {
				ends = append(ends, i+1)
			}
		}
	} else {
		var s sse.Scanner
		ends = s.Feed(body)
		if s.Flush() {
			ends = append(ends, len(body))
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(body) {
		ends = append(ends, len(body))
	}
	var out [][]byte
	from := 0
	for _, e := range ends {
		if e > from {
			out = append(out, body[from:e])
		}
		from = e
	}
	return out
}

// chunkOffset is the fake arrival time of the i-th chunk: minutes apart,
// so that a replay that waited for them without being asked to would
// never finish.
func chunkOffset(i int) time.Duration { return time.Duration(i+1) * time.Minute }

// streamed returns a recorded exchange of a POST to rawURL answered 200
// with body, in the given pieces, arriving minutes apart.
func streamed(rawURL, model, contentType string, pieces [][]byte) *exchange.Exchange {
	x := &exchange.Exchange{
		Route:          exchange.RouteBaseURL,
		Method:         http.MethodPost,
		URL:            rawURL,
		RequestHeaders: http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer [REDACTED]"}},
		RequestBody:    requestBody(model, "hello"),
		Status:         http.StatusOK,
		ResponseHeaders: http.Header{
			"Content-Type": {contentType},
			"X-Request-Id": {"req_recorded"},
		},
		TTFB: 30 * time.Second,
		End:  exchange.EndComplete,
	}
	for i, p := range pieces {
		x.Chunks = append(x.Chunks, exchange.Chunk{At: chunkOffset(i), Data: p})
	}
	x.Duration = chunkOffset(len(pieces))
	return x
}

// captured returns the recorded exchange of a capture, its body split at
// event boundaries, requested at upstream.
func captured(t testing.TB, c capture, upstream string) *exchange.Exchange {
	t.Helper()
	body := readCapture(t, c.file)
	return streamed(upstream+c.path, c.model, c.contentType, splitEvents(body, strings.HasSuffix(c.file, ".ndjson")))
}

// plain returns a recorded exchange of a POST to rawURL answered with a
// JSON body of known length.
func plain(rawURL, model, body string) *exchange.Exchange {
	return &exchange.Exchange{
		Method:          http.MethodPost,
		URL:             rawURL,
		RequestHeaders:  http.Header{"Content-Type": {"application/json"}},
		RequestBody:     requestBody(model, "hello"),
		Status:          http.StatusOK,
		ResponseHeaders: http.Header{"Content-Type": {"application/json"}, "Content-Length": {fmt.Sprint(len(body))}},
		Chunks:          []exchange.Chunk{{At: time.Minute, Data: []byte(body)}},
		TTFB:            time.Minute,
		Duration:        time.Minute,
		End:             exchange.EndComplete,
	}
}

// requestBody returns a JSON request body for model ("" for none).
func requestBody(model, input string) []byte {
	m := map[string]any{"stream": true, "input": input}
	if model != "" {
		m["model"] = model
	}
	b, _ := json.Marshal(m)
	return b
}

// recordedList numbers exchanges 1, 2, ... in order, with Seqs 10 apart.
func recordedList(xs ...*exchange.Exchange) llmserver.List {
	var out llmserver.List
	for i, x := range xs {
		out = append(out, llmserver.Recorded{Number: i + 1, Seq: uint64(10 * (i + 1)), Exchange: x})
	}
	return out
}

// newServer returns a Server for opts, failing the test on error.
func newServer(t testing.TB, opts llmserver.Options) *llmserver.Server {
	t.Helper()
	s, err := llmserver.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// newTap starts a tap sending every request to s; it is closed when the
// test ends.
func newTap(t testing.TB, s *llmserver.Server) (*proxy.Tap, *proxy.CA) {
	t.Helper()
	ca, err := proxy.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tap, err := proxy.New(proxy.Config{Transport: s, CA: ca, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tap.Close(); err != nil {
			t.Errorf("closing the tap: %v", err)
		}
	})
	return tap, ca
}

// route is a way for a client to reach an upstream through the tap.
type route struct {
	name string
	// via returns a client and the base URL to request in place of
	// upstream (scheme://host[:port]).
	via func(t testing.TB, tap *proxy.Tap, ca *proxy.CA, upstream string) (*http.Client, string)
	h2  bool // the client speaks HTTP/2 to the tap
}

// routes are the ways through the tap the tests take: a base-URL route,
// and the forward proxy with an intercepted HTTPS tunnel, over HTTP/1.1
// and HTTP/2.
var routes = []route{
	{name: "base-url", via: viaBaseURL},
	{name: "proxy-https", via: viaProxy(false)},
	{name: "proxy-https-h2", via: viaProxy(true), h2: true},
}

// viaBaseURL adds a base-URL route to upstream.
func viaBaseURL(t testing.TB, tap *proxy.Tap, _ *proxy.CA, upstream string) (*http.Client, string) {
	local, err := tap.AddBaseURL("LLM_BASE_URL", upstream)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, local
}

// viaProxy goes through the forward proxy, trusting the tap's CA, and
// speaking HTTP/2 in intercepted tunnels if h2.
func viaProxy(h2 bool) func(t testing.TB, tap *proxy.Tap, ca *proxy.CA, upstream string) (*http.Client, string) {
	return func(t testing.TB, tap *proxy.Tap, ca *proxy.CA, upstream string) (*http.Client, string) {
		pu, err := url.Parse(tap.ProxyURL())
		if err != nil {
			t.Fatal(err)
		}
		pem, err := os.ReadFile(ca.CertFile())
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			t.Fatalf("%s: no certificate", ca.CertFile())
		}
		tr := &http.Transport{
			// Unlike ProxyFromEnvironment, this proxies loopback
			// upstreams too.
			Proxy:              func(*http.Request) (*url.URL, error) { return pu, nil },
			TLSClientConfig:    &tls.Config{RootCAs: roots},
			ForceAttemptHTTP2:  h2,
			DisableCompression: true,
		}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}, upstream
	}
}

// upstream is the recorded upstream of most tests. Nothing answers there:
// the replay must not try.
const upstream = "https://api.llm.invalid"

// post sends a POST of body to u, with a context bounded by hangGuard.
func post(t testing.TB, client *http.Client, u string, body []byte) *http.Response {
	t.Helper()
	resp, err := postCtx(t, context.Background(), client, u, body)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	return resp
}

// postCtx sends a POST of body to u with ctx, bounded by hangGuard.
func postCtx(t testing.TB, ctx context.Context, client *http.Client, u string, body []byte) (*http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, hangGuard)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-dummy-key-for-replay")
	return client.Do(req)
}

// readAllBody reads and closes a response body.
func readAllBody(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return b
}

// progress is what a client has received of a body, which a Server's
// read hook can wait for.
type progress struct {
	mu       sync.Mutex // guards got and disarmed
	got      int        // bytes received
	disarmed bool       // gate lets everything through
	moved    chan struct{}
}

// disarm makes gate let every read through, for requests whose reads are
// not counted.
func (p *progress) disarm() {
	p.mu.Lock()
	p.disarmed = true
	p.mu.Unlock()
}

func newProgress() *progress { return &progress{moved: make(chan struct{}, 1)} }

// add counts n more bytes received.
func (p *progress) add(n int) {
	p.mu.Lock()
	p.got += n
	p.mu.Unlock()
	select {
	case p.moved <- struct{}{}:
	default:
	}
}

func (p *progress) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got
}

// waitFor waits until n bytes are received; it fails after hangGuard or
// when ctx ends.
func (p *progress) waitFor(ctx context.Context, n int) error {
	deadline := time.NewTimer(hangGuard)
	defer deadline.Stop()
	for p.count() < n {
		select {
		case <-p.moved:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("the client received %d bytes, not %d", p.count(), n)
		}
	}
	return nil
}

// gate is a read hook that lets a body return more only once the client
// has everything it returned before, so that every read of the client
// ends where a piece the body returned ends.
func (p *progress) gate(ctx context.Context, _, sent int) error {
	p.mu.Lock()
	disarmed := p.disarmed
	p.mu.Unlock()
	if disarmed {
		return nil
	}
	return p.waitFor(ctx, sent)
}

// countingReader reports the bytes read through it to a progress and
// remembers where each read ended.
type countingReader struct {
	r    io.Reader
	p    *progress
	ends []int
	n    int
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if n > 0 {
		c.n += n
		c.ends = append(c.ends, c.n)
		c.p.add(n)
	}
	return n, err
}

// readEvents reads SSE events from r until an error, which it returns
// (io.EOF at a clean end).
func readEvents(r io.Reader) ([]sse.Event, error) {
	sr := sse.NewReader(r)
	var evs []sse.Event
	for {
		ev, err := sr.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// readLines reads NDJSON lines from r until an error, which it returns
// (io.EOF at a clean end).
func readLines(r io.Reader) ([]ndjson.Line, error) {
	nr := ndjson.NewReader(r)
	var lines []ndjson.Line
	for {
		l, err := nr.Next()
		if err != nil {
			return lines, err
		}
		lines = append(lines, l)
	}
}

// waitSignal waits for a value on c, failing the test after hangGuard.
func waitSignal[T any](t testing.TB, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(hangGuard):
		t.Fatalf("gave up waiting for %s", what)
		panic("unreachable")
	}
}

// heldRequest is a POST sent in the background that the replay is to hold
// until it is cancelled.
type heldRequest struct {
	cancel context.CancelFunc
	done   chan heldResult
}

// heldResult is how a held request ended: the body bytes it got, if it got
// a response, and the error that ended it.
type heldResult struct {
	body []byte
	err  error
}

// sendHeld sends a POST of body to u in the background, reading the whole
// response body, through a countingReader on p if p is not nil.
func sendHeld(t *testing.T, client *http.Client, u string, body []byte, p *progress) *heldRequest {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &heldRequest{cancel: cancel, done: make(chan heldResult, 1)}
	go func() {
		resp, err := postCtx(t, ctx, client, u, body)
		if err != nil {
			h.done <- heldResult{err: err}
			return
		}
		defer resp.Body.Close()
		var r io.Reader = resp.Body
		if p != nil {
			r = &countingReader{r: r, p: p}
		}
		b, err := io.ReadAll(r)
		h.done <- heldResult{b, err}
	}()
	return h
}

// checkNotEnded checks that the request has not ended.
func (h *heldRequest) checkNotEnded(t *testing.T) {
	t.Helper()
	select {
	case res := <-h.done:
		t.Fatalf("the request ended before it was cancelled, with %q and %v", res.body, res.err)
	default:
	}
}

// cancelAndWait cancels the request and returns how it ended. What a
// client gets once it has cancelled is not the replay's to say, beyond
// the bytes: it mostly gets an error, but a TLS client racing its own
// close can read the tap's end for a client that has gone, such as an
// empty 200 or the end of a chunked body.
func (h *heldRequest) cancelAndWait(t *testing.T) heldResult {
	t.Helper()
	h.cancel()
	return waitSignal(t, h.done, "the cancelled request to end")
}

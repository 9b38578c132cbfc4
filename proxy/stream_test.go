package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/sse"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/proxy"
)

// captures are real LLM streams, one of each wire format.
var captures = []struct {
	file        string
	contentType string
}{
	{"oai_chat_tool_real.sse", "text/event-stream"}, // OpenAI Chat Completions
	{"resp_text.sse", "text/event-stream"},          // OpenAI Responses
	{"anth_tool_real.sse", "text/event-stream"},     // Anthropic Messages, with space padding
	{"gem_real.sse", "text/event-stream"},           // Gemini, CRLF
	{"ollama_tool.ndjson", "application/x-ndjson"},  // Ollama
}

// splitEvents splits a capture into its events (SSE) or lines (NDJSON);
// anything after the last one is a last piece of its own.
func splitEvents(data []byte, ndjson bool) [][]byte {
	var ends []int
	if ndjson {
		for i, b := range data {
			if b == '\n' {
				ends = append(ends, i+1)
			}
		}
	} else {
		var s sse.Scanner
		ends = s.Feed(data)
		if s.Flush() {
			ends = append(ends, len(data))
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	var events [][]byte
	from := 0
	for _, e := range ends {
		events = append(events, data[from:e])
		from = e
	}
	return events
}

// pacedHandler serves events one at a time, each only once the client has
// received all before it.
func pacedHandler(t *testing.T, ack *ackStream, contentType string, events [][]byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(http.StatusOK)
		sent := 0
		for i, ev := range events {
			w.Write(ev)
			w.(http.Flusher).Flush()
			sent += len(ev)
			if !ack.waitReceived(r.Context(), sent) {
				t.Errorf("the client did not receive event %d of %d before the upstream sent the next (it got %d of %d bytes)", i+1, len(events), ack.count(), sent)
				return
			}
		}
	}
}

// TestStreamFormats streams each captured wire format through each route:
// the client gets exactly the upstream's bytes, each event before the
// upstream sends the next, and the recording has the body in chunks that
// end where the events end.
func TestStreamFormats(t *testing.T) {
	for _, c := range captures {
		data := testkit.WireSample(t, c.file)
		events := splitEvents(data, strings.HasSuffix(c.file, ".ndjson"))
		if len(events) < 2 {
			t.Fatalf("%s: %d events, want a real stream", c.file, len(events))
		}
		for _, rt := range routes {
			t.Run(c.file+"/"+rt.name, func(t *testing.T) {
				ack := newAckStream()
				s := setup(t, rt, pacedHandler(t, ack, c.contentType, events), "/v1/stream?alt=sse", proxy.Config{})
				reqBody := `{"model":"m","stream":true}`
				resp, err := s.client.Post(s.url, "application/json", strings.NewReader(reqBody))
				if err != nil {
					t.Fatal(err)
				}
				got, err := readAcking(resp.Body, ack.received)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("reading the response: %v", err)
				}
				if d := diff(got, data); d != "" {
					t.Fatalf("client got other bytes than the upstream sent: %s", d)
				}

				x := s.rec.finished(t, 1)[0]
				if x.Route != rt.recorded || x.Method != http.MethodPost || x.URL != s.upstream || x.Status != http.StatusOK {
					t.Errorf("recorded route %q, %s %s, status %d; want %q, POST %s, 200", x.Route, x.Method, x.URL, x.Status, rt.recorded, s.upstream)
				}
				if x.Error != "" || x.End != exchange.EndComplete {
					t.Errorf("recorded end %v, error %q; want complete, none", x.End, x.Error)
				}
				if string(x.RequestBody) != reqBody {
					t.Errorf("recorded request body %q, want %q", x.RequestBody, reqBody)
				}
				if got := x.ResponseHeaders.Get("Content-Type"); got != c.contentType {
					t.Errorf("recorded Content-Type %q, want %q", got, c.contentType)
				}
				if d := diff(x.Body(), data); d != "" {
					t.Errorf("recorded body differs from the upstream's: %s", d)
				}
				checkChunks(t, x, events)
			})
		}
	}
}

// diff describes how got differs from want, or returns "".
func diff(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("got %d bytes, want %d; they differ from byte %d: got %.40q, want %.40q", len(got), len(want), i, got[i:], want[i:])
}

// checkChunks checks that the recorded chunks end at every event's end (an
// upstream that waits for the client between events cannot have them
// arrive together) and that their times are in order within the exchange.
func checkChunks(t *testing.T, x *exchange.Exchange, events [][]byte) {
	t.Helper()
	chunkEnds := map[int]bool{}
	n := 0
	for i, c := range x.Chunks {
		n += len(c.Data)
		chunkEnds[n] = true
		if c.At < x.TTFB || c.At > x.Duration || (i > 0 && c.At < x.Chunks[i-1].At) {
			t.Errorf("chunk %d at %v; want it in order, between TTFB %v and duration %v", i, c.At, x.TTFB, x.Duration)
		}
	}
	n = 0
	for i, ev := range events {
		n += len(ev)
		if !chunkEnds[n] {
			t.Errorf("no recorded chunk ends at the end of event %d (byte %d)", i+1, n)
		}
	}
}

// countingWriter counts and keeps what is written through it.
type countingWriter struct {
	w   io.Writer
	buf bytes.Buffer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.buf.Write(p)
	return c.w.Write(p)
}

// flushWriteCloser is a streaming compressor.
type flushWriteCloser interface {
	io.WriteCloser
	Flush() error
}

var encoders = map[string]func(io.Writer) flushWriteCloser{
	"gzip": func(w io.Writer) flushWriteCloser { return gzip.NewWriter(w) },
	"zstd": func(w io.Writer) flushWriteCloser {
		e, err := zstd.NewWriter(w)
		if err != nil {
			panic(err)
		}
		return e
	},
	"br":      func(w io.Writer) flushWriteCloser { return brotli.NewWriter(w) },
	"deflate": func(w io.Writer) flushWriteCloser { return zlib.NewWriter(w) },
}

// TestEncodedResponses streams compressed responses: the client gets the
// encoded bytes as sent, the recording the decoded body with the encoding
// noted, in chunks that keep the arrival of each event.
func TestEncodedResponses(t *testing.T) {
	events := [][]byte{
		[]byte("data: {\"delta\":\"Hello\"}\n\n"),
		[]byte("data: {\"delta\":\", world\"}\n\n"),
		[]byte("data: {\"delta\":\"!\"}\n\n"),
		[]byte("data: [DONE]\n\n"),
	}
	plain := bytes.Join(events, nil)
	for _, enc := range []string{"gzip", "zstd", "br", "deflate"} {
		for _, rt := range []route{routes[0], routes[3]} {
			t.Run(enc+"/"+rt.name, func(t *testing.T) {
				ack := newAckStream()
				sentc := make(chan []byte, 1) // the encoded body, once sent
				h := func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/event-stream")
					w.Header().Set("Content-Encoding", enc)
					w.WriteHeader(http.StatusOK)
					sent := &countingWriter{w: w}
					defer func() { sentc <- sent.buf.Bytes() }()
					zw := encoders[enc](sent)
					for i, ev := range events {
						zw.Write(ev)
						zw.Flush()
						w.(http.Flusher).Flush()
						if !ack.waitReceived(r.Context(), sent.buf.Len()) {
							t.Errorf("the client did not receive event %d before the upstream sent the next", i+1)
							return
						}
					}
					zw.Close()
				}
				s := setup(t, rt, http.HandlerFunc(h), "/v1/stream", proxy.Config{})
				req, _ := http.NewRequest(http.MethodGet, s.url, nil)
				req.Header.Set("Accept-Encoding", enc)
				resp, err := s.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				got, err := readAcking(resp.Body, ack.received)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("reading the response: %v", err)
				}
				if d := diff(got, <-sentc); d != "" {
					t.Fatalf("client got other bytes than the upstream's encoded ones: %s", d)
				}
				if ce := resp.Header.Get("Content-Encoding"); ce != enc {
					t.Errorf("client got Content-Encoding %q, want %q", ce, enc)
				}

				x := s.rec.finished(t, 1)[0]
				if x.ResponseEncoding != enc {
					t.Errorf("recorded response encoding %q, want %q", x.ResponseEncoding, enc)
				}
				if !bytes.Equal(x.Body(), plain) {
					t.Fatalf("recorded body %q, want the decoded %q", x.Body(), plain)
				}
				if len(x.Chunks) != len(events) {
					t.Fatalf("recorded %d decoded chunks, want one per event (%d): %+v", len(x.Chunks), len(events), x.Chunks)
				}
				for i, c := range x.Chunks {
					if !bytes.Equal(c.Data, events[i]) {
						t.Errorf("decoded chunk %d is %q, want event %q", i, c.Data, events[i])
					}
				}
				checkChunks(t, x, events)
			})
		}
	}
}

// TestEncodedRequestBodies sends compressed request bodies: the upstream
// gets them as sent, the recording decoded with the encoding noted. A
// body that does not decode is recorded as sent, with no encoding.
func TestEncodedRequestBodies(t *testing.T) {
	plain := []byte(`{"model":"gpt-5","input":"` + strings.Repeat("hello ", 200) + `"}`)
	compress := func(enc string) []byte {
		var b bytes.Buffer
		zw := encoders[enc](&b)
		zw.Write(plain)
		zw.Close()
		return b.Bytes()
	}
	cases := []struct {
		name, enc   string
		body        []byte
		wantBody    []byte
		wantEncoded string
	}{
		{"zstd", "zstd", compress("zstd"), plain, "zstd"},
		{"gzip", "gzip", compress("gzip"), plain, "gzip"},
		{"br", "br", compress("br"), plain, "br"},
		{"corrupt", "gzip", []byte("this is not gzip"), []byte("this is not gzip"), ""},
		{"unknown", "compress", []byte("LZW?"), []byte("LZW?"), ""},
	}
	for _, c := range cases {
		for _, rt := range []route{routes[0], routes[4]} {
			t.Run(c.name+"/"+rt.name, func(t *testing.T) {
				h := func(w http.ResponseWriter, r *http.Request) {
					got, _ := io.ReadAll(r.Body)
					if d := diff(got, c.body); d != "" {
						t.Errorf("upstream got another body than the client sent: %s", d)
					}
					if ce := r.Header.Get("Content-Encoding"); ce != c.enc {
						t.Errorf("upstream got Content-Encoding %q, want %q", ce, c.enc)
					}
					io.WriteString(w, "ok")
				}
				s := setup(t, rt, http.HandlerFunc(h), "/v1/responses", proxy.Config{})
				req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(c.body))
				req.Header.Set("Content-Encoding", c.enc)
				resp, err := s.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				x := s.rec.finished(t, 1)[0]
				if !bytes.Equal(x.RequestBody, c.wantBody) || x.RequestEncoding != c.wantEncoded {
					t.Errorf("recorded request body %.60q... encoding %q; want %.60q... encoding %q", x.RequestBody, x.RequestEncoding, c.wantBody, c.wantEncoded)
				}
				if ce := x.RequestHeaders.Get("Content-Encoding"); ce != c.enc {
					t.Errorf("recorded Content-Encoding header %q, want %q", ce, c.enc)
				}
			})
		}
	}
}

// TestCorruptResponseEncoding: a response body that does not decode
// reaches the client as sent and is recorded as received, with no
// encoding noted.
func TestCorruptResponseEncoding(t *testing.T) {
	body := []byte("data: not zstd at all\n\n")
	h := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "zstd")
		w.Write(body)
	}
	s := setup(t, routes[3], http.HandlerFunc(h), "/v1/x", proxy.Config{})
	resp, err := s.client.Get(s.url)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("client got %q, %v; want %q", got, err, body)
	}
	x := s.rec.finished(t, 1)[0]
	if !bytes.Equal(x.Body(), body) || x.ResponseEncoding != "" || x.Error != "" {
		t.Errorf("recorded body %q, encoding %q, error %q; want the body as received, no encoding, no error", x.Body(), x.ResponseEncoding, x.Error)
	}
}

// TestConcurrentStreams runs several streams at once from one client. The
// upstream starts answering only once all requests have reached it, which
// they can only do if the tap forwards them concurrently.
func TestConcurrentStreams(t *testing.T) {
	const n = 6
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			var mu sync.Mutex
			arrived := 0
			all := make(chan struct{})
			h := func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				if arrived++; arrived == n {
					close(all)
				}
				mu.Unlock()
				select {
				case <-all:
				case <-r.Context().Done():
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				id := r.URL.Query().Get("id")
				for i := range 3 {
					fmt.Fprintf(w, "data: {\"stream\":%s,\"event\":%d}\n\n", id, i)
					w.(http.Flusher).Flush()
				}
			}
			s := setup(t, rt, http.HandlerFunc(h), "/v1/chat", proxy.Config{})
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s?id=%d", s.url, i), nil)
					resp, err := s.client.Do(req)
					if err != nil {
						t.Errorf("stream %d: %v", i, err)
						return
					}
					defer resp.Body.Close()
					got, err := io.ReadAll(resp.Body)
					want := fmt.Sprintf("data: {\"stream\":%d,\"event\":0}\n\ndata: {\"stream\":%d,\"event\":1}\n\ndata: {\"stream\":%d,\"event\":2}\n\n", i, i, i)
					if err != nil || string(got) != want {
						t.Errorf("stream %d got %q, %v; want %q", i, got, err, want)
					}
				})
			}
			wg.Wait()
			seen := map[string]bool{}
			for _, x := range s.rec.finished(t, n) {
				if x.Error != "" || x.Status != http.StatusOK {
					t.Errorf("recorded %s: status %d, error %q", x.URL, x.Status, x.Error)
				}
				seen[x.URL] = true
			}
			if len(seen) != n {
				t.Errorf("recorded %d distinct URLs, want %d", len(seen), n)
			}
		})
	}
}

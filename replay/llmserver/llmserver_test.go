package llmserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/acptap/acptap/mismatch"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/replay/llmserver"
)

// TestReplaysCaptures: a real capture of each wire format is replayed
// through a real tap, on every route, with its recorded status and header,
// the same bytes, and each recorded chunk ending where a read of the client
// ends.
func TestReplaysCaptures(t *testing.T) {
	for _, rt := range routes {
		for _, c := range captures {
			t.Run(rt.name+"/"+c.file, func(t *testing.T) {
				x := captured(t, c, upstream)
				// As recorded from a gzip response: the body is decoded.
				x.ResponseEncoding = "gzip"
				x.ResponseHeaders.Set("Content-Encoding", "gzip")
				s := newServer(t, llmserver.Options{Exchanges: recordedList(x)})
				p := newProgress()
				llmserver.SetHooks(s, nil, nil, p.gate)
				tap, ca := newTap(t, s)
				client, base := rt.via(t, tap, ca, upstream)

				resp := post(t, client, base+c.path, x.RequestBody)
				cr := &countingReader{r: resp.Body, p: p}
				got, err := io.ReadAll(cr)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("reading the body: %v", err)
				}
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d, want 200", resp.StatusCode)
				}
				if g, w := resp.Header.Get("Content-Type"), c.contentType; g != w {
					t.Errorf("Content-Type %q, want %q", g, w)
				}
				if g := resp.Header.Get("X-Request-Id"); g != "req_recorded" {
					t.Errorf("X-Request-Id %q, want the recorded %q", g, "req_recorded")
				}
				if g := resp.Header.Get("Content-Encoding"); g != "" {
					t.Errorf("Content-Encoding %q; want none, the body is sent decoded", g)
				}
				if want := x.Body(); !bytes.Equal(got, want) {
					t.Fatalf("body differs from the recording:\ngot  %q\nwant %q", got, want)
				}
				end := 0
				for i, ch := range x.Chunks {
					end += len(ch.Data)
					if !slices.Contains(cr.ends, end) {
						t.Errorf("no read of the client ends where recorded chunk %d of %d does (byte %d); reads ended at %v", i+1, len(x.Chunks), end, cr.ends)
						break
					}
				}
				r := s.Report()
				if r.Served != 1 || len(r.Unanswered) != 0 || len(r.Unrequested) != 0 {
					t.Errorf("report: served %d, unanswered %v, unrequested %d; want 1, none, none", r.Served, r.Unanswered, len(r.Unrequested))
				}
			})
		}
	}
}

// TestPlainResponse: a response recorded with a Content-Length, from a
// gzip body, is sent decoded with the length of what is sent.
func TestPlainResponse(t *testing.T) {
	body := string(readCapture(t, "synthetic/anth_message.json"))
	x := plain(upstream+"/v1/messages", "claude-sonnet-4", body)
	x.ResponseEncoding = "gzip"
	x.ResponseHeaders.Set("Content-Encoding", "gzip")
	x.ResponseHeaders.Set("Content-Length", "123") // the gzip body's
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			s := newServer(t, llmserver.Options{Exchanges: recordedList(x)})
			tap, ca := newTap(t, s)
			client, base := rt.via(t, tap, ca, upstream)
			resp := post(t, client, base+"/v1/messages", x.RequestBody)
			got := readAllBody(t, resp)
			if string(got) != body {
				t.Errorf("body %q, want %q", got, body)
			}
			if resp.ContentLength != int64(len(body)) || resp.Header.Get("Content-Encoding") != "" {
				t.Errorf("Content-Length %d, Content-Encoding %q; want %d and none", resp.ContentLength, resp.Header.Get("Content-Encoding"), len(body))
			}
		})
	}
}

// queueExchange is a recorded exchange of the queue of model at path whose
// answer names its Number.
func queueExchange(path, model string, number int) *exchange.Exchange {
	return plain(upstream+path, model, fmt.Sprintf(`{"number":%d}`, number))
}

// answerNumber returns the Number an answer of queueExchange names.
func answerNumber(t testing.TB, resp *http.Response) int {
	t.Helper()
	body := readAllBody(t, resp)
	var v struct {
		Number int `json:"number"`
	}
	if err := json.Unmarshal(body, &v); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("answer %d %q; want 200 and a recorded number", resp.StatusCode, body)
	}
	return v.Number
}

// TestQueues: two queues sharing a path and differing by model, whose
// requests race each other, each get their own recorded order, whichever
// queue comes first.
func TestQueues(t *testing.T) {
	const path = "/v1/responses"
	// Recorded: main, title, main, title, main.
	xs := []*exchange.Exchange{
		queueExchange(path, "gpt-main", 1),
		queueExchange(path, "gpt-title", 2),
		queueExchange(path, "gpt-main", 3),
		queueExchange(path, "gpt-title", 4),
		queueExchange(path, "gpt-main", 5),
	}
	want := map[string][]int{"gpt-main": {1, 3, 5}, "gpt-title": {2, 4}}
	for _, rt := range routes {
		for _, first := range []string{"gpt-title", "gpt-main", ""} {
			name := rt.name + "/" + first + "-first"
			if first == "" {
				name = rt.name + "/free-race"
			}
			t.Run(name, func(t *testing.T) {
				s := newServer(t, llmserver.Options{Exchanges: recordedList(xs...)})
				tap, ca := newTap(t, s)
				client, base := rt.via(t, tap, ca, upstream)
				firstDone := make(chan struct{})
				var wg sync.WaitGroup
				got := map[string][]int{}
				var mu sync.Mutex // guards got
				for model, numbers := range want {
					wg.Go(func() {
						for i := range numbers {
							if first != "" && model != first && i == 0 {
								<-firstDone
							}
							n := answerNumber(t, post(t, client, base+path, requestBody(model, "hi")))
							if model == first && i == 0 {
								close(firstDone)
							}
							mu.Lock()
							got[model] = append(got[model], n)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				for model, w := range want {
					if !slices.Equal(got[model], w) {
						t.Errorf("queue %s got exchanges %v, want %v", model, got[model], w)
					}
				}
				if r := s.Report(); r.Served != 5 || len(r.Unanswered)+len(r.Unrequested) != 0 {
					t.Errorf("report: served %d, unanswered %v, unrequested %v; want 5, none, none", r.Served, r.Unanswered, r.Unrequested)
				}
			})
		}
	}
}

// titleBody is the body of a session-title request of model, as Claude
// Code sends it: the main model, asked for JSON of a schema.
func titleBody(model string) []byte {
	return []byte(`{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"<session>hi</session>"}],` +
		`"output_config":{"format":{"type":"json_schema","schema":{"type":"object","required":["title"]}}}}`)
}

// TestStructuredOutputQueue: a request for structured output has a queue
// of its own, apart from the turns of the same model, so that a title
// call racing the first turn cannot take the turn's response however
// they come; its key says so.
func TestStructuredOutputQueue(t *testing.T) {
	const path = "/v1/messages"
	title := queueExchange(path, "claude-main", 2)
	title.RequestBody = titleBody("claude-main")
	// Recorded: the turn, then the title, then the turn's second call.
	xs := []*exchange.Exchange{queueExchange(path, "claude-main", 1), title, queueExchange(path, "claude-main", 3)}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			s := newServer(t, llmserver.Options{Exchanges: recordedList(xs...)})
			tap, ca := newTap(t, s)
			client, base := rt.via(t, tap, ca, upstream)
			// Live: the title first.
			if n := answerNumber(t, post(t, client, base+path, titleBody("claude-main"))); n != 2 {
				t.Errorf("the title request got exchange %d, want 2", n)
			}
			for _, want := range []int{1, 3} {
				if n := answerNumber(t, post(t, client, base+path, requestBody("claude-main", "hi"))); n != want {
					t.Errorf("a turn's request got exchange %d, want %d", n, want)
				}
			}
			resp := post(t, client, base+path, titleBody("claude-main"))
			readAllBody(t, resp)
			r := s.Report()
			if len(r.Unanswered) != 1 || r.Unanswered[0].Queue != "POST /v1/messages model claude-main, structured output" {
				t.Errorf("unanswered %v, want the second title request, of queue %q", r.Unanswered, "POST /v1/messages model claude-main, structured output")
			}
			if r.Served != 3 || len(r.Unrequested) != 0 {
				t.Errorf("report: served %d, unrequested %v; want 3, none", r.Served, r.Unrequested)
			}
		})
	}
}

// TestUnanswered: a request beyond its queue's recorded exchanges, or of a
// key never recorded, gets a 400 with an error in its wire format's shape
// and is reported, with the credentials in its URL masked.
func TestUnanswered(t *testing.T) {
	msg := func(key string, recorded, request int) string {
		return fmt.Sprintf("acptap replay: no recorded exchange for %s (lane has %d recorded, this is request %d)", key, recorded, request)
	}
	q := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	const openAIShape = `{"error":{"message":%s,"type":"acptap_replay","param":null,"code":null}}`
	cases := []struct {
		name, path, model string
		recorded          bool   // one exchange of the queue is recorded
		queue             string // as reported
		shape             string // the error body, %s the quoted message
	}{
		{"openai-responses", "/v1/responses", "gpt-x", true, "POST /v1/responses model gpt-x", openAIShape},
		{"openai-chat", "/v1/chat/completions", "gpt-x", true, "POST /v1/chat/completions model gpt-x", openAIShape},
		{"anthropic", "/v1/messages", "claude-x", true, "POST /v1/messages model claude-x",
			`{"type":"error","error":{"type":"acptap_replay","message":%s}}`},
		{"gemini", "/v1beta/models/gemini-x:streamGenerateContent", "", true, "POST /v1beta/models/gemini-x:streamGenerateContent model gemini-x",
			`{"error":{"code":400,"message":%s,"status":"INVALID_ARGUMENT"}}`},
		{"ollama", "/api/chat", "qwen3", true, "POST /api/chat model qwen3", `{"error":%s}`},
		{"unknown-queue", "/v1/responses", "gpt-never-recorded", false, "POST /v1/responses model gpt-never-recorded", openAIShape},
	}
	for _, rt := range routes {
		for _, c := range cases {
			t.Run(rt.name+"/"+c.name, func(t *testing.T) {
				var xs []*exchange.Exchange
				recorded := 0
				if c.recorded {
					xs = append(xs, queueExchange(c.path, c.model, 1))
					recorded = 1
				}
				s := newServer(t, llmserver.Options{Exchanges: recordedList(xs...)})
				tap, ca := newTap(t, s)
				client, base := rt.via(t, tap, ca, upstream)
				u := base + c.path + "?alt=sse&key=sk-secret-in-query"
				if c.recorded {
					if n := answerNumber(t, post(t, client, u, requestBody(c.model, "hi"))); n != 1 {
						t.Errorf("the first request got exchange %d, want 1", n)
					}
				}
				resp := post(t, client, u, requestBody(c.model, "hi"))
				got := readAllBody(t, resp)
				wantBody := fmt.Sprintf(c.shape, q(msg(c.queue, recorded, recorded+1)))
				if resp.StatusCode != http.StatusBadRequest || string(got) != wantBody {
					t.Errorf("got %d %s\nwant 400 %s", resp.StatusCode, got, wantBody)
				}
				if g := resp.Header.Get("Content-Type"); g != "application/json" {
					t.Errorf("Content-Type %q, want application/json", g)
				}
				r := s.Report()
				if len(r.Unanswered) != 1 {
					t.Fatalf("report lists %d unanswered requests, want 1: %v", len(r.Unanswered), r.Unanswered)
				}
				un := r.Unanswered[0]
				wantReason := fmt.Sprintf("lane has %d recorded, this is request %d", recorded, recorded+1)
				if un.Method != http.MethodPost || un.Queue != c.queue || un.Reason != wantReason || !strings.Contains(un.URL, c.path) {
					t.Errorf("unanswered %+v; want POST, queue %q, reason %q, a URL with %s", un, c.queue, wantReason, c.path)
				}
				if strings.Contains(un.URL, "sk-secret-in-query") || strings.Contains(un.String(), "sk-secret-in-query") {
					t.Errorf("the report shows the key in the query: %s", un)
				}
				if r.Served != recorded || len(r.Unrequested) != 0 {
					t.Errorf("report: served %d, unrequested %v; want %d, none", r.Served, r.Unrequested, recorded)
				}
			})
		}
	}
}

// TestUnrequested: the recorded exchanges no request asked for are
// reported in recorded order.
func TestUnrequested(t *testing.T) {
	xs := recordedList(
		queueExchange("/v1/responses", "gpt-main", 1),
		queueExchange("/v1/responses", "gpt-title", 2),
		queueExchange("/v1/responses", "gpt-main", 3),
	)
	s := newServer(t, llmserver.Options{Exchanges: xs})
	tap, ca := newTap(t, s)
	client, base := viaBaseURL(t, tap, ca, upstream)
	if n := answerNumber(t, post(t, client, base+"/v1/responses", requestBody("gpt-main", "hi"))); n != 1 {
		t.Errorf("got exchange %d, want 1", n)
	}
	r := s.Report()
	var got []string
	for _, u := range r.Unrequested {
		got = append(got, fmt.Sprintf("#%d seq %d", u.Number, u.Seq))
	}
	if want := []string{"#2 seq 20", "#3 seq 30"}; !slices.Equal(got, want) || r.Unrequested[0].Exchange != xs[1].Exchange {
		t.Errorf("unrequested %v, want %v with their exchanges", got, want)
	}
	if r.Served != 1 {
		t.Errorf("served %d, want 1", r.Served)
	}
}

// TestRecordedFailures: an exchange recorded without a response replays as
// a failed round trip, which the tap answers 502, and one recorded with
// its body cut replays its bytes and then a broken stream.
func TestRecordedFailures(t *testing.T) {
	events := splitEvents(readCapture(t, "anth_tool_real.sse"), false)
	noResponse := &exchange.Exchange{
		Method:      http.MethodPost,
		URL:         upstream + "/v1/messages",
		RequestBody: requestBody("claude-x", "hi"),
		Duration:    time.Hour,
		End:         exchange.EndUpstreamFailed,
		Error:       "no response: dial tcp 10.1.2.3:443: connect: connection refused",
	}
	cut := streamed(upstream+"/v1/messages", "claude-x", "text/event-stream", events[:3])
	cut.End, cut.Error = exchange.EndCut, "response cut after 1234 bytes: read tcp: connection reset by peer"
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			s := newServer(t, llmserver.Options{Exchanges: recordedList(noResponse, cut)})
			tap, ca := newTap(t, s)
			client, base := rt.via(t, tap, ca, upstream)

			resp := post(t, client, base+"/v1/messages", requestBody("claude-x", "hi"))
			body := readAllBody(t, resp)
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "connection refused") {
				t.Errorf("got %d %q; want 502 with the recorded error", resp.StatusCode, body)
			}

			resp = post(t, client, base+"/v1/messages", requestBody("claude-x", "hi"))
			evs, err := readEvents(resp.Body)
			resp.Body.Close()
			if len(evs) != 3 || err == nil || err == io.EOF {
				t.Errorf("got %d events and %v; want the 3 recorded and a broken stream", len(evs), err)
			}
			if r := s.Report(); r.Served != 2 || len(r.Unrequested)+len(r.Unanswered) != 0 {
				t.Errorf("report: served %d, unanswered %v, unrequested %v; want 2, none, none", r.Served, r.Unanswered, r.Unrequested)
			}
		})
	}
}

// TestCompare: each request is compared with its recorded twin, decoded
// from its Content-Encoding and with credentials masked; the first
// difference of each exchange is reported.
func TestCompare(t *testing.T) {
	x1 := queueExchange("/v1/responses", "gpt-main", 1)
	x2 := queueExchange("/v1/responses", "gpt-main", 2)
	x2.RequestBody = requestBody("gpt-main", "world")
	var mu sync.Mutex // guards lives
	var lives []*exchange.Exchange
	compare := func(_ int, recorded, live *exchange.Exchange) (llmserver.Drift, bool) {
		mu.Lock()
		lives = append(lives, live)
		mu.Unlock()
		var r, l struct{ Input string }
		json.Unmarshal(recorded.RequestBody, &r)
		json.Unmarshal(live.RequestBody, &l)
		return llmserver.Drift{Mismatch: mismatch.Mismatch{Path: "input", Recorded: r.Input, Live: l.Input}, More: 2}, r.Input != l.Input
	}
	s := newServer(t, llmserver.Options{Exchanges: recordedList(x1, x2), Compare: compare})
	tap, ca := newTap(t, s)
	client, base := viaBaseURL(t, tap, ca, upstream)

	// The first request, gzip-encoded, is the recorded one.
	var zbody bytes.Buffer
	zw := gzip.NewWriter(&zbody)
	zw.Write(requestBody("gpt-main", "hello"))
	zw.Close()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/responses", &zbody)
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Authorization", "Bearer sk-live-key")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := answerNumber(t, resp); n != 1 {
		t.Errorf("the gzip request got exchange %d, want 1: its queue comes from its decoded body", n)
	}
	// The second differs from its twin.
	if n := answerNumber(t, post(t, client, base+"/v1/responses", requestBody("gpt-main", "WORLD"))); n != 2 {
		t.Errorf("got exchange %d, want 2", n)
	}

	r := s.Report()
	want := []llmserver.Drift{{Number: 2, Mismatch: mismatch.Mismatch{Path: "input", Recorded: "world", Live: "WORLD"}, More: 2}}
	if !slices.Equal(r.Drift, want) {
		t.Errorf("drift %+v, want %+v", r.Drift, want)
	}
	if g, w := r.Drift[0].String(), `llm #2: the request differs from the recording at input: recorded "world", live "WORLD" (and 2 more differences)`; g != w {
		t.Errorf("Drift.String() = %q, want %q", g, w)
	}
	if len(lives) != 2 {
		t.Fatalf("Compare was called %d times, want 2", len(lives))
	}
	// Compare runs off the request's path: the two calls may come in
	// either order.
	live := lives[0]
	if bytes.Contains(live.RequestBody, []byte("WORLD")) {
		live = lives[1]
	}
	if string(live.RequestBody) != string(requestBody("gpt-main", "hello")) || live.RequestEncoding != "gzip" {
		t.Errorf("live body %q encoding %q; want the decoded body and gzip", live.RequestBody, live.RequestEncoding)
	}
	if g := live.RequestHeaders.Get("Authorization"); strings.Contains(g, "sk-live-key") || g == "" {
		t.Errorf("live Authorization %q; want it masked", g)
	}
	if live.Method != http.MethodPost || !strings.HasSuffix(live.URL, "/v1/responses") {
		t.Errorf("live request %s %s; want POST .../v1/responses", live.Method, live.URL)
	}
}

// TestSpeed: with a speed, the header waits for the recorded time to first
// byte and each chunk for its recorded time, until the request is
// cancelled; a large speed makes the waits short.
func TestSpeed(t *testing.T) {
	events := splitEvents(readCapture(t, "resp_text.sse"), false)

	t.Run("fast", func(t *testing.T) {
		x := streamed(upstream+"/v1/responses", "gpt-x", "text/event-stream", events)
		s := newServer(t, llmserver.Options{Exchanges: recordedList(x), Speed: 1e9})
		slept := make(chan int, 100)
		llmserver.SetHooks(s, nil, func(n int) { slept <- n }, nil)
		tap, ca := newTap(t, s)
		client, base := viaBaseURL(t, tap, ca, upstream)
		got := readAllBody(t, post(t, client, base+"/v1/responses", x.RequestBody))
		if !bytes.Equal(got, x.Body()) {
			t.Errorf("body differs from the recording")
		}
		if len(slept) == 0 {
			t.Errorf("the replay never waited for a recorded time")
		}
	})

	t.Run("headers", func(t *testing.T) {
		x := streamed(upstream+"/v1/responses", "gpt-x", "text/event-stream", events)
		x.TTFB = time.Hour
		s := newServer(t, llmserver.Options{Exchanges: recordedList(x), Speed: 1})
		slept := make(chan int, 1)
		llmserver.SetHooks(s, nil, func(n int) { slept <- n }, nil)
		tap, ca := newTap(t, s)
		client, base := viaBaseURL(t, tap, ca, upstream)
		h := sendHeld(t, client, base+"/v1/responses", x.RequestBody, nil)
		waitSignal(t, slept, "the wait for the time to first byte")
		h.checkNotEnded(t)
		if res := h.cancelAndWait(t); len(res.body) != 0 || res.err == nil {
			t.Errorf("the cancelled request got %q and %v; want nothing of the recording and an error", res.body, res.err)
		}
	})

	t.Run("chunks", func(t *testing.T) {
		x := streamed(upstream+"/v1/responses", "gpt-x", "text/event-stream", events)
		x.TTFB, x.Chunks[0].At, x.Chunks[1].At = 0, 0, time.Hour
		s := newServer(t, llmserver.Options{Exchanges: recordedList(x), Speed: 1})
		slept := make(chan int, 1)
		llmserver.SetHooks(s, nil, func(n int) { slept <- n }, nil)
		tap, ca := newTap(t, s)
		client, base := viaBaseURL(t, tap, ca, upstream)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp, err := postCtx(t, ctx, client, base+"/v1/responses", x.RequestBody)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		first := make([]byte, len(x.Chunks[0].Data))
		if _, err := io.ReadFull(resp.Body, first); err != nil {
			t.Fatalf("reading the first chunk: %v", err)
		}
		waitSignal(t, slept, "the wait for the second chunk")
		cancel()
		rest, err := io.ReadAll(resp.Body)
		if err == nil || len(rest) != 0 {
			t.Errorf("after the first chunk, read %d more bytes and %v; want none and an error, the second chunk being an hour away", len(rest), err)
		}
	})
}

// TestNew: New refuses options it cannot serve.
func TestNew(t *testing.T) {
	x := queueExchange("/v1/responses", "gpt-x", 1)
	noResponse := &exchange.Exchange{Method: http.MethodPost, URL: upstream + "/v1/responses", End: exchange.EndUpstreamFailed, Error: "no response: EOF"}
	cases := []struct {
		name string
		opts llmserver.Options
		want error
	}{
		{"nil exchange", llmserver.Options{Exchanges: llmserver.List{{Number: 1}}}, llmserver.ErrInvalidOptions},
		{"fault of no exchange", llmserver.Options{Exchanges: recordedList(x), Faults: map[int]llmserver.Fault{2: {Kind: llmserver.FaultHang}}}, llmserver.ErrInvalidOptions},
		{"invalid fault", llmserver.Options{Exchanges: recordedList(x), Faults: map[int]llmserver.Fault{1: {Kind: llmserver.FaultStatus, Status: 200}}}, llmserver.ErrInvalidFault},
		{"fault of no kind", llmserver.Options{Exchanges: recordedList(x), Faults: map[int]llmserver.Fault{1: {}}}, llmserver.ErrInvalidFault},
		{"cut of no response", llmserver.Options{Exchanges: recordedList(noResponse), Faults: map[int]llmserver.Fault{1: {Kind: llmserver.FaultCut, Events: 1}}}, llmserver.ErrInvalidFault},
		{"negative speed", llmserver.Options{Speed: -1}, llmserver.ErrInvalidOptions},
		{"NaN speed", llmserver.Options{Speed: math.NaN()}, llmserver.ErrInvalidOptions},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := llmserver.New(c.opts); !errors.Is(err, c.want) {
				t.Errorf("New: %v, want %v", err, c.want)
			}
		})
	}
	if _, err := llmserver.New(llmserver.Options{}); err != nil {
		t.Errorf("New with zero Options: %v, want nil", err)
	}
}

// TestZeroOptions: a Server of zero Options answers every request as
// unanswerable.
func TestZeroOptions(t *testing.T) {
	s := newServer(t, llmserver.Options{})
	tap, ca := newTap(t, s)
	client, base := viaBaseURL(t, tap, ca, upstream)
	resp := post(t, client, base+"/v1/responses", requestBody("gpt-x", "hi"))
	readAllBody(t, resp)
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Acptap-Replay") != "unanswered" {
		t.Errorf("got %d, %s %q; want 400 marked unanswered", resp.StatusCode, "X-Acptap-Replay", resp.Header.Get("X-Acptap-Replay"))
	}
	if r := s.Report(); len(r.Unanswered) != 1 || r.Served != 0 {
		t.Errorf("report: served %d, unanswered %v; want 0 and 1", r.Served, r.Unanswered)
	}
}

// TestDriftString: a drift report is one line that shows two long strings
// around their first difference, and counts the other differences.
func TestDriftString(t *testing.T) {
	prompt := "You are acptap's test agent, a coding assistant. The working directory is <cwd>. Today's date is <date>. Use the read_file tool to read files."
	changed := strings.Replace(prompt, "Use the", "Answer in French. Use the", 1)
	tests := []struct {
		d    llmserver.Drift
		want string
	}{
		{llmserver.Drift{Number: 1, Mismatch: mismatch.Mismatch{Path: "$.body.messages[0].content", Recorded: prompt, Live: changed}},
			`llm #1: the request differs from the recording at $.body.messages[0].content, character 106: recorded …"ctory is <cwd>. Today's date is <date>. Use the read_file tool to read files.", live …"ctory is <cwd>. Today's date is <date>. Answer in French. Use the read_file tool"…`},
		{llmserver.Drift{Number: 3, Mismatch: mismatch.Mismatch{Path: "$.body.model", Recorded: "a", Live: "b"}, More: 1},
			`llm #3: the request differs from the recording at $.body.model: recorded "a", live "b" (and 1 more difference)`},
		{llmserver.Drift{Number: 2, Mismatch: mismatch.Mismatch{Path: "$.body.tools", Recorded: []any{"x"}, Live: nil}},
			`llm #2: the request differs from the recording at $.body.tools: recorded ["x"], live null`},
	}
	for _, tt := range tests {
		got := tt.d.String()
		if got != tt.want {
			t.Errorf("String() =\n%s\nwant\n%s", got, tt.want)
		}
		if strings.Contains(got, "\n") {
			t.Errorf("String() has several lines: %q", got)
		}
	}
}

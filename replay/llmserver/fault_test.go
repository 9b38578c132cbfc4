package llmserver_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/acptap/acptap/replay/llmserver"
)

var parseCases = []struct {
	spec string
	want llmserver.Fault
	ok   bool
}{
	{"status:429", llmserver.Fault{Kind: llmserver.FaultStatus, Status: 429}, true},
	{"status:429:retry-after=7", llmserver.Fault{Kind: llmserver.FaultStatus, Status: 429, RetryAfter: "7"}, true},
	{"status:503:retry-after=0", llmserver.Fault{Kind: llmserver.FaultStatus, Status: 503, RetryAfter: "0"}, true},
	{"status:500:retry-after=007", llmserver.Fault{Kind: llmserver.FaultStatus, Status: 500, RetryAfter: "7"}, true},
	{"status:400", llmserver.Fault{Kind: llmserver.FaultStatus, Status: 400}, true},
	{"status:599", llmserver.Fault{Kind: llmserver.FaultStatus, Status: 599}, true},
	{"hang", llmserver.Fault{Kind: llmserver.FaultHang}, true},
	{"cut:0", llmserver.Fault{Kind: llmserver.FaultCut, Events: 0}, true},
	{"cut:3", llmserver.Fault{Kind: llmserver.FaultCut, Events: 3}, true},
	{"cut:007", llmserver.Fault{Kind: llmserver.FaultCut, Events: 7}, true},
	{"reset", llmserver.Fault{Kind: llmserver.FaultReset, Events: -1}, true},
	{"reset:2", llmserver.Fault{Kind: llmserver.FaultReset, Events: 2}, true},
	{"malformed", llmserver.Fault{Kind: llmserver.FaultMalformed}, true},

	{"", llmserver.Fault{}, false},
	{"status", llmserver.Fault{}, false},
	{"status:", llmserver.Fault{}, false},
	{"status:200", llmserver.Fault{}, false},
	{"status:399", llmserver.Fault{}, false},
	{"status:600", llmserver.Fault{}, false},
	{"status:+429", llmserver.Fault{}, false},
	{"status:42x", llmserver.Fault{}, false},
	{"status:0429", llmserver.Fault{}, false},
	{"status:429:", llmserver.Fault{}, false},
	{"status:429:retry-after=", llmserver.Fault{}, false},
	{"status:429:retry-after=-1", llmserver.Fault{}, false},
	{"status:429:retry-after=1.5", llmserver.Fault{}, false},
	{"status:429:retry=5", llmserver.Fault{}, false},
	{"status:429:retry-after=5:x", llmserver.Fault{}, false},
	{"hang:1", llmserver.Fault{}, false},
	{"malformed:x", llmserver.Fault{}, false},
	{"cut", llmserver.Fault{}, false},
	{"cut:", llmserver.Fault{}, false},
	{"cut:-1", llmserver.Fault{}, false},
	{"cut:x", llmserver.Fault{}, false},
	{"cut:1e3", llmserver.Fault{}, false},
	{"cut:9999999999", llmserver.Fault{}, false},
	{"reset:", llmserver.Fault{}, false},
	{"reset:-1", llmserver.Fault{}, false},
	{"Hang", llmserver.Fault{}, false},
	{" hang", llmserver.Fault{}, false},
	{"3=hang", llmserver.Fault{}, false},
	{"timeout", llmserver.Fault{}, false},
}

func TestParseFault(t *testing.T) {
	for _, c := range parseCases {
		got, err := llmserver.ParseFault(c.spec)
		switch {
		case c.ok && err != nil:
			t.Errorf("ParseFault(%q): %v, want %+v", c.spec, err, c.want)
		case c.ok && got != c.want:
			t.Errorf("ParseFault(%q) = %+v, want %+v", c.spec, got, c.want)
		case !c.ok && !errors.Is(err, llmserver.ErrInvalidFault):
			t.Errorf("ParseFault(%q) = %+v, %v; want an error wrapping ErrInvalidFault", c.spec, got, err)
		case !c.ok && !strings.Contains(err.Error(), fmt.Sprintf("%q", c.spec)):
			t.Errorf("ParseFault(%q): error %q does not quote the spec", c.spec, err)
		}
	}
}

// FuzzParseFault: whatever the spec, ParseFault either fails with
// ErrInvalidFault or returns a fault that New accepts and whose String it
// reads back as the same fault.
func FuzzParseFault(f *testing.F) {
	for _, c := range parseCases {
		f.Add(c.spec)
	}
	x := queueExchange("/v1/responses", "gpt-x", 1)
	f.Fuzz(func(t *testing.T, spec string) {
		got, err := llmserver.ParseFault(spec)
		if err != nil {
			if !errors.Is(err, llmserver.ErrInvalidFault) {
				t.Fatalf("ParseFault(%q): %v, which does not wrap ErrInvalidFault", spec, err)
			}
			return
		}
		again, err := llmserver.ParseFault(got.String())
		if err != nil || again != got {
			t.Fatalf("ParseFault(%q) = %+v, whose String %q reads back as %+v, %v", spec, got, got.String(), again, err)
		}
		if _, err := llmserver.New(llmserver.Options{Exchanges: recordedList(x), Faults: map[int]llmserver.Fault{1: got}}); err != nil {
			t.Fatalf("New refuses the fault %+v of %q: %v", got, spec, err)
		}
	})
}

// checkRetry checks that a request after a fault gets the recorded body,
// and the report that the exchange was served once and its fault applied.
func checkRetry(t *testing.T, s *llmserver.Server, client *http.Client, u string, reqBody, want []byte) {
	t.Helper()
	resp := post(t, client, u, reqBody)
	if got := readAllBody(t, resp); resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
		t.Errorf("the retry got %d and %d bytes, want 200 and the %d recorded", resp.StatusCode, len(got), len(want))
	}
	r := s.Report()
	if r.Served != 1 || len(r.Faulted) != 1 || r.Faulted[0].Number != 1 || len(r.Unrequested)+len(r.Unanswered) != 0 {
		t.Errorf("report: served %d, faulted %v, unrequested %v, unanswered %v; want 1, [1], none, none", r.Served, r.Faulted, r.Unrequested, r.Unanswered)
	}
}

// TestFaultStatus: an injected status is answered with its Retry-After and
// an error in the wire format's shape, and the retry gets the recorded
// response.
func TestFaultStatus(t *testing.T) {
	c := captures[2] // Anthropic
	cases := []struct {
		spec, retryAfter string
		status           int
	}{
		{"status:429:retry-after=7", "7", 429},
		{"status:500", "", 500},
	}
	for _, rt := range routes {
		for _, fc := range cases {
			t.Run(rt.name+"/"+fc.spec, func(t *testing.T) {
				x := captured(t, c, upstream)
				f, _ := llmserver.ParseFault(fc.spec)
				s := newServer(t, llmserver.Options{Exchanges: recordedList(x), Faults: map[int]llmserver.Fault{1: f}})
				tap, ca := newTap(t, s)
				client, base := rt.via(t, tap, ca, upstream)

				resp := post(t, client, base+c.path, x.RequestBody)
				got := readAllBody(t, resp)
				msg, _ := json.Marshal("acptap replay: injected fault " + fc.spec + " on llm #1")
				want := `{"type":"error","error":{"type":"acptap_fault","message":` + string(msg) + `}}`
				if resp.StatusCode != fc.status || string(got) != want {
					t.Errorf("got %d %s\nwant %d %s", resp.StatusCode, got, fc.status, want)
				}
				if g := resp.Header.Get("Retry-After"); g != fc.retryAfter {
					t.Errorf("Retry-After %q, want %q", g, fc.retryAfter)
				}
				checkRetry(t, s, client, base+c.path, x.RequestBody, x.Body())
			})
		}
	}
}

// TestFaultHang: a hanging request gets no answer until it is cancelled,
// and the retry gets the recorded response.
func TestFaultHang(t *testing.T) {
	c := captures[1] // OpenAI Responses
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			x := captured(t, c, upstream)
			s := newServer(t, llmserver.Options{Exchanges: recordedList(x), Faults: map[int]llmserver.Fault{1: {Kind: llmserver.FaultHang}}})
			waiting := make(chan int, 1)
			llmserver.SetHooks(s, func(n int) { waiting <- n }, nil, nil)
			tap, ca := newTap(t, s)
			client, base := rt.via(t, tap, ca, upstream)

			h := sendHeld(t, client, base+c.path, x.RequestBody, nil)
			if n := waitSignal(t, waiting, "the request to hang"); n != 1 {
				t.Errorf("exchange %d hangs, want 1", n)
			}
			h.checkNotEnded(t)
			if res := h.cancelAndWait(t); len(res.body) != 0 {
				t.Errorf("the cancelled request got %q; want nothing of the recording", res.body)
			}
			checkRetry(t, s, client, base+c.path, x.RequestBody, x.Body())
		})
	}
}

// recordedEvents returns the events (SSE) or non-blank lines (NDJSON) of
// a capture, as raw bytes.
func recordedEvents(t *testing.T, c capture) [][]byte {
	t.Helper()
	body := readCapture(t, c.file)
	var out [][]byte
	if strings.HasSuffix(c.file, ".ndjson") {
		lines, err := readLines(bytes.NewReader(body))
		if err != io.EOF {
			t.Fatal(err)
		}
		for _, l := range lines {
			if l.Value != nil {
				out = append(out, l.Raw)
			}
		}
		return out
	}
	evs, err := readEvents(bytes.NewReader(body))
	if err != io.EOF {
		t.Fatal(err)
	}
	for _, ev := range evs {
		out = append(out, ev.Raw)
	}
	return out
}

// readStream reads the events (SSE) or lines (NDJSON) of a capture's
// replay from r, as raw bytes, until an error, which it returns.
func readStream(c capture, r io.Reader) ([][]byte, error) {
	var out [][]byte
	if strings.HasSuffix(c.file, ".ndjson") {
		lines, err := readLines(r)
		for _, l := range lines {
			out = append(out, l.Raw)
		}
		return out, err
	}
	evs, err := readEvents(r)
	for _, ev := range evs {
		out = append(out, ev.Raw)
	}
	return out, err
}

// TestFaultCut: a cut stream sends exactly the first K events, then
// breaks; the retry gets the recorded response.
func TestFaultCut(t *testing.T) {
	cases := []struct {
		c    capture
		spec string
		k    int // events expected; -1 for all
	}{
		{captures[2], "cut:2", 2},    // Anthropic
		{captures[3], "cut:1", 1},    // Gemini, CRLF
		{captures[4], "cut:1", 1},    // Ollama NDJSON
		{captures[0], "cut:0", 0},    // OpenAI Chat
		{captures[4], "cut:100", -1}, // fewer events than K
	}
	for _, rt := range routes {
		for _, fc := range cases {
			t.Run(rt.name+"/"+fc.c.file+"/"+fc.spec, func(t *testing.T) {
				x := captured(t, fc.c, upstream)
				f, _ := llmserver.ParseFault(fc.spec)
				s := newServer(t, llmserver.Options{Exchanges: recordedList(x), Faults: map[int]llmserver.Fault{1: f}})
				tap, ca := newTap(t, s)
				client, base := rt.via(t, tap, ca, upstream)
				want := recordedEvents(t, fc.c)
				if fc.k >= 0 {
					want = want[:fc.k]
				}

				resp := post(t, client, base+fc.c.path, x.RequestBody)
				got, err := readStream(fc.c, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d, want the recorded 200", resp.StatusCode)
				}
				if !slices.EqualFunc(got, want, bytes.Equal) {
					t.Errorf("got %d events before the cut, want the first %d recorded:\ngot  %q\nwant %q", len(got), len(want), got, want)
				}
				if err == nil || err == io.EOF {
					t.Errorf("the stream ended with %v, want a broken stream", err)
				}
				checkRetry(t, s, client, base+fc.c.path, x.RequestBody, x.Body())
			})
		}
	}
}

// TestFaultReset: a reset stream sends the first K events (half without K)
// and then the connection is reset: a TCP RST on HTTP/1, a stream reset on
// HTTP/2; the retry gets the recorded response.
func TestFaultReset(t *testing.T) {
	c := captures[2] // Anthropic
	all := len(recordedEvents(t, c))
	for _, rt := range routes {
		for _, fc := range []struct {
			spec string
			k    int
		}{{"reset:2", 2}, {"reset", all / 2}} {
			t.Run(rt.name+"/"+fc.spec, func(t *testing.T) {
				x := captured(t, c, upstream)
				f, _ := llmserver.ParseFault(fc.spec)
				s := newServer(t, llmserver.Options{Exchanges: recordedList(x), Faults: map[int]llmserver.Fault{1: f}})
				// The reset comes once the client has what was sent, which
				// it could otherwise lose to the RST.
				p := newProgress()
				llmserver.SetHooks(s, nil, nil, p.gate)
				tap, ca := newTap(t, s)
				client, base := rt.via(t, tap, ca, upstream)

				resp := post(t, client, base+c.path, x.RequestBody)
				got, err := readStream(c, &countingReader{r: resp.Body, p: p})
				resp.Body.Close()
				if want := recordedEvents(t, c)[:fc.k]; !slices.EqualFunc(got, want, bytes.Equal) {
					t.Errorf("got %d events before the reset, want the first %d recorded", len(got), len(want))
				}
				switch {
				case err == nil || err == io.EOF:
					t.Errorf("the stream ended with %v, want a reset", err)
				case !rt.h2 && !errors.Is(err, syscall.ECONNRESET):
					t.Errorf("the stream ended with %v, want a connection reset (ECONNRESET)", err)
				}
				p.disarm()
				checkRetry(t, s, client, base+c.path, x.RequestBody, x.Body())
			})
		}
	}
}

// TestFaultMalformed: a malformed stream has exactly one event whose JSON
// payload is cut short, in the middle of the stream, and otherwise the
// recorded events and a clean end; it consumes the exchange.
func TestFaultMalformed(t *testing.T) {
	for _, rt := range routes {
		for _, c := range captures {
			t.Run(rt.name+"/"+c.file, func(t *testing.T) {
				x := captured(t, c, upstream)
				s := newServer(t, llmserver.Options{Exchanges: recordedList(x), Faults: map[int]llmserver.Fault{1: {Kind: llmserver.FaultMalformed}}})
				tap, ca := newTap(t, s)
				client, base := rt.via(t, tap, ca, upstream)
				want := recordedEvents(t, c)

				resp := post(t, client, base+c.path, x.RequestBody)
				got, err := readStream(c, resp.Body)
				resp.Body.Close()
				if err != io.EOF {
					t.Errorf("the stream ended with %v, want a clean end", err)
				}
				if len(got) != len(want) {
					t.Fatalf("got %d events, want the %d recorded", len(got), len(want))
				}
				var garbled []int
				for i := range got {
					if !bytes.Equal(got[i], want[i]) {
						garbled = append(garbled, i)
					}
				}
				if len(garbled) != 1 {
					t.Fatalf("events %v differ from the recording, want exactly one", garbled)
				}
				i := garbled[0]
				if i != len(want)/2 {
					t.Errorf("event %d of %d is garbled, want the middle one, %d", i, len(want), len(want)/2)
				}
				gotPayload, wantPayload := payload(t, c, got[i]), payload(t, c, want[i])
				if json.Valid(gotPayload) || !bytes.HasPrefix(wantPayload, gotPayload) || len(gotPayload) == 0 {
					t.Errorf("garbled event %d has payload %q; want a non-empty prefix of the recorded %q that is not JSON", i, gotPayload, wantPayload)
				}
				r := s.Report()
				if r.Served != 1 || !slices.Equal(r.Faulted, []llmserver.AppliedFault{{Number: 1, Fault: llmserver.Fault{Kind: llmserver.FaultMalformed}}}) || len(r.Unrequested) != 0 {
					t.Errorf("report: served %d, faulted %v, unrequested %v; want 1, [1], none", r.Served, r.Faulted, r.Unrequested)
				}
			})
		}
	}
}

// payload returns the JSON payload of a raw event: the data of an SSE
// event, or an NDJSON line without its line break.
func payload(t *testing.T, c capture, raw []byte) []byte {
	t.Helper()
	if strings.HasSuffix(c.file, ".ndjson") {
		return bytes.TrimRight(raw, "\r\n")
	}
	evs, err := readEvents(bytes.NewReader(raw))
	if len(evs) != 1 {
		t.Fatalf("event %q parses as %d events, %v", raw, len(evs), err)
	}
	return []byte(evs[0].Data)
}

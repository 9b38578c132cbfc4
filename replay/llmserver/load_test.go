package llmserver_test

import (
	"bytes"
	"errors"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/replay/llmserver"
)

// stored is a recording's exchanges as a replay that loads them as they
// are served keeps them: their heads in memory, the exchanges encoded,
// decoded by Load, which counts its calls.
type stored struct {
	heads []llmserver.Recorded
	whole map[int][]byte // by number, as exchange.Marshal encodes them
	fail  map[int]error  // Load's error for a number

	mu    sync.Mutex // guards loads
	loads map[int]int
}

// storeExchanges keeps rs as stored: each Exchange encoded, and its head,
// with its request body's facts read, without the body.
func storeExchanges(t *testing.T, rs []llmserver.Recorded) *stored {
	t.Helper()
	st := &stored{whole: map[int][]byte{}, fail: map[int]error{}, loads: map[int]int{}}
	for _, r := range rs {
		b, err := exchange.Marshal(r.Exchange)
		if err != nil {
			t.Fatal(err)
		}
		st.whole[r.Number] = b
		x := r.Exchange
		head := &exchange.Exchange{Route: x.Route, Method: x.Method, URL: x.URL, Status: x.Status}
		st.heads = append(st.heads, llmserver.Recorded{Number: r.Number, Seq: r.Seq, Exchange: head, Facts: llmserver.ReadRequestFacts(x)})
	}
	return st
}

func (st *stored) Len() int                      { return len(st.heads) }
func (st *stored) Head(n int) llmserver.Recorded { return st.heads[n-1] }

func (st *stored) Load(n int) (*exchange.Exchange, error) {
	st.mu.Lock()
	st.loads[n]++
	st.mu.Unlock()
	if err := st.fail[n]; err != nil {
		return nil, err
	}
	return exchange.Unmarshal(st.whole[n])
}

// loadsNothing is Exchanges whose Load returns no exchange and no error.
type loadsNothing struct{ llmserver.Exchanges }

func (loadsNothing) Load(int) (*exchange.Exchange, error) { return nil, nil }

func (st *stored) loadCounts() map[int]int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.loads)
}

// TestLoad: a Server given only the heads of the recorded exchanges and
// their request bodies' facts queues them as one given the whole
// exchanges does, loads each exchange when a request is served from it,
// once per request, compares the request with the whole recorded one, and
// reports the exchanges never requested by their heads.
func TestLoad(t *testing.T) {
	const path = "/v1/messages"
	title := queueExchange(path, "claude-main", 2)
	title.RequestBody = titleBody("claude-main")
	chat := queueExchange("/v1/chat/completions", "gpt-x", 6)
	xs := recordedList(
		queueExchange(path, "claude-main", 1),
		title,
		queueExchange(path, "claude-main", 3),
		httpExchange("GET", upstream+"/pkg/left-pad", `{"number":4}`),
		httpExchange("GET", upstream+"/pkg/unasked", `{"number":5}`),
		chat,
	)
	st := storeExchanges(t, xs)
	var mu sync.Mutex // guards compared
	var compared [][]byte
	compare := func(_ int, recorded, live *exchange.Exchange) (llmserver.Drift, bool) {
		mu.Lock()
		defer mu.Unlock()
		compared = append(compared, recorded.RequestBody)
		return llmserver.Drift{}, false
	}
	s := newServer(t, llmserver.Options{Exchanges: st, Compare: compare})
	tap, ca := newTap(t, s)
	client, base := viaProxy(false)(t, tap, ca, upstream)
	// The title first: it has its queue by its body's facts alone.
	if n := answerNumber(t, post(t, client, base+path, titleBody("claude-main"))); n != 2 {
		t.Errorf("the title request got exchange %d, want 2", n)
	}
	for _, want := range []int{1, 3} {
		if n := answerNumber(t, post(t, client, base+path, requestBody("claude-main", "hello"))); n != want {
			t.Errorf("a turn's request got exchange %d, want %d", n, want)
		}
	}
	for range 2 {
		if status, body := do(t, client, "GET", base+"/pkg/left-pad"); status != http.StatusOK || body != `{"number":4}` {
			t.Errorf("GET /pkg/left-pad: %d %q, want 200 and the recorded answer", status, body)
		}
	}

	r := s.Report()
	if want := map[int]int{1: 1, 2: 1, 3: 1, 4: 2}; !maps.Equal(st.loadCounts(), want) {
		t.Errorf("loads by number %v, want %v: each exchange served, once per request", st.loadCounts(), want)
	}
	// Compared with the whole recorded requests, each once: comparisons
	// run off the response path, in whatever order they finish.
	want := [][]byte{titleBody("claude-main"), requestBody("claude-main", "hello"), requestBody("claude-main", "hello")}
	slices.SortFunc(compared, bytes.Compare)
	slices.SortFunc(want, bytes.Compare)
	if !slices.EqualFunc(compared, want, bytes.Equal) {
		t.Errorf("recorded requests compared %q, want %q", compared, want)
	}
	if r.Served != 4 || len(r.Unanswered)+len(r.HTTPUnanswered)+len(r.LoadErrors) != 0 {
		t.Errorf("report: served %d, unanswered %v %v, load errors %v; want 4 and none", r.Served, r.Unanswered, r.HTTPUnanswered, r.LoadErrors)
	}
	if len(r.Unrequested) != 1 || r.Unrequested[0].Number != 6 || r.Unrequested[0].Exchange.URL != chat.URL || r.Unrequested[0].Exchange.Method != "POST" {
		t.Errorf("unrequested %+v, want llm #6, POST %s", r.Unrequested, chat.URL)
	}
	if len(r.HTTPUnrequested) != 1 || r.HTTPUnrequested[0].Number != 5 || r.HTTPUnrequested[0].Exchange.URL != upstream+"/pkg/unasked" {
		t.Errorf("http unrequested %+v, want llm #5, GET %s/pkg/unasked", r.HTTPUnrequested, upstream)
	}
}

// TestLoadError: an exchange Load fails to return fails its request's
// round trip, which the tap answers 502, and is reported as a LoadError
// wrapping Load's error; the other exchanges are served; an injected
// status fault does not need the exchange.
func TestLoadError(t *testing.T) {
	xs := recordedList(
		queueExchange("/v1/responses", "gpt-a", 1),
		queueExchange("/v1/responses", "gpt-b", 2),
		queueExchange("/v1/responses", "gpt-c", 3),
		queueExchange("/v1/responses", "gpt-d", 4),
	)
	st := storeExchanges(t, xs)
	cause := errors.New("the spool is gone")
	st.fail[1] = cause
	st.fail[4] = cause
	s := newServer(t, llmserver.Options{Exchanges: st, Faults: map[int]llmserver.Fault{4: {Kind: llmserver.FaultStatus, Status: 529}}})
	noExchange := llmserver.Options{Exchanges: loadsNothing{st}}
	s2 := newServer(t, noExchange)
	tap, ca := newTap(t, s)
	client, base := viaBaseURL(t, tap, ca, upstream)
	resp := post(t, client, base+"/v1/responses", requestBody("gpt-a", "hello"))
	readAllBody(t, resp)
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("the request of the exchange that did not load got %d, want 502", resp.StatusCode)
	}
	if n := answerNumber(t, post(t, client, base+"/v1/responses", requestBody("gpt-b", "hello"))); n != 2 {
		t.Errorf("got exchange %d, want 2", n)
	}
	resp = post(t, client, base+"/v1/responses", requestBody("gpt-d", "hello"))
	readAllBody(t, resp)
	if resp.StatusCode != 529 {
		t.Errorf("the faulted request got %d, want the injected 529", resp.StatusCode)
	}
	r := s.Report()
	if len(r.LoadErrors) != 1 {
		t.Fatalf("load errors %v, want llm #1's", r.LoadErrors)
	}
	le := r.LoadErrors[0]
	if le.Number != 1 || le.Seq != 10 || !errors.Is(le, cause) {
		t.Errorf("load error %+v, want llm #1, seq 10, wrapping %v", le, cause)
	}
	if got, want := le.Error(), "llm #1 (event 10): the spool is gone"; got != want {
		t.Errorf("load error %q, want %q", got, want)
	}

	tap2, ca2 := newTap(t, s2)
	client2, base2 := viaBaseURL(t, tap2, ca2, upstream)
	resp = post(t, client2, base2+"/v1/responses", requestBody("gpt-b", "hello"))
	readAllBody(t, resp)
	r2 := s2.Report()
	if len(r2.LoadErrors) != 1 || r2.LoadErrors[0].Error() != "llm #2 (event 20): no exchange was returned" || resp.StatusCode != http.StatusBadGateway {
		t.Errorf("a Load returning nothing: %d, load errors %v; want 502 and one saying so", resp.StatusCode, r2.LoadErrors)
	}
}

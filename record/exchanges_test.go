package record

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/stamp"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/stdiotap"
	"github.com/acptap/acptap/store"
)

// newTestWriter creates recording name in a fresh store.
func newTestWriter(t *testing.T, name string) (*store.Store, *store.Writer) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "acptap.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w, err := st.Create(store.Recording{Name: name}, false)
	if err != nil {
		t.Fatal(err)
	}
	return st, w
}

// storedEvents returns the events of recording name.
func storedEvents(t *testing.T, st *store.Store, name string) []store.Event {
	t.Helper()
	var events []store.Event
	if err := st.Events(name, func(e store.Event) error {
		events = append(events, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return events
}

// TestSequencer delivers frames and exchanges' records in an order other
// than their Stamps', as the tap and the framing deliver them: records of
// exchanges before any frame passed them, a frame of a later exchange
// first. The store holds them in the order of their Stamps, each exchange
// once, as it ended, or in flight where it had not.
func TestSequencer(t *testing.T) {
	st, w := newTestWriter(t, "seq")
	clock := stamp.NewClock()
	q := newSequencer(w, clock, stamp.FromNanos(stamp.Now()), t.Errorf)
	frame := func(s stamp.Stamp, text string) stdiotap.Line {
		return stdiotap.Line{Stream: stdiotap.Stdout, Stamp: s, At: s.Time(), Data: []byte(text)}
	}
	request := exchange.Exchange{Route: exchange.RouteBaseURL, Method: http.MethodPost, URL: "http://llm.test/v1/responses"}
	ended := func(body string) *exchange.Exchange {
		x := request
		x.RequestBody = []byte(body)
		x.Status, x.End = http.StatusOK, exchange.EndComplete
		return &x
	}
	inFlight := func(body string) *exchange.Exchange {
		x := request
		x.RequestBody = []byte(body)
		return &x
	}

	f1 := clock.Frame()
	x1, _ := q.Begin()
	f2 := clock.Frame()
	x2, _ := q.Begin()
	x3, _ := q.Begin()
	f3 := clock.Frame()
	x4, _ := q.Begin()

	q.Ended(x2, 0, ended("x2"))      // before any frame passed it
	q.Started(x1, 0, inFlight("x1")) // likewise, in flight
	q.frame(frame(f1, "f1"))         // passes nothing
	q.frame(frame(f2, "f2"))         // passes x1, stored in flight
	q.Ended(x1, 0, ended("x1"))      // in its place
	q.Started(x3, 0, inFlight("x3")) // early, and never ends
	q.frame(frame(f3, "f3"))         // passes x2 and x3
	q.Started(x4, 0, inFlight("x4")) // after the last frame
	q.Ended(x4, 0, ended("x4"))
	q.flush()
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}

	var got []string
	var last time.Duration
	for i, e := range storedEvents(t, st, "seq") {
		if e.Seq != uint64(i+1) {
			t.Errorf("event %d has Seq %d, want %d", i, e.Seq, i+1)
		}
		if e.Offset < last {
			t.Errorf("event %d at %v, before the one before it at %v", i, e.Offset, last)
		}
		last = e.Offset
		switch e.Kind {
		case store.KindFrame:
			got = append(got, string(e.Data))
		case store.KindExchange:
			x, err := exchange.Unmarshal(e.Data)
			if err != nil {
				t.Fatal(err)
			}
			state := "ended"
			if e.Flags&store.FlagIncomplete != 0 {
				state = "in flight"
			}
			got = append(got, string(x.RequestBody)+" "+state)
		}
	}
	want := []string{"f1", "x1 ended", "f2", "x2 ended", "x3 in flight", "f3", "x4 ended"}
	if !slices.Equal(got, want) {
		t.Errorf("stored %q, want %q", got, want)
	}
}

// TestSequencerTap records a real tap's exchanges through a sequencer
// into a store: the finished exchanges replace the incomplete ones in a
// bbolt file, in the order their requests came.
func TestSequencerTap(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" "+string(body))
	}))
	defer srv.Close()
	st, w := newTestWriter(t, "tap")
	ca, err := proxy.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	q := newSequencer(w, stamp.NewClock(), stamp.FromNanos(stamp.Now()), t.Errorf)
	tap, err := proxy.New(proxy.Config{CA: ca, Recorder: q, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	local, err := tap.AddBaseURL("OPENAI_BASE_URL", srv.URL+"/v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"one", "two"} {
		resp, err := http.Post(local+"/chat/completions", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err := tap.Close(); err != nil {
		t.Fatal(err)
	}
	// No session: nothing but flush places the exchanges.
	q.flush()
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	var xs []*exchange.Exchange
	for _, e := range storedEvents(t, st, "tap") {
		if e.Kind != store.KindExchange || e.Lane != store.LaneLLM || e.Offset < 0 {
			t.Errorf("event %d has kind %v lane %v offset %v, want KindExchange on LaneLLM at >= 0", e.Seq, e.Kind, e.Lane, e.Offset)
		}
		if e.Flags != 0 {
			t.Errorf("event %d has flags %v, want the finished exchange", e.Seq, e.Flags)
		}
		x, err := exchange.Unmarshal(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		xs = append(xs, x)
	}
	if len(xs) != 2 {
		t.Fatalf("store has %d events, want 2", len(xs))
	}
	for i, want := range []string{"one", "two"} {
		if got := string(xs[i].Body()); got != "POST /v1/chat/completions "+want || xs[i].End != exchange.EndComplete {
			t.Errorf("exchange %d has body %q, end %v; want complete", i, got, xs[i].End)
		}
	}
	if rec, err := st.Get("tap"); err != nil || rec.Exchanges != 2 {
		t.Errorf("recording counts %d exchanges (%v), want 2", rec.Exchanges, err)
	}
}

package record

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/proxy"
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

// TestStoreRecorder: an exchange is stored on the LLM lane at the Seq it
// got as its request arrived, before the frames that came after it; once
// as it ended, when it did, and in flight, with FlagIncomplete, when the
// recording stopped before.
func TestStoreRecorder(t *testing.T) {
	request := exchange.Exchange{Route: exchange.RouteBaseURL, Method: http.MethodPost, URL: "http://llm.test/v1/responses", RequestBody: []byte(`{"model":"m"}`)}
	for _, ended := range []bool{true, false} {
		name := map[bool]string{true: "ended", false: "in-flight"}[ended]
		t.Run(name, func(t *testing.T) {
			st, w := newTestWriter(t, name)
			r := storeRecorder{w: w, logf: t.Errorf}
			id := r.Begin()
			w.Append(store.Event{Kind: store.KindFrame, Lane: store.LaneAgent, Offset: time.Second, Data: []byte("a frame after the request")})
			x := request
			r.Started(id, 500*time.Millisecond, &x)
			if ended {
				final := request
				final.Status, final.End = http.StatusOK, exchange.EndComplete
				final.Chunks = []exchange.Chunk{{At: time.Millisecond, Data: []byte("answer")}}
				r.Ended(id, 500*time.Millisecond, &final)
			}
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			events := storedEvents(t, st, name)
			if len(events) != 2 {
				t.Fatalf("stored %d events, want the exchange and the frame", len(events))
			}
			e := events[0]
			if e.Seq != id || e.Kind != store.KindExchange || e.Lane != store.LaneLLM || e.Offset != 500*time.Millisecond {
				t.Errorf("first event: seq %d, kind %v, lane %v, offset %v; want %d, the exchange on the llm lane at 500ms", e.Seq, e.Kind, e.Lane, e.Offset, id)
			}
			wantFlags, wantEnd := store.Flag(0), exchange.EndComplete
			if !ended {
				wantFlags, wantEnd = store.FlagIncomplete, exchange.EndInFlight
			}
			got, err := exchange.Unmarshal(e.Data)
			if err != nil {
				t.Fatal(err)
			}
			if e.Flags != wantFlags || got.End != wantEnd || string(got.RequestBody) != `{"model":"m"}` {
				t.Errorf("exchange stored with flags %v, end %v, request body %q; want %v, %v, the request's", e.Flags, got.End, got.RequestBody, wantFlags, wantEnd)
			}
			if ended && string(got.Body()) != "answer" {
				t.Errorf("the ended exchange has body %q, want answer", got.Body())
			}
			if rec, err := st.Get(name); err != nil || rec.Exchanges != 1 {
				t.Errorf("recording counts %d exchanges (%v), want 1", rec.Exchanges, err)
			}
		})
	}
}

// TestStoreRecorderTap records a real tap's exchanges through
// storeRecorder into a store: the finished exchanges replace the
// incomplete ones in a bbolt file.
func TestStoreRecorderTap(t *testing.T) {
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
	tap, err := proxy.New(proxy.Config{CA: ca, Recorder: storeRecorder{w: w, logf: t.Errorf}, Logf: t.Logf})
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

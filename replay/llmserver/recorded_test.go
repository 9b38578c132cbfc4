package llmserver_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/replay/llmserver"
)

// memRecorder keeps the exchanges a tap has ended, by id.
type memRecorder struct {
	mu      sync.Mutex // guards the fields below
	id      uint64
	ended   map[uint64][]byte // the exchange of each id that has ended, as a recording encodes it
	changed chan struct{}     // closed and replaced on each Ended
}

func newMemRecorder() *memRecorder {
	return &memRecorder{ended: map[uint64][]byte{}, changed: make(chan struct{})}
}

func (r *memRecorder) Begin() (uint64, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.id++
	return r.id, time.Time{}
}

func (r *memRecorder) Started(uint64, time.Duration, *exchange.Exchange) {}

func (r *memRecorder) Ended(id uint64, _ time.Duration, x *exchange.Exchange) {
	data, err := exchange.Marshal(x)
	if err != nil {
		panic(err) // only an End that is no End fails to encode: a bug of the tap
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended[id] = data
	close(r.changed)
	r.changed = make(chan struct{})
}

// finished waits for the first exchange to end, and returns it as a
// recording gives it back.
func (r *memRecorder) finished(t *testing.T) llmserver.Recorded {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		r.mu.Lock()
		data, ok := r.ended[1]
		changed := r.changed
		r.mu.Unlock()
		if ok {
			x, err := exchange.Unmarshal(data)
			if err != nil {
				t.Fatal(err)
			}
			return llmserver.Recorded{Number: 1, Seq: 1, Exchange: x}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("gave up waiting for the recorded exchange")
		}
	}
}

// recordAgentLeaving records, through a real tap, an exchange that the
// agent cancels: after the first event of the body if midStream, else
// before the response header. The upstream holds the stream open until
// then.
func recordAgentLeaving(t *testing.T, first []byte, midStream bool) llmserver.Recorded {
	t.Helper()
	arrived := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body to its end lets the server notice the client
		// leaving.
		io.Copy(io.Discard, r.Body)
		if midStream {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(first)
			w.(http.Flusher).Flush()
		}
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(hangGuard):
			t.Errorf("the upstream request was not cancelled")
		}
		panic(http.ErrAbortHandler) // drop the stream, as a server whose client is gone does
	}))
	defer up.Close()
	ca, err := proxy.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rec := newMemRecorder()
	tap, err := proxy.New(proxy.Config{CA: ca, Recorder: rec, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	client, base := viaBaseURL(t, tap, ca, up.URL)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		resp, err := postCtx(t, ctx, client, base+"/v1/messages", requestBody("claude-x", "hi"))
		if err == nil {
			buf := make([]byte, len(first))
			_, err = io.ReadFull(resp.Body, buf)
			arrived <- struct{}{}
			<-ctx.Done()
			resp.Body.Close()
		}
		done <- err
	}()
	waitSignal(t, arrived, "the request to reach the upstream")
	if midStream {
		waitSignal(t, arrived, "the client to read the first event")
	}
	cancel()
	if err := waitSignal(t, done, "the client"); midStream && err != nil {
		t.Fatalf("recording: %v", err)
	}
	r := rec.finished(t)
	if r.Exchange.Error == "" || r.Exchange.End != exchange.EndClientGone {
		t.Fatalf("the exchange the agent left was recorded with end %v, error %q; want client-gone and an error", r.Exchange.End, r.Exchange.Error)
	}
	return r
}

// TestAgentLeft: an exchange the agent walked away from when recording,
// recorded by a real tap, never ends for the agent in the replay: it gets
// what was recorded, and then the request waits until it is cancelled.
func TestAgentLeft(t *testing.T) {
	first := splitEvents(readCapture(t, "anth_tool_real.sse"), false)[0]
	recorded := map[bool]llmserver.Recorded{
		true:  recordAgentLeaving(t, first, true),
		false: recordAgentLeaving(t, first, false),
	}
	for _, rt := range routes {
		for _, midStream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/mid-stream=%v", rt.name, midStream), func(t *testing.T) {
				r := recorded[midStream]
				s := newServer(t, llmserver.Options{Exchanges: llmserver.List{r}})
				waiting := make(chan int, 1)
				llmserver.SetHooks(s, func(n int) { waiting <- n }, nil, nil)
				tap, ca := newTap(t, s)
				client, base := rt.via(t, tap, ca, upstream)

				p := newProgress()
				h := sendHeld(t, client, base+"/v1/messages", requestBody("claude-x", "hi"), p)
				waitSignal(t, waiting, "the replay to wait for the agent to leave")
				if err := p.waitFor(context.Background(), len(r.Exchange.Body())); err != nil {
					t.Fatalf("before the cancellation: %v", err)
				}
				h.checkNotEnded(t)
				res := h.cancelAndWait(t)
				if want := r.Exchange.Body(); !bytes.Equal(res.body, want) {
					t.Errorf("got %q before the cancellation, want the recorded %q", res.body, want)
				}
			})
		}
	}
}

package testkit

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"testing"
	"time"
)

// SSEEvent is one event of an SSEBench stream, of the size of a chat
// completion chunk.
var SSEEvent = []byte("data: " + `{"choices":[{"index":0,"delta":{"content":"token"}}],"obfuscation":"abcdef"}` + "\n\n")

// An SSEBench is an upstream for benchmarks of what a path adds to an SSE
// stream, measured by round trip: it sends a stream's first event at
// once and each further event when the benchmark asks for it, so the time
// from asking to reading the event is the latency the path adds. With
// ?timed=1 in the URL it sends 20 events 25 ms apart instead, for a path
// that holds a stream until it ends (a buffering proxy). Close it when
// done.
type SSEBench struct {
	*httptest.Server
	next chan bool // true: send an event; false: end the stream
}

// NewSSEBench starts an SSEBench on a loopback port.
func NewSSEBench() *SSEBench {
	s := &SSEBench{next: make(chan bool)}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *SSEBench) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Write(SSEEvent)
	w.(http.Flusher).Flush()
	if r.URL.Query().Get("timed") != "" {
		for range 19 {
			time.Sleep(25 * time.Millisecond)
			w.Write(SSEEvent)
			w.(http.Flusher).Flush()
		}
		return
	}
	for {
		select {
		case more := <-s.next:
			if !more {
				return
			}
			w.Write(SSEEvent)
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
			return
		}
	}
}

// Measure reads b.N events through client from u, a URL that reaches the
// SSEBench, in streams of 100 events, and reports the streams' median
// time to first event (ttfb-ns) and the events' median and 99th
// percentile round trip (event-p50-ns, event-p99-ns). With buffering, it
// asks for timed streams, counts each as its 20 events and reports the
// time to first event only.
func (s *SSEBench) Measure(b *testing.B, client *http.Client, u string, buffering bool) {
	const eventsPerStream = 100
	if buffering {
		u += "?timed=1"
	}
	var ttfbs, lats []time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		start := time.Now()
		resp, err := client.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		readEvent(b, br)
		ttfbs = append(ttfbs, time.Since(start))
		done++
		if buffering {
			done += 19
		}
		for i := 1; !buffering && i < eventsPerStream && done < b.N; i++ {
			t0 := time.Now()
			s.next <- true
			readEvent(b, br)
			lats = append(lats, time.Since(t0))
			done++
		}
		if !buffering {
			s.next <- false
		}
		io.Copy(io.Discard, br)
		resp.Body.Close()
	}
	b.StopTimer()
	b.ReportMetric(float64(Percentile(ttfbs, 50)), "ttfb-ns")
	if len(lats) > 0 {
		b.ReportMetric(float64(Percentile(lats, 50)), "event-p50-ns")
		b.ReportMetric(float64(Percentile(lats, 99)), "event-p99-ns")
	}
}

// readEvent reads one event, up to its blank line.
func readEvent(b *testing.B, br *bufio.Reader) {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			b.Fatalf("reading the stream: %v", err)
		}
		if len(line) == 1 {
			return
		}
	}
}

// Percentile returns the p-th percentile of ds.
func Percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// PostParallel POSTs body to u b.N times, 32 requests at a time, through
// client, and fails on any answer but a 200 of respLen bytes.
func PostParallel(b *testing.B, client *http.Client, u string, body []byte, respLen int) {
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(u, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || n != int64(respLen) {
				b.Errorf("got %s with %d bytes", resp.Status, n)
				return
			}
		}
	})
}

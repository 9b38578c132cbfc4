package proxy_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/store"
)

// benchNames are the ways to reach the upstream that the benchmarks
// compare: directly; through a base-URL route of a tap recording into a
// store.Writer on a temporary file; through httputil.ReverseProxy flushing
// at once, the baseline; and through a tap recording nothing, which
// separates the cost of forwarding from the cost of recording.
var benchNames = []string{"direct", "tap", "reverseproxy", "tap-unrecorded"}

// benchRecorder records into a store.Writer as acptap record does (its
// storeRecorder, in cmd/acptap), so that the tap pays what recording costs
// there: encoding each exchange twice and appending it.
type benchRecorder struct{ w *store.Writer }

func (r benchRecorder) Begin() (uint64, time.Time) { return r.w.Reserve(), time.Time{} }

func (r benchRecorder) Started(id uint64, at time.Duration, x *exchange.Exchange) {
	r.append(id, at, x, store.FlagIncomplete)
}

func (r benchRecorder) Ended(id uint64, at time.Duration, x *exchange.Exchange) {
	r.append(id, at, x, 0)
}

func (r benchRecorder) append(id uint64, at time.Duration, x *exchange.Exchange, flags store.Flag) {
	data, err := exchange.Marshal(x)
	if err != nil {
		panic(err) // only an End that is no End fails to encode: a bug of the tap
	}
	r.w.Append(store.Event{Seq: id, Kind: store.KindExchange, Lane: store.LaneLLM, Offset: at, Flags: flags, Data: data})
}

// benchTargets returns, for an upstream at upstream, the URL base of each
// of benchNames.
func benchTargets(b *testing.B, upstream string) map[string]string {
	b.Helper()
	st, err := store.Open(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	w, err := st.Create(store.Recording{Name: "bench"}, false)
	if err != nil {
		b.Fatal(err)
	}
	tap, err := proxy.New(proxy.Config{CA: newCA(b), Recorder: benchRecorder{w}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		tap.Close()
		w.Finish()
		st.Close()
	})
	local, err := tap.AddBaseURL("OPENAI_BASE_URL", upstream)
	if err != nil {
		b.Fatal(err)
	}
	unrecorded := newTap(b, proxy.Config{})
	localUnrecorded, err := unrecorded.AddBaseURL("OPENAI_BASE_URL", upstream)
	if err != nil {
		b.Fatal(err)
	}

	u, _ := url.Parse(upstream)
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		FlushInterval: -1,
		// The tap's default Transport keeps as many idle connections.
		Transport: &http.Transport{MaxIdleConns: 100, MaxIdleConnsPerHost: 64, DisableCompression: true},
	}
	rps := httptest.NewServer(rp)
	b.Cleanup(rps.Close)
	return map[string]string{"direct": upstream, "tap": local, "reverseproxy": rps.URL, "tap-unrecorded": localUnrecorded}
}

// benchClient is a keep-alive client with room for concurrent requests.
func benchClient(b *testing.B) *http.Client {
	tr := &http.Transport{MaxIdleConns: 100, MaxIdleConnsPerHost: 64, DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// BenchmarkSSE measures an SSE stream's time to first byte and per-event
// latency through each path, by round trip (testkit.SSEBench). One op is
// one event.
func BenchmarkSSE(b *testing.B) {
	upstream := testkit.NewSSEBench()
	defer upstream.Close()
	targets := benchTargets(b, upstream.URL)
	for _, name := range benchNames {
		b.Run(name, func(b *testing.B) {
			upstream.Measure(b, benchClient(b), targets[name]+"/v1/chat/completions", false)
		})
	}
}

// jsonUpstream answers requests of reqLen bytes with respBody, and
// others with 400.
func jsonUpstream(reqLen int, respBody []byte) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, _ := io.Copy(io.Discard, r.Body); n != int64(reqLen) {
			http.Error(w, fmt.Sprintf("got %d bytes, want %d", n, reqLen), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(respBody)))
		w.Write(respBody)
	}))
}

// BenchmarkSmallRequests measures small non-streaming POSTs, 32 at a time.
func BenchmarkSmallRequests(b *testing.B) {
	reqBody := []byte(`{"model":"gpt-5-mini","messages":[{"role":"user","content":"` + strings.Repeat("x", 160) + `"}]}`)
	respBody := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("y", 200) + `"},"finish_reason":"stop"}]}`)
	upstream := jsonUpstream(len(reqBody), respBody)
	defer upstream.Close()
	targets := benchTargets(b, upstream.URL)
	for _, name := range benchNames {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			testkit.PostParallel(b, benchClient(b), targets[name]+"/v1/chat/completions", reqBody, len(respBody))
		})
	}
}

// BenchmarkLargeRequest measures a conversation-sized request, 256 KiB
// of JSON answered at once with a small body, one at a time: the tap reads
// a request body whole before sending it upstream (so that it can be sent
// again, and recorded as sent), where httputil.ReverseProxy streams it.
// ttfb-ns is the median time from sending the request to reading the
// response's header.
func BenchmarkLargeRequest(b *testing.B) {
	reqBody := []byte(`{"model":"gpt-5-mini","messages":[{"role":"user","content":"` + strings.Repeat("x", 256<<10) + `"}]}`)
	respBody := []byte(`{"id":"chatcmpl-1","choices":[]}`)
	upstream := jsonUpstream(len(reqBody), respBody)
	defer upstream.Close()
	targets := benchTargets(b, upstream.URL)
	for _, name := range benchNames {
		b.Run(name, func(b *testing.B) {
			client := benchClient(b)
			u := targets[name] + "/v1/chat/completions"
			ttfbs := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				resp, err := client.Post(u, "application/json", bytes.NewReader(reqBody))
				if err != nil {
					b.Fatal(err)
				}
				ttfbs = append(ttfbs, time.Since(start))
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || n != int64(len(respBody)) {
					b.Fatalf("got %s with %d bytes", resp.Status, n)
				}
			}
			b.ReportMetric(float64(testkit.Percentile(ttfbs, 50)), "ttfb-ns")
		})
	}
}

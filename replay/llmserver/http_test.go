package llmserver_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/replay/llmserver"
)

// proxyRoutes are the routes by which an http exchange reaches a replay:
// only the forward proxy, since whatever comes by a base-URL route is llm.
var proxyRoutes = []route{
	{name: "proxy-https", via: viaProxy(false)},
	{name: "proxy-https-h2", via: viaProxy(true), h2: true},
}

// httpExchange returns a recorded http exchange, through the forward
// proxy, answered 200 with body.
func httpExchange(method, rawURL, body string) *exchange.Exchange {
	return &exchange.Exchange{
		Route:           exchange.RouteProxy,
		Method:          method,
		URL:             rawURL,
		RequestHeaders:  http.Header{"Accept": {"application/json"}},
		Status:          http.StatusOK,
		ResponseHeaders: http.Header{"Content-Type": {"application/json"}, "Content-Length": {fmt.Sprint(len(body))}},
		Chunks:          []exchange.Chunk{{At: time.Minute, Data: []byte(body)}},
		TTFB:            time.Minute,
		Duration:        time.Minute,
		End:             exchange.EndComplete,
	}
}

// do sends a request without a body and returns the response's status and
// body.
func do(t testing.TB, client *http.Client, method, u string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return resp.StatusCode, string(readAllBody(t, resp))
}

// TestHTTPByKey: http exchanges are answered by method and URL, in any
// order and as often as asked, the recorded answers of a key in turn and
// the last one again; they do not take the LLM exchanges' places, nor the
// LLM exchanges theirs; a key never recorded gets a 502 saying so, and a
// recorded exchange never asked for is reported apart from the LLM ones.
func TestHTTPByKey(t *testing.T) {
	chat := queueExchange("/v1/chat/completions", "gpt-x", 1)
	chat.Route = exchange.RouteProxy
	xs := recordedList(
		httpExchange("GET", upstream+"/pkg/left-pad", `{"version":"1"}`),
		chat,
		httpExchange("GET", upstream+"/pkg/left-pad", `{"version":"2"}`),
		httpExchange("HEAD", upstream+"/", ``),
		httpExchange("GET", "https://registry.invalid/pkg/left-pad", `{"version":"other host"}`),
		httpExchange("POST", "https://telemetry.invalid/v1/events", `{}`),
	)
	for _, rt := range proxyRoutes {
		t.Run(rt.name, func(t *testing.T) {
			s := newServer(t, llmserver.Options{Exchanges: xs})
			tap, ca := newTap(t, s)
			client, base := rt.via(t, tap, ca, upstream)
			type call struct{ method, url, want string }
			for i, c := range []call{
				{"GET", "https://registry.invalid/pkg/left-pad", `{"version":"other host"}`},
				{"HEAD", base + "/", ``},
				{"GET", base + "/pkg/left-pad", `{"version":"1"}`},
				{"GET", base + "/pkg/left-pad", `{"version":"2"}`},
				{"GET", base + "/pkg/left-pad", `{"version":"2"}`},
				{"GET", "https://registry.invalid/pkg/left-pad", `{"version":"other host"}`},
				{"HEAD", base + "/", ``},
			} {
				if status, body := do(t, client, c.method, c.url); status != http.StatusOK || body != c.want {
					t.Errorf("request %d, %s %s: %d %q, want 200 %q", i+1, c.method, c.url, status, body, c.want)
				}
			}
			// The LLM exchange is where it was.
			if n := answerNumber(t, post(t, client, base+"/v1/chat/completions", requestBody("gpt-x", "hi"))); n != 1 {
				t.Errorf("the chat request got exchange %d, want 1", n)
			}

			status, body := do(t, client, "GET", base+"/pkg/never-recorded?token=sk-secret-in-query")
			if want := "acptap replay: no recorded answer for GET " + upstream + "/pkg/never-recorded?token="; status != http.StatusBadGateway || !strings.HasPrefix(body, want) {
				t.Errorf("a key never recorded got %d %q, want 502 starting %q", status, body, want)
			}
			if strings.Contains(body, "sk-secret-in-query") {
				t.Errorf("the answer shows the credential of the query: %q", body)
			}

			r := s.Report()
			if r.Served != 5 || len(r.Unanswered) != 0 || len(r.Unrequested) != 0 {
				t.Errorf("report: served %d, unanswered %v, unrequested %v; want 5, none, none", r.Served, r.Unanswered, r.Unrequested)
			}
			if len(r.HTTPUnanswered) != 1 || r.HTTPUnanswered[0].Method != "GET" || !strings.Contains(r.HTTPUnanswered[0].URL, "/pkg/never-recorded") || strings.Contains(r.HTTPUnanswered[0].URL, "sk-secret") {
				t.Errorf("http unanswered %+v, want the GET of /pkg/never-recorded, its credential masked", r.HTTPUnanswered)
			}
			var unrequested []int
			for _, u := range r.HTTPUnrequested {
				unrequested = append(unrequested, u.Number)
			}
			if !slices.Equal(unrequested, []int{6}) {
				t.Errorf("http unrequested %v, want [6], the telemetry", unrequested)
			}
		})
	}
}

// TestHTTPUnansweredResponse: the answer to an http request the recording
// has no answer for is a 502, marked, in plain text.
func TestHTTPUnansweredResponse(t *testing.T) {
	s := newServer(t, llmserver.Options{})
	tap, ca := newTap(t, s)
	client, base := viaProxy(false)(t, tap, ca, upstream)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/update-check", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAllBody(t, resp)
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Acptap-Replay") != "unanswered" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("got %d, X-Acptap-Replay %q, Content-Type %q; want 502, unanswered, text/plain", resp.StatusCode, resp.Header.Get("X-Acptap-Replay"), resp.Header.Get("Content-Type"))
	}
	if want := `(http exchanges are answered by method and URL, and none was recorded as "GET ` + upstream + `/update-check")`; !strings.Contains(string(body), want) {
		t.Errorf("body %q, want it to say %q", body, want)
	}
}

// TestHTTPKey: Options.HTTPKey decides which requests share recorded
// answers; without it, the URL must be the recorded one.
func TestHTTPKey(t *testing.T) {
	ts := regexp.MustCompile(`ts=[0-9]+`)
	dropTS := func(method, rawURL string) string { return method + " " + ts.ReplaceAllString(rawURL, "ts=<time>") }
	xs := recordedList(httpExchange("GET", upstream+"/check?ts=1111", `{"latest":"1.0"}`))
	for _, c := range []struct {
		name       string
		key        func(method, rawURL string) string
		wantStatus int
	}{
		{"normalized", dropTS, http.StatusOK},
		{"default", nil, http.StatusBadGateway},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, llmserver.Options{Exchanges: xs, HTTPKey: c.key})
			tap, ca := newTap(t, s)
			client, base := viaProxy(false)(t, tap, ca, upstream)
			if status, _ := do(t, client, "GET", base+"/check?ts=2222"); status != c.wantStatus {
				t.Errorf("a request with another ts got %d, want %d", status, c.wantStatus)
			}
			if status, _ := do(t, client, "GET", base+"/check?ts=1111"); status != http.StatusOK {
				t.Errorf("the recorded URL got %d, want 200", status)
			}
		})
	}
}

// TestHTTPConcurrent: http requests of one key racing each other all get
// a recorded answer, each recorded answer once before the last repeats.
func TestHTTPConcurrent(t *testing.T) {
	xs := recordedList(
		httpExchange("GET", upstream+"/state", `"a"`),
		httpExchange("GET", upstream+"/state", `"b"`),
		httpExchange("GET", upstream+"/state", `"c"`),
	)
	s := newServer(t, llmserver.Options{Exchanges: xs})
	tap, ca := newTap(t, s)
	client, base := viaProxy(true)(t, tap, ca, upstream)
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			status, body := do(t, client, "GET", base+"/state")
			if status != http.StatusOK {
				t.Errorf("status %d %q, want 200", status, body)
			}
			mu.Lock()
			got[body]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if got[`"a"`] != 1 || got[`"b"`] != 1 || got[`"c"`] != 6 {
		t.Errorf("answers %v, want a and b once, c six times", got)
	}
	if r := s.Report(); r.Served != 3 || len(r.HTTPUnrequested)+len(r.HTTPUnanswered) != 0 {
		t.Errorf("report: served %d, http unrequested %v, unanswered %v; want 3, none, none", r.Served, r.HTTPUnrequested, r.HTTPUnanswered)
	}
}

// TestHTTPFault: a fault on an http exchange, numbered among all the
// exchanges, is injected into the first request it is due for; a status
// fault leaves the exchange for the retry.
func TestHTTPFault(t *testing.T) {
	chat := queueExchange("/v1/chat/completions", "gpt-x", 1)
	xs := recordedList(chat, httpExchange("GET", upstream+"/pkg", `{"ok":true}`))
	s := newServer(t, llmserver.Options{Exchanges: xs, Faults: map[int]llmserver.Fault{2: {Kind: llmserver.FaultStatus, Status: 503}}})
	tap, ca := newTap(t, s)
	client, base := viaProxy(false)(t, tap, ca, upstream)
	if status, body := do(t, client, "GET", base+"/pkg"); status != http.StatusServiceUnavailable || !strings.Contains(body, "injected fault status:503 on llm #2") {
		t.Errorf("the first request got %d %q, want the injected 503", status, body)
	}
	if status, body := do(t, client, "GET", base+"/pkg"); status != http.StatusOK || body != `{"ok":true}` {
		t.Errorf("the retry got %d %q, want the recorded answer", status, body)
	}
	if r := s.Report(); !slices.Equal(r.Faulted, []llmserver.AppliedFault{{Number: 2, Fault: llmserver.Fault{Kind: llmserver.FaultStatus, Status: 503}}}) || r.Served != 1 || len(r.Unrequested) != 1 {
		t.Errorf("report: faulted %v, served %d, unrequested %d; want [2], 1 (the http one), 1 (the chat)", r.Faulted, r.Served, len(r.Unrequested))
	}
}

// TestBaseURLRouteIsLLM: whatever comes through a base-URL route is
// answered positionally, a path of no LLM API too: a second probe of the
// base URL has no answer and fails loudly.
func TestBaseURLRouteIsLLM(t *testing.T) {
	probe := httpExchange("HEAD", upstream+"/", ``)
	probe.Route = exchange.RouteBaseURL
	s := newServer(t, llmserver.Options{Exchanges: recordedList(probe)})
	tap, ca := newTap(t, s)
	client, base := viaBaseURL(t, tap, ca, upstream)
	if status, _ := do(t, client, "HEAD", base+"/"); status != http.StatusOK {
		t.Errorf("the probe got %d, want 200", status)
	}
	if status, _ := do(t, client, "HEAD", base+"/"); status != http.StatusBadRequest {
		t.Errorf("a second probe got %d, want 400, unanswered", status)
	}
	if r := s.Report(); r.Served != 1 || len(r.Unanswered) != 1 || len(r.HTTPUnanswered) != 0 {
		t.Errorf("report: served %d, unanswered %v, http unanswered %v; want 1, the second probe, none", r.Served, r.Unanswered, r.HTTPUnanswered)
	}
}

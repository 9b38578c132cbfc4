package llmserver_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/replay/llmserver"
)

// sentinel is an upstream at the recorded address that counts the
// connections it gets: a replay must get none.
type sentinel struct {
	*httptest.Server
	conns atomic.Int64
}

func newSentinel(t *testing.T, tls bool) *sentinel {
	t.Helper()
	s := &sentinel{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// TestNoNetwork: a whole replay through a real tap, on every route, with
// upstreams listening at the recorded addresses, answered, failed,
// faulted and unanswerable requests included, connects to no upstream.
func TestNoNetwork(t *testing.T) {
	for _, rt := range append(routes, route{name: "proxy-http", via: viaProxy(false)}) {
		t.Run(rt.name, func(t *testing.T) {
			up := newSentinel(t, rt.name != "proxy-http")
			c := captures[1] // OpenAI Responses
			answered := captured(t, c, up.URL)
			failed := &exchange.Exchange{
				Method:      http.MethodPost,
				URL:         up.URL + c.path,
				RequestBody: answered.RequestBody,
				End:         exchange.EndUpstreamFailed,
				Error:       "no response: dial tcp: connection refused",
			}
			retried := captured(t, c, up.URL)
			s := newServer(t, llmserver.Options{
				Exchanges: recordedList(answered, failed, retried),
				Faults:    map[int]llmserver.Fault{3: {Kind: llmserver.FaultStatus, Status: 503}},
			})
			tap, ca := newTap(t, s)
			client, base := rt.via(t, tap, ca, up.URL)

			for i, want := range []int{http.StatusOK, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusOK, http.StatusBadRequest} {
				resp := post(t, client, base+c.path, answered.RequestBody)
				readAllBody(t, resp)
				if resp.StatusCode != want {
					t.Errorf("request %d: status %d, want %d", i+1, resp.StatusCode, want)
				}
			}
			// A path of no LLM API: an llm request by the base-URL route,
			// an http one through the proxy, unanswered either way.
			resp := post(t, client, base+"/v1/never/recorded", nil)
			readAllBody(t, resp)
			wantStatus, wantUnanswered, wantHTTP := http.StatusBadRequest, 2, 0
			if rt.name != "base-url" {
				wantStatus, wantUnanswered, wantHTTP = http.StatusBadGateway, 1, 1
			}
			if resp.StatusCode != wantStatus {
				t.Errorf("request of a key never recorded: status %d, want %d", resp.StatusCode, wantStatus)
			}
			if n := up.conns.Load(); n != 0 {
				t.Errorf("the upstream got %d connections, want 0", n)
			}
			// The sentinel does count connections.
			if resp, err := up.Client().Get(up.URL); err != nil {
				t.Errorf("connecting to the upstream directly: %v", err)
			} else {
				readAllBody(t, resp)
			}
			if n := up.conns.Load(); n != 1 {
				t.Errorf("after a direct request, the upstream counted %d connections, want 1", n)
			}
			if r := s.Report(); r.Served != 3 || len(r.Unanswered) != wantUnanswered || len(r.HTTPUnanswered) != wantHTTP {
				t.Errorf("report: served %d, unanswered %v, http unanswered %v; want 3, %d and %d", r.Served, r.Unanswered, r.HTTPUnanswered, wantUnanswered, wantHTTP)
			}
		})
	}
}

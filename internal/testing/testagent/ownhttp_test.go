package testagent_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/acptap/acptap/internal/testing/testagent"
	"github.com/acptap/acptap/internal/testing/testeditor"
)

var twoPrompts = testeditor.Options{Prompts: []string{"hello", "again"}}

// TestOwnServer: the agent checks its own server before each turn and
// says so; it reaches it through HTTP_PROXY unless NO_PROXY names
// loopback, as Node's clients do, a host:port entry of another port not
// counting.
func TestOwnServer(t *testing.T) {
	tests := []struct {
		name        string
		addr        string
		noProxy     string
		wantProxied int32
	}{
		{"127.0.0.1 exempt", "127.0.0.1:0", "127.0.0.1:1,localhost,127.0.0.1,::1", 0},
		{"localhost exempt", "localhost:0", "127.0.0.1:1,localhost,127.0.0.1,::1", 0},
		{"127.0.0.1 proxied", "127.0.0.1:0", "127.0.0.1:1", 2},
		{"localhost proxied", "localhost:0", "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxy, proxySrv := newProxy(t)
			env := []string{"HTTP_PROXY=" + proxySrv.URL, "NO_PROXY=" + tt.noProxy}
			tr, stderr := mustSession(t, twoPrompts, env, "--own-server", tt.addr)
			for i, turn := range tr.Turns {
				if want := "own server: ok\nYou said: " + turn.Prompt; turn.Text != want || turn.StopReason != "end_turn" {
					t.Errorf("turn %d: %q, %s; want %q, end_turn (agent stderr %q)", i+1, turn.Text, turn.StopReason, want, stderr)
				}
			}
			if got := proxy.forwarded.Load(); got != tt.wantProxied {
				t.Errorf("the proxy relayed %d requests, want %d", got, tt.wantProxied)
			}
		})
	}
}

// staleProxy answers the agent's own server's requests as a replay of
// another process's recording would: with that process's token.
func staleProxy(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() || r.URL.Path != "/state" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.String(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"token":"0123456789abcdef0123456789abcdef"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestOwnServerStale: an answer from another process, or none, breaks the
// turn visibly.
func TestOwnServerStale(t *testing.T) {
	stale := regexp.MustCompile(`^error: own server: GET http://127\.0\.0\.1:[0-9]+/state\?call=1 answered token "0123456789abcdef0123456789abcdef", this process's is "[0-9a-f]{32}": a stale answer from another process\n$`)
	tr, _ := mustSession(t, twoPrompts, []string{"HTTP_PROXY=" + staleProxy(t).URL}, "--own-server", "127.0.0.1:0")
	if turn := tr.Turns[0]; !stale.MatchString(turn.Text) || turn.StopReason != "end_turn" {
		t.Errorf("turn 1 with a stale answer: %q, %s; want it to match %s, end_turn", turn.Text, turn.StopReason, stale)
	}

	// A replay that has no answer.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "acptap replay: no recorded answer", http.StatusBadGateway)
	}))
	defer down.Close()
	tr, _ = mustSession(t, twoPrompts, []string{"HTTP_PROXY=" + down.URL}, "--own-server", "127.0.0.1:0")
	if turn := tr.Turns[0]; !strings.HasPrefix(turn.Text, "error: own server: GET http://127.0.0.1:") || !strings.Contains(turn.Text, "502 Bad Gateway: acptap replay: no recorded answer") {
		t.Errorf("turn 1 with no answer: %q, want the error", turn.Text)
	}
}

// TestLookupAndTelemetry: the start-up lookup goes through the proxy with
// a cache buster and a request id, and its answer begins each turn; the
// telemetry is posted once, its answer only logged.
func TestLookupAndTelemetry(t *testing.T) {
	var mu sync.Mutex
	var got []string
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(bytes.TrimSpace(body)))
		mu.Unlock()
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"name":"left-pad","version":"1.3.0"}`+"\n")
	}))
	defer registry.Close()
	proxy, proxySrv := newProxy(t)
	tr, stderr := mustSession(t, twoPrompts, []string{"HTTP_PROXY=" + proxySrv.URL},
		"--lookup", registry.URL+"/left-pad?tag=latest", "--telemetry", registry.URL+"/v1/events")
	for i, turn := range tr.Turns {
		if want := "lookup: {\"name\":\"left-pad\",\"version\":\"1.3.0\"}\nYou said: " + turn.Prompt; turn.Text != want {
			t.Errorf("turn %d: %q, want %q", i+1, turn.Text, want)
		}
	}
	if n := proxy.forwarded.Load(); n != 2 {
		t.Errorf("the proxy relayed %d requests, want 2", n)
	}
	lookup := regexp.MustCompile(`^GET /left-pad\?tag=latest&ts=[0-9]{13}&request=[0-9a-f-]{36} $`)
	telemetry := regexp.MustCompile(`^POST /v1/events \{"event":"start","pid":[0-9]+,"time":"[^"]+"\}$`)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("the registry got %q, want a lookup and a telemetry event", got)
	}
	for _, re := range []*regexp.Regexp{lookup, telemetry} {
		if !slicesMatch(got, re) {
			t.Errorf("the registry got %q, want one matching %s", got, re)
		}
	}
	if !strings.Contains(stderr, "telemetry: 204 No Content") {
		t.Errorf("agent stderr %q, want the telemetry's answer logged", stderr)
	}
}

// TestLookupFails: a lookup that fails says so in each turn.
func TestLookupFails(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	tr, _ := mustSession(t, twoPrompts, nil, "--lookup", down.URL+"/left-pad")
	if turn := tr.Turns[0]; !strings.HasPrefix(turn.Text, "lookup: error: ") || !strings.HasSuffix(turn.Text, "\nYou said: hello") {
		t.Errorf("turn 1: %q, want the lookup's error, then the answer", turn.Text)
	}
}

func slicesMatch(ss []string, re *regexp.Regexp) bool {
	for _, s := range ss {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

func TestOwnHTTPUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--own-server", "8080"}, "--own-server \"8080\": want HOST:PORT"},
		{[]string{"--own-server", ":0"}, "--own-server: want a host"},
		{[]string{"--lookup", "registry.example/x"}, "--lookup \"registry.example/x\" is not an http(s) URL"},
		{[]string{"--telemetry", "ftp://t.example/"}, "--telemetry \"ftp://t.example/\" is not an http(s) URL"},
	} {
		var stdout, stderr bytes.Buffer
		code := testagent.Main(tt.args, strings.NewReader(""), &stdout, &stderr, func(string) string { return "" })
		if code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("Main(%q) = %d with stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}

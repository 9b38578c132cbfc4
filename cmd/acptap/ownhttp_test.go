package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// remoteAddr is the address of the tests' "remote" hosts, the LLM and the
// registry: a loopback address that NO_PROXY does not name (it names
// localhost, 127.0.0.1 and ::1), so that the agent reaches it through
// the tap, as it reaches a host elsewhere.
const remoteAddr = "127.0.0.2"

// remote is a TLS server at remoteAddr playing the agent's LLM (an OpenAI
// chat endpoint), a package registry and a telemetry endpoint, counting
// what it gets by path.
type remote struct {
	*httptest.Server
	caFile string // its certificate, for --upstream-ca

	mu   sync.Mutex
	hits map[string]int // by path
}

func (r *remote) hit(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[path]
}

func newRemote(t *testing.T) *remote {
	t.Helper()
	ln, err := net.Listen("tcp", remoteAddr+":0")
	if err != nil {
		t.Skipf("cannot listen on %s, a loopback address that is not 127.0.0.1: %v", remoteAddr, err)
	}
	r := &remote{hits: map[string]int{}}
	chat := chatSSE(t)
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.hits[req.URL.Path]++
		r.mu.Unlock()
		switch req.URL.Path {
		case "/v1/chat/completions":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(chat)
		case "/registry/left-pad":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"name":"left-pad","version":"1.3.0"}`)
		case "/v1/events":
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, req)
		}
	}))
	r.Listener.Close()
	r.Listener = ln
	cert, pemBytes := ipCert(t, net.ParseIP(remoteAddr))
	r.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	r.EnableHTTP2 = true
	r.StartTLS()
	t.Cleanup(r.Close)
	r.caFile = filepath.Join(t.TempDir(), "remote-ca.pem")
	if err := os.WriteFile(r.caFile, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// ipCert returns a self-signed certificate for ip, and its PEM.
func ipCert(t *testing.T, ip net.IP) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "acptap test remote"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{ip},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// ownHTTPRoute is how the agent of an own-HTTP test reaches its LLM:
// record's flags and the agent's arguments for it.
type ownHTTPRoute struct {
	name  string
	flags func(r *remote) []string
	args  func(r *remote) []string
}

var ownHTTPRoutes = []ownHTTPRoute{
	{"base-url", func(r *remote) []string {
		return []string{"--upstream-ca", r.caFile, "--base-url", "OPENAI_BASE_URL=" + r.URL + "/v1"}
	}, func(*remote) []string { return nil }},
	{"proxy-tls", func(r *remote) []string {
		return []string{"--upstream-ca", r.caFile}
	}, func(r *remote) []string { return []string{"--llm", r.URL + "/v1"} }},
}

// ownHTTPArgs are the test agent's arguments for its own HTTP: its own
// server at ownAddr, a registry lookup and telemetry at r.
func ownHTTPArgs(r *remote, ownAddr string) []string {
	return []string{"--own-server", ownAddr, "--lookup", r.URL + "/registry/left-pad", "--telemetry", r.URL + "/v1/events"}
}

const wantLookup = `lookup: {"name":"left-pad","version":"1.3.0"}`

// llmClasses returns the method, path and class of each exchange of show
// --json.
func llmClasses(t *testing.T, db, name string) []string {
	t.Helper()
	var out []string
	for _, e := range llmEvents(t, db, name) {
		u, _ := e["url"].(string)
		path := u
		if i := strings.Index(u, "://"); i >= 0 {
			if j := strings.IndexAny(u[i+3:], "/"); j >= 0 {
				path = u[i+3+j:]
			}
		}
		if k := strings.IndexByte(path, '?'); k >= 0 {
			path = path[:k]
		}
		out = append(out, e["class"].(string)+" "+e["method"].(string)+" "+path)
	}
	slices.Sort(out)
	return out
}

// TestOwnHTTPReplaysGreen: an agent that calls its own loopback server
// before each turn and looks up a registry at start-up, recorded through
// each route with the defaults, replays green 5 times (20 in
// scripts/test-full) with nothing
// upstream: its own server was never recorded (NO_PROXY named loopback),
// the registry's answer comes from the recording, by method and
// normalized URL (its query has a time and an id), and the LLM's
// positionally.
func TestOwnHTTPReplaysGreen(t *testing.T) {
	for _, rt := range ownHTTPRoutes {
		t.Run(rt.name, func(t *testing.T) {
			r := newRemote(t)
			dir := workspace(t)
			db := filepath.Join(dir, "s.db")
			agentArgs := append(ownHTTPArgs(r, "127.0.0.1:0"), rt.args(r)...)
			out := recordLLMSession(t, agentEnv("OPENAI_API_KEY=sk-test-0123456789"),
				append([]string{"--store", db, "--name", "own"}, rt.flags(r)...), agentArgs...)
			for _, want := range []string{wantLookup, "own server: ok", wantAnswer} {
				if strings.Count(out, want) != 2 {
					t.Errorf("the editor got %q, want %q in each of the two turns", out, want)
				}
			}
			if got := r.hit("/registry/left-pad") + r.hit("/v1/chat/completions") + r.hit("/v1/events"); got != 4 {
				t.Errorf("the remote got %d requests, want 4: a lookup, two chats and telemetry (%v)", got, r.hits)
			}
			llmClass := "llm POST /v1/chat/completions"
			want := []string{"http GET /registry/left-pad", "http POST /v1/events", llmClass, llmClass}
			if got := llmClasses(t, db, "own"); !slices.Equal(got, want) {
				t.Errorf("recorded exchanges %q, want %q: nothing of the agent's own server", got, want)
			}
			timeline, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "own")
			if !strings.Contains(timeline, " http GET "+r.URL+"/registry/left-pad?ts=") {
				t.Errorf("the timeline does not mark the registry lookup as http:\n%s", timeline)
			}
			if strings.Contains(timeline, "loopback went through the tap") {
				t.Errorf("the timeline's header says loopback went through the tap; it did not:\n%s", timeline)
			}

			r.Close() // the registry and the LLM are down
			other := t.TempDir()
			for i := range repeats(t) {
				out, errOut, code := runAcptap(t, other, agentEnv(), "replay", "--store", db, "own")
				if code != 0 || !strings.HasPrefix(out, "PASS own") || strings.Contains(out, "warning") {
					t.Fatalf("replay %d: exit %d, stdout %q, stderr %q; want PASS without warnings and exit 0", i, code, out, errOut)
				}
			}
			// --strict-http too: every http exchange was asked for and
			// answered.
			if out, errOut, code := runAcptap(t, other, agentEnv(), "replay", "--store", db, "--strict-http", "own"); code != 0 {
				t.Errorf("replay --strict-http: exit %d\n%s%s", code, out, errOut)
			}
		})
	}
}

// withoutFlag returns argv without flag and its value.
func withoutFlag(argv []string, flag string) []string {
	var out []string
	for i := 0; i < len(argv); i++ {
		if argv[i] == flag {
			i++
			continue
		}
		out = append(out, argv[i])
	}
	return out
}

// TestHTTPUnansweredAndUnrequested: an http request the recording has no
// answer for is answered 502 and is a warning, a recorded http exchange
// never requested is nothing, and --strict-http fails the replay on
// either, naming it.
func TestHTTPUnansweredAndUnrequested(t *testing.T) {
	r := newRemote(t)
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	rt := ownHTTPRoutes[0]
	recordLLMSession(t, agentEnv("OPENAI_API_KEY=sk-test-0123456789"),
		append([]string{"--store", db, "--name", "own"}, rt.flags(r)...), ownHTTPArgs(r, "127.0.0.1:0")...)
	r.Close()
	recorded := replayArgv(db, t)

	telemetryURL := r.URL + "/v1/events"
	// The lookup and the telemetry race at start-up: the telemetry's
	// number is not known.
	unrequested := ", an http exchange (POST " + telemetryURL + "), was recorded but never requested"
	unanswered := "http: POST " + r.URL + "/v1/other-events has no recorded answer (answered 502"
	cases := []struct {
		name      string
		argv      []string
		strict    bool
		wantCode  int
		want, not []string
	}{
		{name: "unrequested", argv: withoutFlag(recorded, "--telemetry"),
			wantCode: 0, not: []string{"warning", unrequested}},
		{name: "unrequested strict", argv: withoutFlag(recorded, "--telemetry"), strict: true,
			wantCode: ExitDiverged, want: []string{"FAIL own: llm #", unrequested}},
		{name: "unanswered", argv: append(withoutFlag(recorded, "--telemetry"), "--telemetry", r.URL+"/v1/other-events"),
			wantCode: 0, want: []string{"PASS own", "warning: " + unanswered}, not: []string{unrequested}},
		{name: "unanswered strict", argv: append(withoutFlag(recorded, "--telemetry"), "--telemetry", r.URL+"/v1/other-events"), strict: true,
			wantCode: ExitDiverged, want: []string{"FAIL own: " + unanswered, "also: llm #", unrequested}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"replay", "--store", db}
			if c.strict {
				args = append(args, "--strict-http")
			}
			args = append(append(args, "own", "--"), c.argv...)
			out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), args...)
			if code != c.wantCode {
				t.Fatalf("exit %d, want %d\n%s%s", code, c.wantCode, out, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range c.not {
				if strings.Contains(out, n) {
					t.Errorf("output has %q:\n%s", n, out)
				}
			}
		})
	}
}

// freeLoopbackPort returns a port of 127.0.0.1 that nothing listens on.
func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestProxyLoopback shows what --proxy-loopback means: the agent's own
// server's traffic goes through the tap and is recorded, and a replay
// that does the same answers the agent's own server from the recording:
// with another process's answer when the server has the recorded port
// (the agent sees a stale token), with none when it has another. Replayed
// with --proxy-loopback=false, the agent reaches its own server directly
// and the recording passes, its own-server exchanges unrequested, which
// --strict-http fails.
func TestProxyLoopback(t *testing.T) {
	r := newRemote(t)
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	rt := ownHTTPRoutes[0]
	fixed := "127.0.0.1:" + freeLoopbackPort(t)
	for name, addr := range map[string]string{"fixed": fixed, "any": "127.0.0.1:0"} {
		out := recordLLMSession(t, agentEnv("OPENAI_API_KEY=sk-test-0123456789"),
			append([]string{"--store", db, "--name", name, "--proxy-loopback"}, rt.flags(r)...), ownHTTPArgs(r, addr)...)
		if strings.Count(out, "own server: ok") != 2 {
			t.Fatalf("recording %s: the editor got %q, want the own server ok in both turns", name, out)
		}
		httpClass := "http GET /state"
		want := []string{"http GET /registry/left-pad", httpClass, httpClass, "http POST /v1/events", "llm POST /v1/chat/completions", "llm POST /v1/chat/completions"}
		if got := llmClasses(t, db, name); !slices.Equal(got, want) {
			t.Errorf("recording %s: exchanges %q, want %q: the own server's two calls too", name, got, want)
		}
	}
	timeline, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "fixed")
	for _, w := range []string{" http GET http://" + fixed + "/state?call=1", " http GET http://" + fixed + "/state?call=2", "loopback went through the tap too"} {
		if !strings.Contains(timeline, w) {
			t.Errorf("the timeline lacks %q:\n%s", w, timeline)
		}
	}
	r.Close()

	replayOut := func(args ...string) (string, int) {
		out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), append([]string{"replay", "--store", db}, args...)...)
		if code == ExitUsage {
			t.Fatalf("replay %q: exit %d\n%s%s", args, code, out, errOut)
		}
		return out, code
	}
	// As recorded: the own server's calls go to the replay.
	out, code := replayOut("fixed")
	if code != ExitDiverged || !strings.Contains(out, "FAIL fixed: agent output differs") || !strings.Contains(out, "a stale answer from another process") {
		t.Errorf("replay of the fixed port: exit %d, want %d and the agent's stale answer:\n%s", code, ExitDiverged, out)
	}
	out, code = replayOut("any")
	if code != ExitDiverged || !strings.Contains(out, "FAIL any: agent output differs") || !strings.Contains(out, "502 Bad Gateway: acptap replay: no recorded answer for GET http://127.0.0.1:") ||
		!strings.Contains(out, "warning: http: GET http://127.0.0.1:") {
		t.Errorf("replay of any port: exit %d, want %d, the agent's error and a warning:\n%s", code, ExitDiverged, out)
	}
	// Told otherwise, the agent reaches its own server directly.
	for _, name := range []string{"fixed", "any"} {
		if out, code := replayOut("--proxy-loopback=false", name); code != 0 || strings.Contains(out, "warning") {
			t.Errorf("replay --proxy-loopback=false %s: exit %d, want a PASS without warnings:\n%s", name, code, out)
		}
		out, code := replayOut("--proxy-loopback=false", "--strict-http", name)
		if want := ", an http exchange (GET http://127.0.0.1:"; code != ExitDiverged || !strings.Contains(out, want) || !strings.Contains(out, "/state?call=1), was recorded but never requested") {
			t.Errorf("replay --proxy-loopback=false --strict-http %s: exit %d, want %d and the own server's exchanges unrequested:\n%s", name, code, ExitDiverged, out)
		}
	}
	// And a recording made with the defaults, replayed with
	// --proxy-loopback, sends the own server's calls to the replay, which
	// has no answer for them.
	r2 := newRemote(t)
	recordLLMSession(t, agentEnv("OPENAI_API_KEY=sk-test-0123456789"),
		append([]string{"--store", db, "--name", "default"}, rt.flags(r2)...), ownHTTPArgs(r2, "127.0.0.1:0")...)
	r2.Close()
	out, code = replayOut("--proxy-loopback", "default")
	if code != ExitDiverged || !strings.Contains(out, "error: own server: GET http://127.0.0.1:") {
		t.Errorf("replay --proxy-loopback of a default recording: exit %d, want %d and the own server unanswered:\n%s", code, ExitDiverged, out)
	}
}

package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/store"
)

// chatSSE is a real OpenAI Chat Completions stream.
func chatSSE(t *testing.T) []byte {
	t.Helper()
	return testkit.WireSample(t, "oai_chat_text.sse")
}

// chatUpstream is a fake OpenAI endpoint answering every chat completion
// with the captured stream; it counts the requests it got.
func chatUpstream(t *testing.T, useTLS bool) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	body := chatSSE(t)
	var n atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.Copy(io.Discard, r.Body)
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.Error(w, "unexpected path "+r.URL.Path, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	})
	var srv *httptest.Server
	if useTLS {
		srv = httptest.NewUnstartedServer(h)
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv, &n
}

// caFile writes the TLS server's certificate as a PEM file.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "upstream-ca.pem")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, block, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// agentEnv is the environment without anything that would send the test
// agent elsewhere.
func agentEnv(extra ...string) []string { return testkit.ChildEnv(extra...) }

// recordLLMSession drives the LLM-backed test agent through acptap record
// with the scripted editor and returns the editor's stdout (the answers).
func recordLLMSession(t *testing.T, env []string, recordArgs []string, agentArgs ...string) string {
	t.Helper()
	args := append([]string{"--prompt", "hello", "--prompt", "again", "--", "acptap", "record"}, recordArgs...)
	args = append(append(args, "--", "testagent"), agentArgs...)
	cmd := exec.Command("testeditor", args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("testeditor %v: %v\nstderr:\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// llmEvents returns the llm lines of `show --json NAME`.
func llmEvents(t *testing.T, db, name string) []map[string]any {
	t.Helper()
	out, err := exec.Command("acptap", "show", "--store", db, "--json", name).Output()
	if err != nil {
		t.Fatalf("show --json: %v", err)
	}
	var events []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("show --json line %q: %v", line, err)
		}
		if m["lane"] == "llm" {
			events = append(events, m)
		}
	}
	return events
}

const wantAnswer = "Olá!"

func TestRecordLLMByBaseURL(t *testing.T) {
	upstream, hits := chatUpstream(t, false)
	db := filepath.Join(t.TempDir(), "s.db")
	out := recordLLMSession(t, agentEnv("OPENAI_API_KEY=sk-test-0123456789"),
		[]string{"--store", db, "--name", "base", "--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"})
	if !strings.Contains(out, wantAnswer) {
		t.Errorf("editor got %q, want the streamed answer %q", out, wantAnswer)
	}
	if got := hits.Load(); got != 2 {
		t.Errorf("upstream got %d requests, want 2", got)
	}
	events := llmEvents(t, db, "base")
	if len(events) != 2 {
		t.Fatalf("%d llm events, want 2", len(events))
	}
	for _, e := range events {
		if e["route"] != "base-url" || e["method"] != "POST" || e["url"] != upstream.URL+"/v1/chat/completions" || e["status"] != float64(200) {
			t.Errorf("llm event = route %v %v %v status %v, want base-url POST %s/v1/chat/completions 200", e["route"], e["method"], e["url"], e["status"], upstream.URL)
		}
		if e["response_body"] != string(chatSSE(t)) {
			t.Errorf("recorded response body differs from what the upstream sent")
		}
		if msg, _ := e["message"].(map[string]any); msg["text"] != wantAnswer {
			t.Errorf("reassembled message = %v, want text %q", e["message"], wantAnswer)
		}
	}
	timeline, err := exec.Command("acptap", "show", "--store", db, "base").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(timeline, []byte("llm")) || !bytes.Contains(timeline, []byte(`text: "`+wantAnswer+`"`)) {
		t.Errorf("timeline lacks the reassembled LLM answer:\n%s", timeline)
	}
}

func TestRecordLLMByProxyWithTLSInterception(t *testing.T) {
	upstream, hits := chatUpstream(t, true)
	db := filepath.Join(t.TempDir(), "s.db")
	out := recordLLMSession(t, agentEnv("OPENAI_API_KEY=sk-test-0123456789"),
		[]string{"--store", db, "--name", "mitm", "--proxy-loopback", "--upstream-ca", caFile(t, upstream)},
		"--llm", upstream.URL+"/v1")
	if !strings.Contains(out, wantAnswer) {
		t.Errorf("editor got %q, want the streamed answer %q", out, wantAnswer)
	}
	if got := hits.Load(); got != 2 {
		t.Errorf("upstream got %d requests, want 2", got)
	}
	events := llmEvents(t, db, "mitm")
	if len(events) != 2 {
		t.Fatalf("%d llm events, want 2", len(events))
	}
	for _, e := range events {
		if e["route"] != "proxy" || e["url"] != upstream.URL+"/v1/chat/completions" || e["status"] != float64(200) {
			t.Errorf("llm event = %v %v status %v, want proxy %s/v1/chat/completions 200", e["route"], e["url"], e["status"], upstream.URL)
		}
		if e["proto"] != "HTTP/2.0" {
			t.Errorf("upstream proto = %v, want HTTP/2.0", e["proto"])
		}
	}
}

func TestRecordLLMUpstreamDownKeepsSessionGoing(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	db := filepath.Join(t.TempDir(), "s.db")
	out := recordLLMSession(t, agentEnv(),
		[]string{"--store", db, "--name", "down", "--base-url", "OPENAI_BASE_URL=" + deadURL + "/v1"})
	if strings.Count(out, "error") < 2 {
		t.Errorf("editor got %q, want an error answer for each of the two prompts", out)
	}
	events := llmEvents(t, db, "down")
	if len(events) != 2 {
		t.Fatalf("%d llm events, want 2 (one per turn)", len(events))
	}
	for _, e := range events {
		if e["status"] != float64(502) && e["error"] == nil {
			t.Errorf("llm event for a dead upstream: status %v error %v, want 502 or an error", e["status"], e["error"])
		}
	}
}

// leakAgent makes one HTTP request carrying planted credentials in every
// place a client puts them, through HTTP_PROXY, and prints the secret from
// its environment on stdout and stderr, as careless agents do.
func leakAgent() {
	target := os.Getenv("LEAK_URL")
	proxyURL, _ := url.Parse(os.Getenv("HTTP_PROXY"))
	client := &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(proxyURL),
		TLSClientConfig: &tls.Config{},
	}}
	secret := os.Getenv("MY_SERVICE_TOKEN")
	body := strings.NewReader(`{"note":"token is ` + secret + `"}`)
	req, _ := http.NewRequest("POST", target+"/v1/messages?key=planted-query-key-456&alt=sse", body)
	req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
	req.Header.Set("X-Api-Key", "planted-xapikey-value-123")
	req.Header.Set("Cookie", "session=planted-cookie-789")
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "leakagent:", err)
		os.Exit(1)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	fmt.Printf(`{"jsonrpc":"2.0","method":"debug","params":{"token":%q}}`+"\n", secret)
	fmt.Fprintln(os.Stderr, "debug: using token", secret)
	io.Copy(io.Discard, os.Stdin)
}

var planted = []string{
	"sk-planted-auth-0123456789",
	"planted-xapikey-value-123",
	"planted-query-key-456",
	"planted-cookie-789",
	"planted-env-token-abc",
	"planted-setcookie-xyz",
}

func TestSecretsNeverReachTheStore(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "planted-setcookie-xyz"})
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	defer upstream.Close()
	db := filepath.Join(t.TempDir(), "s.db")
	cmd := exec.Command("acptap", "record", "--store", db, "--name", "leak", "--", "leakagent")
	cmd.Env = agentEnv("LEAK_URL="+upstream.URL, "OPENAI_API_KEY=sk-planted-auth-0123456789", "MY_SERVICE_TOKEN=planted-env-token-abc")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("acptap record: %v\n%s", err, stderr.String())
	}
	// The agent's own output reaches the editor untouched: redaction is
	// for the record only.
	if !strings.Contains(stdout.String(), "planted-env-token-abc") {
		t.Errorf("the editor did not get the agent's stdout as written: %q", stdout.String())
	}

	var everything bytes.Buffer
	for _, args := range [][]string{{"show", "--store", db}, {"show", "--store", db, "--json"},
		{"show", "--store", db, "leak"}, {"show", "--store", db, "--json", "leak"}} {
		out, err := exec.Command("acptap", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("acptap %v: %v\n%s", args, err, out)
		}
		everything.Write(out)
	}
	if !bytes.Contains(everything.Bytes(), []byte("REDACTED")) {
		t.Errorf("show output has no REDACTED marker; was anything recorded?\n%s", everything.String())
	}
	everything.Write(decompressedStore(t, db))
	raw, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	everything.Write(raw)
	for _, s := range planted {
		if bytes.Contains(everything.Bytes(), []byte(s)) {
			t.Errorf("planted secret %q reached the store or show output", s)
		}
	}
}

// decompressedStore returns every value of the store file, raw and, where
// it decompresses as zstd, decompressed, read with bbolt directly rather
// than through the store package.
func decompressedStore(t *testing.T, path string) []byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var all bytes.Buffer
	var walk func(b *bolt.Bucket) error
	walk = func(b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(b.Bucket(k))
			}
			all.Write(k)
			all.Write(v)
			all.Write(zstdAnywhere(v))
			return nil
		})
	}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(b) })
	})
	if err != nil {
		t.Fatal(err)
	}
	// And through the store package, as a cross-check.
	st, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, _ := st.List()
	for _, r := range recs {
		fmt.Fprintf(&all, "%+v", r)
		st.Events(r.Name, func(e store.Event) error { all.Write(e.Data); return nil })
	}
	return all.Bytes()
}

// TestRecordNoticesOnePrefix: what acptap itself says while recording
// (the recording's name, the tap's notice of each failed exchange) is one
// line each with one "acptap: " prefix, never doubled, and each notice
// once.
func TestRecordNoticesOnePrefix(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	db := filepath.Join(t.TempDir(), "s.db")
	args := []string{"--prompt", "hello", "--", "acptap", "record", "--store", db, "--name", "notices",
		"--base-url", "OPENAI_BASE_URL=" + deadURL + "/v1", "--", "testagent"}
	cmd := exec.Command("testeditor", args...)
	cmd.Env = agentEnv()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("testeditor %v: %v\nstderr:\n%s", args, err, stderr.String())
	}
	var ours []string
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if strings.HasPrefix(line, "acptap: ") {
			ours = append(ours, line)
		}
		if strings.Count(line, "acptap:") > 1 {
			t.Errorf("notice with the program's name twice: %q", line)
		}
	}
	var named, tap int
	for _, line := range ours {
		switch {
		case strings.HasPrefix(line, `acptap: recording "notices" into `):
			named++
		case strings.HasPrefix(line, "acptap: http tap: ") && strings.Contains(line, strings.TrimPrefix(deadURL, "http://")):
			tap++
		}
	}
	if named != 1 || tap != 1 {
		t.Errorf("%d recording notices and %d tap notices for the one failed exchange, want 1 and 1; acptap said:\n%s",
			named, tap, strings.Join(ours, "\n"))
	}
}

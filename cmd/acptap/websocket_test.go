package main

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/testing/fakellm"
	"github.com/acptap/acptap/internal/testing/fakeresponses"
)

// TestWebSocketLLM records the test agent speaking the Responses API over
// a WebSocket (--llm-ws, as Codex does by default) by both routes: each
// turn is an exchange of the connection, ws:// or wss://, its messages
// the server's events, which show reassembles; the recording replays
// green 5 times (20 in scripts/test-full) with --requests fail, and a
// changed prompt is caught.
func TestWebSocketLLM(t *testing.T) {
	for _, route := range []string{"base-url", "proxy-tls"} {
		t.Run(route, func(t *testing.T) {
			fake := fakeresponses.New(fakeresponses.Options{})
			var upstream *httptest.Server
			var flags, agent []string
			db := filepath.Join(t.TempDir(), "s.db")
			if route == "base-url" {
				upstream = httptest.NewServer(fake)
				flags = []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"}
			} else {
				upstream = httptest.NewTLSServer(fake)
				flags = []string{"--proxy-loopback", "--upstream-ca", caFile(t, upstream)}
				// By its URL on the command line, which a replay runs
				// again (its environment is not the recording's).
				agent = []string{"--llm", upstream.URL + "/v1"}
			}
			t.Cleanup(upstream.Close)
			t.Cleanup(fake.Close)
			env := agentEnv("OPENAI_API_KEY=sk-test-0123456789", "OPENAI_BASE_URL="+upstream.URL+"/v1")
			out := recordLLMSession(t, env, append([]string{"--store", db, "--name", "ws"}, flags...), append(agent, "--llm-ws")...)
			for _, p := range []string{"hello", "again"} {
				if !strings.Contains(out, fakellm.Answer(p)) {
					t.Errorf("the editor got %q, want the answer to %q", out, p)
				}
			}
			if n := len(fake.Requests()); n != 2 {
				t.Errorf("the fake got %d messages, want 2", n)
			}
			events := llmEvents(t, db, "ws")
			if len(events) != 2 {
				t.Fatalf("%d exchanges recorded, want one per turn (2)", len(events))
			}
			scheme := "ws://"
			if route == "proxy-tls" {
				scheme = "wss://"
			}
			for i, e := range events {
				url, _ := e["url"].(string)
				msg, _ := e["message"].(map[string]any)
				if !strings.HasPrefix(url, scheme) || !strings.HasSuffix(url, "/v1/responses") || e["status"] != float64(101) || e["format"] != "openai-responses" {
					t.Errorf("exchange %d: %v %v, format %v; want %s…/v1/responses 101 openai-responses", i+1, url, e["status"], e["format"], scheme)
				}
				if text, _ := msg["text"].(string); !strings.Contains(text, "You said") {
					t.Errorf("exchange %d: reassembled %v; want the answer's text", i+1, e["message"])
				}
				if body, _ := e["request_body"].(string); !strings.Contains(body, `"type":"response.create"`) {
					t.Errorf("exchange %d: request %q; want the agent's response.create message", i+1, body)
				}
			}
			shown, _, _ := runAcptap(t, t.TempDir(), agentEnv(), "show", "--store", db, "ws")
			if !strings.Contains(shown, "GET "+scheme) || !strings.Contains(shown, `text: "Hello from the fake model`) {
				t.Errorf("show lacks the WebSocket exchanges:\n%s", shown)
			}
			upstream.Close()
			for i := range repeats(t) {
				if out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "--requests", "fail", "ws"); code != 0 || !strings.Contains(out, "2 LLM exchanges served") {
					t.Fatalf("replay %d: exit %d\n%s%s", i+1, code, out, errOut)
				}
			}
			changed := append(append([]string{"replay", "--store", db, "--requests", "fail", "ws", "--", "testagent"}, agent...), "--llm-ws", "--system", "Be terse.")
			out2, _, code := runAcptap(t, t.TempDir(), agentEnv(), changed...)
			if code != ExitDiverged || !strings.Contains(out2, "instructions") {
				t.Errorf("a changed system prompt: exit %d, want %d and the request's instructions named\n%s", code, ExitDiverged, out2)
			}
		})
	}
}

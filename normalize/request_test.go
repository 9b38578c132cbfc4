package normalize

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acptap/acptap/lane"
)

// A requestRun is one run's LLM request in a testdata/request_*.json file,
// with the roots of that run.
type requestRun struct {
	Cwd, Home, Tmp []string
	Method, URL    string
	Header         http.Header
	Body           json.RawMessage
}

func (r requestRun) normalize() any {
	return New(Options{Cwd: r.Cwd, Home: r.Home, Tmp: r.Tmp}).Request(r.Method, r.URL, r.Header, r.Body)
}

func readRequests(t *testing.T, name string) []requestRun {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Comment string
		Runs    []requestRun
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(f.Runs) < 2 {
		t.Fatalf("%s: want a recorded and a replayed run, got %d runs", name, len(f.Runs))
	}
	return f.Runs
}

func pretty(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// TestGoldenRequests normalizes real request shapes of four wire formats,
// recorded and replayed, and checks that the runs agree.
func TestGoldenRequests(t *testing.T) {
	names, err := filepath.Glob("testdata/request_*.json")
	if err != nil || len(names) == 0 {
		t.Fatalf("no testdata/request_*.json: %v", err)
	}
	for _, name := range names {
		name = filepath.Base(name)
		t.Run(name, func(t *testing.T) {
			runs := readRequests(t, name)
			want := runs[0].normalize()
			checkGolden(t, strings.TrimSuffix(name, ".json")+".golden", pretty(want))
			for i, r := range runs[1:] {
				got := r.normalize()
				if path, av, bv, ok := FirstDifference(want, got); ok {
					t.Errorf("run %d differs from run 0 at %s: %v vs %v", i+1, path, av, bv)
				}
				out := pretty(got)
				for _, leak := range []string{"acptap-replay", "127.0.0.1", "sk-", "dummy", "2026-11", "November", "0.0.0", "Linux\"", "x64", "v20"} {
					if bytes.Contains(out, []byte(leak)) {
						t.Errorf("run %d: normalized request contains %q", i+1, leak)
					}
				}
			}
		})
	}
}

// TestRequestChangesVisible changes the replayed Responses request the
// way a regressed agent would.
func TestRequestChangesVisible(t *testing.T) {
	runs := readRequests(t, "request_responses.json")
	want := runs[0].normalize()
	tests := []struct {
		name   string
		change func(r *requestRun, body map[string]any)
		path   string
		av, bv any
	}{
		{"user text", func(_ *requestRun, b map[string]any) {
			msg := b["input"].([]any)[1].(map[string]any)["content"].([]any)[0].(map[string]any)
			msg["text"] = "Fix all the typos in README.md"
		}, "$.body.input[1].content[0].text", "Fix all the typos in README.md", "Fix all the typos in README.md"},
		{"model", func(_ *requestRun, b map[string]any) { b["model"] = "gpt-5" }, "$.body.model", "gpt-5-codex", "gpt-5"},
		{"tool argument", func(_ *requestRun, b map[string]any) {
			call := b["input"].([]any)[5].(map[string]any)
			call["arguments"] = strings.Replace(call["arguments"].(string), "120000", "60000", 1)
		}, "$.body.input[5].arguments",
			`{"command":["go","test","./..."],"timeout_ms":120000,"workdir":"<cwd>"}`,
			`{"command":["go","test","./..."],"timeout_ms":60000,"workdir":"<cwd>"}`},
		{"path outside the workspace", func(r *requestRun, b map[string]any) {
			call := b["input"].([]any)[3].(map[string]any)
			call["arguments"] = strings.Replace(call["arguments"].(string), "/ws", "/elsewhere", 1)
		}, "$.body.input[3].arguments",
			`{"command":["cat","README.md"],"workdir":"<cwd>"}`,
			`{"command":["cat","README.md"],"workdir":"<tmp>/../elsewhere"}`},
		{"beta header", func(r *requestRun, _ map[string]any) { r.Header.Set("OpenAI-Beta", "responses=v2") },
			`$.header["openai-beta"]`, "responses=experimental", "responses=v2"},
		{"endpoint", func(r *requestRun, _ map[string]any) { r.URL = "http://127.0.0.1:41234/v1/chat/completions" },
			"$.url", "/v1/responses", "/v1/chat/completions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runs[1]
			r.Header = r.Header.Clone()
			var body map[string]any
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
			tt.change(&r, body)
			r.Body, _ = json.Marshal(body)
			path, av, bv, ok := FirstDifference(want, r.normalize())
			if !ok {
				t.Fatalf("no difference, want one at %s", tt.path)
			}
			if tt.name == "user text" {
				tt.av = "Fix the typo in README.md"
			}
			if tt.name == "path outside the workspace" {
				// The replay's workspace is /tmp/acptap-replay-.../ws,
				// its TMPDIR .../tmp: a sibling of the workspace is
				// under neither.
				tt.bv = `{"command":["cat","README.md"],"workdir":"/tmp/acptap-replay-93c1d7/elsewhere"}`
			}
			if path != tt.path || !same(av, tt.av) || !same(bv, tt.bv) {
				t.Errorf("FirstDifference = %s: %#v vs %#v, want %s: %#v vs %#v", path, av, bv, tt.path, tt.av, tt.bv)
			}
		})
	}
}

// TestIdempotentRequests feeds each normalized request back in.
func TestIdempotentRequests(t *testing.T) {
	names, _ := filepath.Glob("testdata/request_*.json")
	for _, name := range names {
		for i, r := range readRequests(t, filepath.Base(name)) {
			once := r.normalize().(map[string]any)
			header := http.Header{}
			for k, v := range once["header"].(map[string]any) {
				switch x := v.(type) {
				case string:
					header.Add(k, x)
				case []any:
					for _, e := range x {
						header.Add(k, e.(string))
					}
				}
			}
			twice := New(Options{}).Request(once["method"].(string), once["url"].(string), header, encode(once["body"]))
			if path, av, bv, ok := FirstDifference(once, twice); ok {
				t.Errorf("%s run %d: normalizing twice differs at %s: %v vs %v", name, i, path, av, bv)
			}
		}
	}
}

func TestRequestParts(t *testing.T) {
	n := New(Options{Cwd: []string{"/w"}})
	h := http.Header{
		"User-Agent":        {"codex_cli_rs/0.63.0-alpha.4 (Mac OS 15.1.0; arm64) iTerm.app/3.5.10"},
		"X-Goog-Api-Client": {"gl-node/22.11.0 gccl/7.1.0"},
		"Anthropic-Version": {"2023-06-01"},
		"X-Request-Id":      {"req_abc"},
		"X-Session-Id":      {"s1"},
		"Traceparent":       {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"Accept":            {"text/event-stream", "application/json"},
		"Host":              {"api.openai.com"},
		"Content-Length":    {"12"},
		"Authorization":     {"Bearer x"},
		"Proxy-Connection":  {"keep-alive"},
		"X-Forwarded-For":   {"10.0.0.1"},
		"X-Stainless-Os":    {"Linux"},
	}
	got := n.Request("post", "https://h:1/v1beta/models/m:streamGenerateContent?key=K&alt=sse&api_key=K2", h, []byte("plain text in /w/x"))
	want := map[string]any{
		"method": "POST",
		"url":    "/v1beta/models/m:streamGenerateContent?alt=sse",
		"header": map[string]any{
			"user-agent":        "codex_cli_rs/<version> iTerm.app/<version>",
			"x-goog-api-client": "gl-node/<version> gccl/<version>",
			"anthropic-version": "2023-06-01",
			"traceparent":       "<id:1>",
			"x-request-id":      "<id:2>",
			"x-session-id":      "<sessionId:1>",
			"accept":            []any{"text/event-stream", "application/json"},
		},
		"body": "plain text in <cwd>/x",
	}
	if path, av, bv, ok := FirstDifference(got, want); ok {
		t.Errorf("Request differs at %s: got %v, want %v\ngot: %s", path, av, bv, pretty(got))
	}

	for _, body := range []string{"", " \n"} {
		if got := New(Options{}).Request("GET", "/v1/models", nil, []byte(body)).(map[string]any); got["body"] != nil {
			t.Errorf("Request with body %q: body = %#v, want nil", body, got["body"])
		}
	}
}

func TestNoDefaults(t *testing.T) {
	n := New(Options{Cwd: []string{"/w"}, NoDefaults: true})
	line := `{"jsonrpc":"2.0","id":3,"result":{"sessionId":"7c0e4f3a-1b2c-4d5e-8f90-a1b2c3d4e5f6","path":"/w/a","duration_ms":5,"at":"2026-11-29T10:00:00Z","text":"{\"a\": 1}"}}`
	want := `{"id":3,"jsonrpc":"2.0","result":{"at":"2026-11-29T10:00:00Z","duration_ms":5,"path":"<cwd>/a","sessionId":"7c0e4f3a-1b2c-4d5e-8f90-a1b2c3d4e5f6","text":"{\"a\": 1}"}}`
	if got := n.Frame(lane.Agent, []byte(line)); string(got) != want {
		t.Errorf("Frame with NoDefaults:\ngot  %s\nwant %s", got, want)
	}
	got := n.Request("POST", "/v1/x", http.Header{"Host": {"h"}, "X-Request-Id": {"r1"}, "User-Agent": {"a/1.2"}}, []byte(`{"id":"r1"}`))
	wantReq := map[string]any{"method": "POST", "url": "/v1/x", "header": map[string]any{"x-request-id": "r1", "user-agent": "a/1.2"}, "body": map[string]any{"id": "r1"}}
	if path, av, bv, ok := FirstDifference(got, wantReq); ok {
		t.Errorf("Request with NoDefaults differs at %s: got %v, want %v", path, av, bv)
	}
}

// TestRequestQueryValues: a query value is normalized as a JSON member of
// its key is, so that the volatile values of a URL (a time, a session id)
// do not make two runs' URLs differ, and the others do.
func TestRequestQueryValues(t *testing.T) {
	url := func(n *Normalizer, raw string) string {
		return n.Request("GET", raw, nil, nil).(map[string]any)["url"].(string)
	}
	a := url(New(Options{}), "https://registry.test/pkg?name=left-pad&ts=1718000000000&session_id=s-1&created=2024-06-10T06:13:20Z")
	b := url(New(Options{}), "https://registry.test/pkg?name=left-pad&ts=1718000009999&session_id=s-2&created=2024-06-10T06:13:29Z")
	if want := "/pkg?created=<time>&name=left-pad&session_id=<sessionId:1>&ts=<time>"; a != want || b != want {
		t.Errorf("urls %q and %q, want both %q", a, b, want)
	}
	if c := url(New(Options{}), "https://registry.test/pkg?name=right-pad&ts=1718000000000"); c == url(New(Options{}), "https://registry.test/pkg?name=left-pad&ts=1718000000000") {
		t.Errorf("a different name normalizes alike: %q", c)
	}
}

// TestConversation checks that Conversation lists a request's system
// prompt and messages in each wire format, and that two turns of one
// conversation share the earlier turn's messages as a prefix.
func TestConversation(t *testing.T) {
	req := func(body string) any {
		return New(Options{Cwd: []string{"/w"}}).Request("POST", "/v1/x", nil, []byte(body))
	}
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"chat", `{"model":"m","messages":[{"role":"system","content":"in /w"},{"role":"user","content":"hi"}]}`, 2},
		{"anthropic", `{"model":"m","system":"s","messages":[{"role":"user","content":"hi"}]}`, 2},
		{"responses", `{"model":"m","instructions":"s","input":[{"role":"user","content":"hi"},{"type":"function_call_output","output":"x"}]}`, 3},
		{"responses, text input", `{"model":"m","input":"hi"}`, 1},
		{"gemini", `{"systemInstruction":{"parts":[{"text":"s"}]},"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, 2},
		{"no conversation", `{"model":"m"}`, 0},
		{"not JSON", `hello`, 0},
	} {
		if got := Conversation(req(tc.body)); len(got) != tc.want {
			t.Errorf("%s: %d parts %q, want %d", tc.name, len(got), got, tc.want)
		}
	}
	first := Conversation(req(`{"messages":[{"role":"system","content":"in /w"},{"role":"user","content":"hi"}]}`))
	next := Conversation(req(`{"messages":[{"role":"system","content":"in /w"},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"more"}]}`))
	if len(next) != 4 || !slices.Equal(next[:2], first) || !strings.Contains(first[0], "<cwd>") {
		t.Errorf("the second turn %q does not continue the first %q, normalized", next, first)
	}
}

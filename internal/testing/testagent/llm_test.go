package testagent_test

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/testeditor"
)

// chatRequest is what the fake LLM reads of a request.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Metadata map[string]string `json:"metadata"`
}

// llmServer is a fake OpenAI Chat Completions upstream. handle answers
// the n-th request (from 0); every request is kept for the test to read.
type llmServer struct {
	t      *testing.T
	handle func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest)

	mu       sync.Mutex // guards requests and protos
	requests []*chatRequest
	protos   []string
}

func (s *llmServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		s.t.Errorf("fake LLM got %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	if got, want := r.Header.Get("Authorization"), "Bearer sk-test-key"; got != want {
		s.t.Errorf("Authorization = %q, want %q", got, want)
	}
	req := new(chatRequest)
	if err := json.NewDecoder(r.Body).Decode(req); err != nil {
		s.t.Errorf("decoding request: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !req.Stream {
		s.t.Errorf("request has stream false, want true")
	}
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, req)
	s.protos = append(s.protos, r.Proto)
	s.mu.Unlock()
	s.handle(w, r, n, req)
}

func (s *llmServer) recorded() ([]*chatRequest, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*chatRequest(nil), s.requests...), append([]string(nil), s.protos...)
}

// llmEnv points the agent at srv with the test key.
func llmEnv(srv *httptest.Server) []string {
	return []string{"OPENAI_BASE_URL=" + srv.URL + "/v1", "OPENAI_API_KEY=sk-test-key"}
}

// sse writes events as a Chat Completions stream, flushing each, then
// data: [DONE].
func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range events {
		fmt.Fprintf(w, "data: %s\n\n", e)
		w.(http.Flusher).Flush()
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// Chat Completions stream events, shaped like OpenAI's.
func roleEvent() string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1782321902,"model":"test-model","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"yS7A7F"}`
}

func textEvent(text string) string {
	b, _ := json.Marshal(text)
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1782321902,"model":"test-model","choices":[{"index":0,"delta":{"content":` + string(b) + `},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"TuWn"}`
}

func finishEvent(reason string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1782321902,"model":"test-model","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"` + reason + `"}],"usage":null}`
}

func usageEvent() string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1782321902,"model":"test-model","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22}}`
}

// toolEvents streams a read_file call with its arguments in fragments.
func toolEvents(id, args string) []string {
	events := []string{`{"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"` + id + `","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}`}
	for len(args) > 0 {
		n := min(5, len(args))
		b, _ := json.Marshal(args[:n])
		events = append(events, `{"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`+string(b)+`}}]},"finish_reason":null}]}`)
		args = args[n:]
	}
	return append(events, finishEvent("tool_calls"))
}

// answer streams text in the given pieces.
func answer(w http.ResponseWriter, pieces ...string) {
	events := []string{roleEvent()}
	for _, p := range pieces {
		events = append(events, textEvent(p))
	}
	sse(w, append(events, finishEvent("stop"), usageEvent())...)
}

func newLLM(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest)) (*llmServer, *httptest.Server) {
	s := &llmServer{t: t, handle: handle}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

func TestLLMText(t *testing.T) {
	dir := t.TempDir()
	s, srv := newLLM(t, func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest) {
		answer(w, "Hel", "lo, ", "world")
	})
	before := time.Now().Format(time.DateOnly)
	tr, _ := mustSession(t, testeditor.Options{Cwd: dir, Prompts: []string{"hello llm"}}, llmEnv(srv))
	after := time.Now().Format(time.DateOnly)

	if got, want := messageChunks(decode(t, tr)), []string{"Hel", "lo, ", "world"}; !reflect.DeepEqual(got, want) {
		t.Errorf("message chunks = %q, want one per delta %q", got, want)
	}
	if got := tr.Turns[0].StopReason; got != "end_turn" {
		t.Errorf("stop reason = %q, want end_turn", got)
	}
	reqs, _ := s.recorded()
	if len(reqs) != 1 {
		t.Fatalf("got %d LLM requests, want 1", len(reqs))
	}
	req := reqs[0]
	if req.Model != "test-model" {
		t.Errorf("model = %q, want test-model", req.Model)
	}
	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[1].Role != "user" || req.Messages[1].Content != "hello llm" {
		t.Fatalf("messages = %+v, want system and user %q", req.Messages, "hello llm")
	}
	sys := req.Messages[0].Content
	if !strings.Contains(sys, dir) || !(strings.Contains(sys, before) || strings.Contains(sys, after)) {
		t.Errorf("system prompt %q lacks the cwd %s or today's date", sys, dir)
	}
	if len(req.Tools) != 1 || req.Tools[0].Function.Name != "read_file" {
		t.Errorf("tools = %+v, want read_file", req.Tools)
	}
}

func TestLLMModelFlag(t *testing.T) {
	// --llm and --model win over the environment.
	s, srv := newLLM(t, func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest) { answer(w, "ok") })
	env := []string{"OPENAI_BASE_URL=http://127.0.0.1:1/unused", "OPENAI_API_KEY=sk-test-key"}
	tr, _ := mustSession(t, testeditor.Options{}, env, "--llm", srv.URL+"/v1/", "--model", "gpt-test")
	if got := tr.Turns[0].Text; got != "ok" {
		t.Errorf("answer = %q, want ok", got)
	}
	if reqs, _ := s.recorded(); len(reqs) != 1 || reqs[0].Model != "gpt-test" {
		t.Errorf("requests = %+v, want one for model gpt-test", reqs)
	}
}

func TestLLMCancelAbortsRequest(t *testing.T) {
	aborted := make(chan struct{})
	_, srv := newLLM(t, func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\ndata: %s\n\n", roleEvent(), textEvent("Hel"))
		w.(http.Flusher).Flush()
		// Only the agent giving up on the request ends this stream, and
		// only a chunk relayed before the end makes the editor cancel.
		<-r.Context().Done()
		close(aborted)
	})
	tr, _ := mustSession(t, testeditor.Options{CancelAfter: 1}, llmEnv(srv))
	if got := tr.Turns[0]; got.StopReason != "cancelled" || got.Text != "Hel" {
		t.Errorf("turn = %+v, want cancelled after %q", got, "Hel")
	}
	select {
	case <-aborted:
	case <-time.After(30 * time.Second): // liveness guard
		t.Error("the LLM request was not aborted")
	}
}

func TestLLMToolCall(t *testing.T) {
	dir := workspace(t, "alpha\nbeta\n")
	s, srv := newLLM(t, func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest) {
		switch n {
		case 0:
			sse(w, toolEvents("call_model_1", `{"path": "notes.txt"}`)...)
		case 1:
			answer(w, "It says ", "alpha.")
		default:
			answer(w, "You're welcome.")
		}
	})
	tr, _ := mustSession(t, testeditor.Options{Cwd: dir, Prompts: []string{"what is in notes.txt?", "thanks"}}, llmEnv(srv))

	if got, want := []string{tr.Turns[0].Text, tr.Turns[1].Text}, []string{"It says alpha.", "You're welcome."}; !reflect.DeepEqual(got, want) {
		t.Errorf("answers = %q, want %q", got, want)
	}
	msgs := decode(t, tr)
	call := index(msgs, updateOf("tool_call"))
	perm := index(msgs, agentRequest("session/request_permission"))
	read := index(msgs, agentRequest("fs/read_text_file"))
	done := index(msgs, updateOf("tool_call_update"))
	if !(0 <= call && call < perm && perm < read && read < done) {
		t.Fatalf("positions: tool_call %d, permission %d, fs/read_text_file %d, tool_call_update %d; want them in this order", call, perm, read, done)
	}
	if got := get(msgs[call].Params, "update", "toolCallId"); got != "call_model_1" {
		t.Errorf("toolCallId = %v, want the model's call_model_1", got)
	}
	if got, want := msgs[read].Params["path"], filepath.Join(dir, "notes.txt"); got != want {
		t.Errorf("fs/read_text_file path = %v, want %v", got, want)
	}

	reqs, _ := s.recorded()
	if len(reqs) != 3 {
		t.Fatalf("got %d LLM requests, want 3", len(reqs))
	}
	type msg struct{ Role, Content, ToolCallID, Call string }
	flatten := func(req *chatRequest) []msg {
		var out []msg
		for _, m := range req.Messages[1:] { // after the system prompt
			f := msg{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
			for _, tc := range m.ToolCalls {
				f.Call += tc.ID + " " + tc.Type + " " + tc.Function.Name + " " + tc.Function.Arguments
			}
			out = append(out, f)
		}
		return out
	}
	second := []msg{
		{Role: "user", Content: "what is in notes.txt?"},
		{Role: "assistant", Call: `call_model_1 function read_file {"path": "notes.txt"}`},
		{Role: "tool", Content: "alpha\nbeta\n", ToolCallID: "call_model_1"},
	}
	if got := flatten(reqs[1]); !reflect.DeepEqual(got, second) {
		t.Errorf("second request's messages =\n%+v\nwant\n%+v", got, second)
	}
	third := append(second,
		msg{Role: "assistant", Content: "It says alpha."},
		msg{Role: "user", Content: "thanks"})
	if got := flatten(reqs[2]); !reflect.DeepEqual(got, third) {
		t.Errorf("second turn's request messages =\n%+v\nwant the whole history\n%+v", got, third)
	}
}

func TestLLMToolRejected(t *testing.T) {
	dir := workspace(t, "secret\n")
	s, srv := newLLM(t, func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest) {
		if n == 0 {
			sse(w, toolEvents("call_x", `{"path":"notes.txt"}`)...)
			return
		}
		answer(w, "Understood.")
	})
	tr, _ := mustSession(t, testeditor.Options{Cwd: dir, Reject: true}, llmEnv(srv))
	if got := tr.Turns[0].Text; got != "Understood." {
		t.Errorf("answer = %q, want Understood.", got)
	}
	reqs, _ := s.recorded()
	last := reqs[len(reqs)-1].Messages
	if tool := last[len(last)-1]; tool.Role != "tool" || tool.Content != "error: permission denied" {
		t.Errorf("tool result = %+v, want error: permission denied", tool)
	}
}

func TestLLMTitleCallRaces(t *testing.T) {
	// Each of the two first requests waits for the other to arrive: they
	// can only complete if the agent makes them concurrently.
	var mainSeen, titleSeen sync.Once
	mainArrived, titleArrived := make(chan struct{}), make(chan struct{})
	wait := func(ch chan struct{}, what string) bool {
		select {
		case <-ch:
			return true
		case <-time.After(30 * time.Second): // liveness guard
			t.Errorf("%s never arrived while the other request was in flight", what)
			return false
		}
	}
	s, srv := newLLM(t, func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest) {
		if req.Model == "title-model" {
			titleSeen.Do(func() { close(titleArrived) })
			if !wait(mainArrived, "the main request") {
				http.Error(w, "no main request", http.StatusInternalServerError)
				return
			}
			answer(w, "Greeting ", "Test")
			return
		}
		mainSeen.Do(func() { close(mainArrived) })
		if !wait(titleArrived, "the title request") {
			http.Error(w, "no title request", http.StatusInternalServerError)
			return
		}
		answer(w, "Hi.")
	})
	tr, stderr := mustSession(t, testeditor.Options{Prompts: []string{"hello", "again"}}, llmEnv(srv), "--title-call")
	if got := tr.Turns[0].Text + "|" + tr.Turns[1].Text; got != "Hi.|Hi." {
		t.Errorf("answers = %q, want Hi. twice", got)
	}
	if !strings.Contains(stderr, `testagent: title: "Greeting Test"`) {
		t.Errorf("agent stderr = %q, want the title logged", stderr)
	}
	reqs, _ := s.recorded()
	var titles []*chatRequest
	for _, r := range reqs {
		if r.Model == "title-model" {
			titles = append(titles, r)
		}
	}
	if len(reqs) != 3 || len(titles) != 1 {
		t.Fatalf("got %d requests with %d title calls, want 3 with 1 (first turn only)", len(reqs), len(titles))
	}
	if m := titles[0].Messages; len(m) != 2 || m[1].Content != "hello" || len(titles[0].Tools) != 0 {
		t.Errorf("title request = %+v, want the first prompt and no tools", titles[0])
	}
}

func TestLLMErrorsEndTheTurn(t *testing.T) {
	tests := []struct {
		name   string
		handle func(w http.ResponseWriter)
		want   []string // parts of the answer
	}{
		{"http 500", func(w http.ResponseWriter) {
			http.Error(w, "upstream exploded", http.StatusInternalServerError)
		}, []string{"error: POST http://", "/v1/chat/completions: 500 Internal Server Error: upstream exploded"}},
		{"http 401", func(w http.ResponseWriter) {
			http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
		}, []string{"401 Unauthorized", "bad key"}},
		{"stream cut", func(w http.ResponseWriter) {
			fmt.Fprintf(w, "data: %s\n\ndata: %s\n\n", roleEvent(), textEvent("partial "))
		}, []string{"partial error: reading the response of POST", "stream ended before data: [DONE]"}},
		{"malformed event", func(w http.ResponseWriter) {
			fmt.Fprintf(w, "data: %s\n\ndata: {\"choices\": [\n\n", textEvent("so far "))
		}, []string{"so far error: ", "malformed stream event"}},
		{"error event", func(w http.ResponseWriter) {
			fmt.Fprint(w, "data: {\"error\":{\"message\":\"overloaded\"}}\n\n")
		}, []string{"error: ", "error event in stream: overloaded"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, srv := newLLM(t, func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest) { tt.handle(w) })
			tr, _ := mustSession(t, testeditor.Options{}, llmEnv(srv))
			turn := tr.Turns[0]
			if turn.StopReason != "end_turn" {
				t.Errorf("stop reason = %q, want end_turn", turn.StopReason)
			}
			for _, want := range tt.want {
				if !strings.Contains(turn.Text, want) {
					t.Errorf("answer %q lacks %q", turn.Text, want)
				}
			}
		})
	}
}

func TestLLMStreamWithoutDone(t *testing.T) {
	// A stream that finished its choice may end without [DONE].
	_, srv := newLLM(t, func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest) {
		fmt.Fprintf(w, "data: %s\r\n\r\n: keep-alive comment\r\n\r\ndata: %s\r\n\r\n", textEvent("complete"), finishEvent("stop"))
	})
	tr, _ := mustSession(t, testeditor.Options{}, llmEnv(srv))
	if got := tr.Turns[0].Text; got != "complete" {
		t.Errorf("answer = %q, want complete", got)
	}
}

func TestLLMRetries(t *testing.T) {
	s, srv := newLLM(t, func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest) {
		switch n {
		case 0:
			w.Header().Set("Retry-After", "0")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case 1:
			http.Error(w, "try later", http.StatusServiceUnavailable)
		default:
			answer(w, "recovered")
		}
	})
	tr, stderr := mustSession(t, testeditor.Options{}, llmEnv(srv), "--retries", "2")
	if got := tr.Turns[0].Text; got != "recovered" {
		t.Errorf("answer = %q, want recovered", got)
	}
	if reqs, _ := s.recorded(); len(reqs) != 3 {
		t.Errorf("got %d requests, want 3", len(reqs))
	}
	for _, want := range []string{"retry 1 of 2 in 0s: POST", "429 Too Many Requests: slow down", "retry 2 of 2", "503 Service Unavailable: try later"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("agent stderr %q lacks %q", stderr, want)
		}
	}
}

// tlsLLM starts the fake LLM over TLS with HTTP/2 and writes its CA
// certificate to a PEM file.
func tlsLLM(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest)) (*llmServer, *httptest.Server, string) {
	s := &llmServer{t: t, handle: handle}
	srv := httptest.NewUnstartedServer(s)
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted case makes handshakes fail
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return s, srv, ca
}

func TestLLMOverTLS(t *testing.T) {
	tests := []struct {
		name    string
		trust   func(ca string) (env, args []string)
		want    string
		wantReq bool
	}{
		{"--ca", func(ca string) ([]string, []string) { return nil, []string{"--ca", ca} }, "secure", true},
		{"SSL_CERT_FILE", func(ca string) ([]string, []string) { return []string{"SSL_CERT_FILE=" + ca}, nil }, "secure", true},
		{"untrusted", func(string) ([]string, []string) { return nil, nil }, "certificate", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, srv, ca := tlsLLM(t, func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest) {
				answer(w, "secure")
			})
			env, args := tt.trust(ca)
			tr, _ := mustSession(t, testeditor.Options{}, append(llmEnv(srv), env...), args...)
			if got := tr.Turns[0].Text; !strings.Contains(got, tt.want) {
				t.Errorf("answer = %q, want it to contain %q", got, tt.want)
			}
			reqs, protos := s.recorded()
			if got := len(reqs) > 0; got != tt.wantReq {
				t.Fatalf("upstream got %d requests, want some: %v", len(reqs), tt.wantReq)
			}
			for _, p := range protos {
				if p != "HTTP/2.0" {
					t.Errorf("request protocol %s, want HTTP/2.0", p)
				}
			}
		})
	}
}

// forwardProxy is a minimal forward HTTP proxy: absolute-form requests are
// relayed (streaming the response), CONNECT opens a TCP tunnel.
type forwardProxy struct {
	t         *testing.T
	transport *http.Transport
	forwarded atomic.Int32 // absolute-form requests relayed
	tunnels   atomic.Int32 // CONNECT tunnels opened
}

func newProxy(t *testing.T) (*forwardProxy, *httptest.Server) {
	p := &forwardProxy{t: t, transport: &http.Transport{}}
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		srv.Close()
		p.transport.CloseIdleConnections()
	})
	return p, srv
}

func (p *forwardProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.tunnels.Add(1)
		p.tunnel(w, r)
		return
	}
	if !r.URL.IsAbs() {
		http.Error(w, "not a proxy request", http.StatusBadRequest)
		return
	}
	p.forwarded.Add(1)
	// Read the whole body first: once this handler writes its response the
	// server may close the request body under a transport still sending it.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.Header.Del("Proxy-Connection")
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			w.(http.Flusher).Flush()
		}
		if err != nil {
			return
		}
	}
}

func (p *forwardProxy) tunnel(w http.ResponseWriter, r *http.Request) {
	dst, err := net.Dial("tcp", r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	conn, rw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		p.t.Errorf("hijacking CONNECT: %v", err)
		dst.Close()
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		dst.Close()
		return
	}
	go func() {
		io.Copy(dst, rw.Reader) // it holds what the client sent after the CONNECT head
		dst.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(conn, dst)
	conn.Close()
	dst.Close()
}

func TestLLMThroughForwardProxy(t *testing.T) {
	tests := []struct {
		name          string
		tls           bool
		env           func(proxy string) []string
		wantForwarded int32
		wantTunnels   int32
	}{
		{"HTTP_PROXY", false, func(p string) []string { return []string{"HTTP_PROXY=" + p} }, 1, 0},
		{"http_proxy", false, func(p string) []string { return []string{"http_proxy=" + p} }, 1, 0},
		{"ALL_PROXY without scheme", false, func(p string) []string { return []string{"ALL_PROXY=" + strings.TrimPrefix(p, "http://")} }, 1, 0},
		{"https_proxy with CONNECT", true, func(p string) []string { return []string{"https_proxy=" + p} }, 0, 1},
		{"HTTPS_PROXY ignores http targets", false, func(p string) []string { return []string{"HTTPS_PROXY=" + p} }, 0, 0},
		{"NO_PROXY", false, func(p string) []string { return []string{"HTTP_PROXY=" + p, "NO_PROXY=example.com,127.0.0.1"} }, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			handle := func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest) { answer(w, "via ", "proxy") }
			var upstream *httptest.Server
			var args []string
			if tt.tls {
				var ca string
				_, upstream, ca = tlsLLM(t, handle)
				args = []string{"--ca", ca}
			} else {
				_, upstream = newLLM(t, handle)
			}
			proxy, proxySrv := newProxy(t)
			tr, stderr := mustSession(t, testeditor.Options{}, append(llmEnv(upstream), tt.env(proxySrv.URL)...), args...)
			if got := tr.Turns[0].Text; got != "via proxy" {
				t.Errorf("answer = %q, want %q (agent stderr %q)", got, "via proxy", stderr)
			}
			if got, got2 := proxy.forwarded.Load(), proxy.tunnels.Load(); got != tt.wantForwarded || got2 != tt.wantTunnels {
				t.Errorf("proxy relayed %d requests and %d tunnels, want %d and %d", got, got2, tt.wantForwarded, tt.wantTunnels)
			}
		})
	}
}

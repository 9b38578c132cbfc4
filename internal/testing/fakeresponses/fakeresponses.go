// Package fakeresponses is a scripted OpenAI Responses API server (POST /v1/responses, streamed as SSE) that stands in for the LLM of a real agent such as codex-acp.
//
// Each response is chosen from the request's input, the way a test wants
// a model to behave:
//
//   - the last input item is the output of a tool call: the model answers
//     with a sentence quoting it (see [ToolAnswer]);
//   - the last user message contains the word "run": the model calls the
//     agent's shell tool to run `echo hello-from-codex` ([ShellCommand]);
//   - the last user message contains the word "slowly": the model starts
//     an answer, streams [SlowDeltas] text deltas (Options.Delay apart) and
//     then keeps the stream open until the client goes away, so that the
//     turn can only end by the client cancelling it;
//   - anything else: a short answer that quotes the prompt (see [Answer]).
//
// A request with "generate": false (Codex warms a WebSocket up with one,
// its input empty) gets a response without output.
//
// Responses have the shape of the real API's, with fresh random ids,
// created_at, obfuscation and sequence numbers on every call. Request
// bodies may be compressed (Content-Encoding zstd, gzip or deflate, as
// Codex sends them). Every request is kept, decoded, for tests to inspect.
package fakeresponses

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/acptap/acptap/internal/testing/fakellm"
	"github.com/klauspost/compress/zstd"
)

// ShellCommand is the command the model asks the shell tool to run.
const ShellCommand = "touch ran.txt && echo hello-from-codex"

// ShellOutput is what ShellCommand prints.
const ShellOutput = "hello-from-codex"

// SlowDeltas is the number of text deltas a "slowly" answer streams before
// it stalls.
const SlowDeltas = 3

// shellTools are the names under which agents offer a shell, in the order
// they are preferred.
var shellTools = []string{"shell", "shell_command", "exec_command", "local_shell"}

// Options configure a Server. The zero value works.
type Options struct {
	// Delay is the pause before each text delta of a "slowly" answer.
	Delay time.Duration
	// Variant, when not empty, is put at the start of every text answer: a
	// model that answers differently from the usual one.
	Variant string
}

// Server is the scripted Responses API, an http.Handler.
type Server struct {
	fakellm.Log[Request] // the requests, and the end of stalled streams
	opts                 Options
}

// Request is one request the server got.
type Request = fakellm.Request

// New returns a Server.
func New(opts Options) *Server {
	return &Server{opts: opts}
}

// request is the part of a Responses request the script reads.
type request struct {
	Model  string            `json:"model"`
	Input  []json.RawMessage `json:"input"`
	Tools  []json.RawMessage `json:"tools"`
	Stream bool              `json:"stream"`
	// Generate false asks for no output: a warm-up of the connection,
	// as Codex sends one on a WebSocket before the first turn.
	Generate *bool `json:"generate"`
}

// item is an input item.
type item struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Output  json.RawMessage `json:"output"`
}

// tool is an offered tool.
type tool struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
}

var (
	runWord    = regexp.MustCompile(`(?i)\brun\b`)
	slowlyWord = regexp.MustCompile(`(?i)\bslowly\b`)
)

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Encoding: r.Header.Get("Content-Encoding"), Step: "error"}
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/responses") && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		s.serveWebSocket(w, r, rec)
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		s.Keep(rec)
		apiError(w, http.StatusNotFound, "fakeresponses serves POST /v1/responses only, not "+r.Method+" "+r.URL.Path)
		return
	}
	body, err := decodeBody(r)
	rec.Body = body
	if err != nil {
		s.Keep(rec)
		apiError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		s.Keep(rec)
		apiError(w, http.StatusBadRequest, "the request body is not JSON: "+err.Error())
		return
	}
	if !req.Stream {
		s.Keep(rec)
		apiError(w, http.StatusBadRequest, "fakeresponses streams only: set \"stream\": true")
		return
	}
	if len(req.Input) == 0 {
		s.Keep(rec)
		apiError(w, http.StatusBadRequest, "the request has no input")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("X-Request-Id", "req_"+fakellm.RandomHex(16))
	w.WriteHeader(http.StatusOK)
	st := newStream(req.Model, func(typ string, data []byte) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
		w.(http.Flusher).Flush()
	})
	if !s.respond(rec, req, st, r.Context().Done()) {
		// The stream never ended: a clean return would end the chunked
		// body as if the response were complete.
		panic(http.ErrAbortHandler)
	}
}

// respond streams the answer to req on st, choosing it as the package
// says, and keeps rec with the step taken. It returns false for an
// answer that never ended (a "slowly" one): gone closed, or the server
// closed, before it did.
func (s *Server) respond(rec Request, req request, st *stream, gone <-chan struct{}) bool {
	var tools []tool
	for _, raw := range req.Tools {
		var t tool
		if json.Unmarshal(raw, &t) == nil {
			tools = append(tools, t)
			name := t.Name
			if name == "" {
				name = t.Type
			}
			rec.Tools = append(rec.Tools, name)
		}
	}
	last := lastItem(req.Input)
	switch {
	case req.Generate != nil && !*req.Generate:
		rec.Step = "prewarm"
		s.Keep(rec)
		st.start()
		st.complete([]any{}, 0)
	case strings.HasSuffix(last.Type, "_call_output"):
		rec.Step = "tool-answer"
		s.Keep(rec)
		st.text(s.opts.Variant + fakellm.ToolAnswer(outputText(last.Output), ShellOutput))
	case last.Type == "message" && last.Role == "user" && slowlyWord.MatchString(contentText(last.Content)):
		rec.Step = "slow"
		s.Keep(rec)
		st.slow(gone, s.Done(), s.opts.Delay)
		return false
	case last.Type == "message" && last.Role == "user" && runWord.MatchString(contentText(last.Content)):
		name, args, ok := shellCall(tools)
		if !ok {
			rec.Step = "text"
			s.Keep(rec)
			st.text(s.opts.Variant + "I have no shell tool to run it with; the tools offered are: " + strings.Join(rec.Tools, ", "))
			return true
		}
		rec.Step = "shell"
		s.Keep(rec)
		st.functionCall(name, args)
	default:
		rec.Step = "text"
		s.Keep(rec)
		st.text(s.opts.Variant + fakellm.Answer(contentText(last.Content)))
	}
	return true
}

// lastItem returns the last input item that is a user message or a tool
// call's output: what the model is to answer.
func lastItem(input []json.RawMessage) item {
	for i := len(input) - 1; i >= 0; i-- {
		var it item
		if json.Unmarshal(input[i], &it) != nil {
			continue
		}
		if it.Type == "" && it.Role != "" {
			it.Type = "message" // EasyInputMessage
		}
		if strings.HasSuffix(it.Type, "_call_output") || it.Type == "message" && it.Role == "user" {
			return it
		}
	}
	return item{}
}

// contentText returns the text of a message's content: a string or a list
// of parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// outputText returns a tool call output: a string, a list of content
// parts, or an object with an "output" or "content" field (older agents).
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		var o struct {
			Output string `json:"output"`
		}
		if json.Unmarshal([]byte(s), &o) == nil && o.Output != "" {
			return o.Output
		}
		return s
	}
	if t := contentText(raw); t != "" {
		return t
	}
	return string(raw)
}

// shellCall returns the call of the preferred shell tool offered, with its
// arguments in the shape the tool's parameters ask for.
func shellCall(tools []tool) (name, args string, ok bool) {
	for _, want := range shellTools {
		for _, t := range tools {
			if t.Name != want && !(t.Name == "" && t.Type == want) {
				continue
			}
			var p struct {
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
			}
			json.Unmarshal(t.Parameters, &p)
			var a map[string]any
			switch {
			case p.Properties["cmd"].Type == "string":
				a = map[string]any{"cmd": ShellCommand}
			case p.Properties["command"].Type == "string":
				a = map[string]any{"command": ShellCommand}
			default:
				a = map[string]any{"command": []string{"bash", "-lc", ShellCommand}}
			}
			return want, string(marshal(a)), true
		}
	}
	return "", "", false
}

// decodeBody reads the request body, decoded from its Content-Encoding.
func decodeBody(r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return raw, nil
	case "zstd":
		d, err := zstd.NewReader(nil)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		b, err := d.DecodeAll(raw, nil)
		if err != nil {
			return raw, fmt.Errorf("zstd: %w", err)
		}
		return b, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return raw, fmt.Errorf("gzip: %w", err)
		}
		return io.ReadAll(zr)
	case "deflate":
		return io.ReadAll(flate.NewReader(bytes.NewReader(raw)))
	default:
		return raw, fmt.Errorf("unsupported Content-Encoding %q", enc)
	}
}

func apiError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// stream writes one streamed response, each event by emit: an SSE
// event, or a WebSocket message.
type stream struct {
	emit    func(typ string, data []byte)
	seq     int
	id      string
	model   string
	created int64
}

func newStream(model string, emit func(typ string, data []byte)) *stream {
	return &stream{emit: emit, id: "resp_" + fakellm.RandomHex(24), model: model, created: time.Now().Unix()}
}

// event emits one event, its type in the data (and, over SSE, in the
// event line).
func (st *stream) event(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = st.seq
	st.seq++
	st.emit(typ, marshal(fields))
}

// response is the response object of response.created, .in_progress and
// .completed.
func (st *stream) response(status string, output []any, usage any) map[string]any {
	var completedAt any
	if status == "completed" {
		completedAt = time.Now().Unix()
	}
	return map[string]any{
		"id": st.id, "object": "response", "created_at": st.created, "status": status,
		"background": false, "completed_at": completedAt, "error": nil, "incomplete_details": nil,
		"instructions": nil, "max_output_tokens": nil, "model": st.model, "output": output,
		"parallel_tool_calls": false, "previous_response_id": nil, "reasoning": map[string]any{"effort": nil, "summary": nil},
		"service_tier": "default", "store": false, "temperature": 1.0,
		"text":        map[string]any{"format": map[string]any{"type": "text"}, "verbosity": "medium"},
		"tool_choice": "auto", "tools": []any{}, "top_p": 1.0, "truncation": "disabled",
		"usage": usage, "user": nil, "metadata": map[string]any{},
	}
}

func (st *stream) start() {
	st.event("response.created", map[string]any{"response": st.response("in_progress", []any{}, nil)})
	st.event("response.in_progress", map[string]any{"response": st.response("in_progress", []any{}, nil)})
}

func (st *stream) complete(output []any, outTokens int) {
	in := 100 + len(st.id)%7
	usage := map[string]any{
		"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": outTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": in + outTokens,
	}
	st.event("response.completed", map[string]any{"response": st.response("completed", output, usage)})
}

// messageItem starts an assistant message and its text part.
func (st *stream) messageItem() string {
	id := "msg_" + fakellm.RandomHex(24)
	st.event("response.output_item.added", map[string]any{"output_index": 0,
		"item": map[string]any{"id": id, "type": "message", "status": "in_progress", "content": []any{}, "role": "assistant"}})
	st.event("response.content_part.added", map[string]any{"output_index": 0, "content_index": 0, "item_id": id,
		"part": map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": ""}})
	return id
}

func (st *stream) delta(id, d string) {
	st.event("response.output_text.delta", map[string]any{"output_index": 0, "content_index": 0, "item_id": id,
		"delta": d, "logprobs": []any{}, "obfuscation": fakellm.RandomHex(1 + len(id)%7)})
}

// text streams an answer a few words at a time.
func (st *stream) text(answer string) {
	st.start()
	id := st.messageItem()
	words := strings.SplitAfter(answer, " ")
	for i := 0; i < len(words); i += 3 {
		st.delta(id, strings.Join(words[i:min(i+3, len(words))], ""))
	}
	part := map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": answer}
	st.event("response.output_text.done", map[string]any{"output_index": 0, "content_index": 0, "item_id": id, "logprobs": []any{}, "text": answer})
	st.event("response.content_part.done", map[string]any{"output_index": 0, "content_index": 0, "item_id": id, "part": part})
	msg := map[string]any{"id": id, "type": "message", "status": "completed", "content": []any{part}, "role": "assistant"}
	st.event("response.output_item.done", map[string]any{"output_index": 0, "item": msg})
	st.complete([]any{msg}, len(words))
}

// slow streams SlowDeltas words of SlowAnswer, each after delay, and then
// keeps the response open, as a model still thinking does, until gone or
// done is closed.
func (st *stream) slow(gone, done <-chan struct{}, delay time.Duration) {
	st.start()
	id := st.messageItem()
	words := strings.SplitAfter(fakellm.SlowAnswer, " ")
	for i := range SlowDeltas {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-gone:
				t.Stop()
				return
			case <-done:
				t.Stop()
				return
			}
		}
		st.delta(id, words[i%len(words)])
	}
	select {
	case <-gone:
	case <-done:
	}
}

// functionCall streams one call of tool name, its arguments in two
// fragments.
func (st *stream) functionCall(name, args string) {
	st.start()
	id, callID := "fc_"+fakellm.RandomHex(24), "call_"+fakellm.RandomHex(12)
	st.event("response.output_item.added", map[string]any{"output_index": 0,
		"item": map[string]any{"id": id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": callID, "name": name}})
	half := len(args) / 2
	for _, d := range []string{args[:half], args[half:]} {
		st.event("response.function_call_arguments.delta", map[string]any{"output_index": 0, "item_id": id, "delta": d, "obfuscation": fakellm.RandomHex(3)})
	}
	st.event("response.function_call_arguments.done", map[string]any{"output_index": 0, "item_id": id, "arguments": args})
	call := map[string]any{"id": id, "type": "function_call", "status": "completed", "arguments": args, "call_id": callID, "name": name}
	st.event("response.output_item.done", map[string]any{"output_index": 0, "item": call})
	st.complete([]any{call}, 20)
}

// marshal encodes v as the API does: without escaping <, > and &.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Listener is a running fake: a Server at an Endpoint.
type Listener struct {
	*Server
	fakellm.Endpoint
}

// Start starts a plain HTTP fake on a loopback port.
func Start(opts Options) *Listener {
	s := New(opts)
	return &Listener{Server: s, Endpoint: fakellm.Serve(s, "/v1")}
}

// StartTLS starts an HTTPS fake on a loopback port (see fakellm.ServeTLS),
// writing its CA file in dir.
func StartTLS(opts Options, dir string) (*Listener, error) {
	s := New(opts)
	ep, err := fakellm.ServeTLS(s, "/v1", dir, "fakeresponses")
	if err != nil {
		return nil, err
	}
	return &Listener{Server: s, Endpoint: ep}, nil
}

// Close stops the fake: stalled streams end, then the server closes.
func (l *Listener) Close() {
	l.Server.Close()
	l.HTTP.Close()
}

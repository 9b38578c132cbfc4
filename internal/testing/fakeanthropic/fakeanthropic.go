// Package fakeanthropic is a scripted Anthropic Messages API server (POST /v1/messages, streamed as SSE or answered as JSON) that stands in for the LLM of a real agent such as claude-agent-acp.
//
// Each answer is chosen from the request's last user message, the way a
// test wants a model to behave:
//
//   - it holds a tool_result block: the model answers with a sentence
//     quoting the tool's output (see [ToolAnswer]);
//   - its text contains the word "slowly": the model starts an answer,
//     streams [SlowDeltas] text deltas (Options.Delay apart) and then keeps
//     the stream open until the client goes away, so that the turn can
//     only end by the client cancelling it;
//   - its text contains the word "run": the model calls the agent's shell
//     tool (Bash, or run_shell_command) to run [BashCommand], a required
//     boolean argument of the tool's schema false;
//   - the request asks for structured output (output_config.format of
//     type json_schema, as Claude Code's session-title request does): the
//     model answers a JSON object of the schema's required string
//     properties, a "title" being [Title] of the text between the
//     prompt's <session> tags;
//   - anything else: a short answer that quotes the prompt (see [Answer]).
//
// Text blocks that are Claude Code's <system-reminder> notes are not part
// of the prompt the script reads.
//
// Options.Faults has the first Messages requests answered with the real
// API's 429, 529 or 5xx errors, for retry tests.
//
// The side endpoints an agent may call at start-up are answered as the
// real API does: POST /v1/messages/count_tokens, GET /v1/models (and
// /v1/models/ID), and HEAD or GET / (200). Responses have the shape of
// the real API's, with fresh msg_ and toolu_ ids and request-id headers on
// every call. Request bodies may be compressed (Content-Encoding gzip,
// zstd, deflate or br). Every request is kept, decoded, for tests to
// inspect.
package fakeanthropic

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acptap/acptap/internal/httpcoding"
	"github.com/acptap/acptap/internal/testing/fakellm"
)

// BashCommand is the command the model asks the Bash tool to run.
const BashCommand = "touch ran.txt && echo hello-from-claude"

// BashDescription is the description the model gives the Bash call.
const BashDescription = "Create ran.txt and print a greeting"

// BashOutput is what BashCommand prints.
const BashOutput = "hello-from-claude"

// SlowDeltas is the number of text deltas a "slowly" answer streams before
// it stalls.
const SlowDeltas = 3

// ToolPreamble is the text the model streams before its tool call.
const ToolPreamble = "I'll run the command."

// maxBody is the most a request body may decode to.
const maxBody = 64 << 20

// shellTools are the names under which agents offer a shell, in the order
// they are preferred: Claude Code's and opencode's Bash, and qwen-code's
// (and gemini-cli's) run_shell_command.
var shellTools = []string{"Bash", "bash", "run_shell_command"}

// Models are the models GET /v1/models lists, newest first.
var Models = []Model{
	{ID: "claude-sonnet-4-5-20250929", DisplayName: "Claude Sonnet 4.5", CreatedAt: "2025-09-29T00:00:00Z"},
	{ID: "claude-opus-4-1-20250805", DisplayName: "Claude Opus 4.1", CreatedAt: "2025-08-05T00:00:00Z"},
	{ID: "claude-sonnet-4-20250514", DisplayName: "Claude Sonnet 4", CreatedAt: "2025-05-22T00:00:00Z"},
	{ID: "claude-3-5-haiku-20241022", DisplayName: "Claude Haiku 3.5", CreatedAt: "2024-10-22T00:00:00Z"},
}

// A Model is one entry of the model list.
type Model struct {
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

// Options configure a Server. The zero value works.
type Options struct {
	// Delay is the pause before each text delta of a "slowly" answer.
	Delay time.Duration
	// Variant, when not empty, is put at the start of every text answer: a
	// model that answers differently from the usual one.
	Variant string
	// TurnDelay is the pause before the answer to every request that is
	// not a structured-output side call: a model slower to start a turn
	// than to name a session, as real ones are, so that a title asked for
	// with the first prompt lands before the turn's answer.
	TurnDelay time.Duration
	// ToolInputDelay is the pause between the start of a tool_use block
	// and its input, as a model writing a long command takes: the client
	// sees the call start well before it is complete.
	ToolInputDelay time.Duration
	// AwaitTitle has the answer to every request that is not a
	// structured-output side call wait, after TurnDelay, until one such
	// call has been answered, or AwaitTitleMax has passed: the session's
	// title then always comes before its first turn.
	AwaitTitle bool
	// Faults are the HTTP statuses, such as 429, 529 or 500, with which
	// the first len(Faults) POST /v1/messages requests that do not ask
	// for structured output are answered, in order, each with the real API's error body (a 429 with a
	// retry-after of RetryAfter), before the script answers.
	Faults []int
	// RetryAfter is the retry-after header of a 429, in whole seconds.
	RetryAfter int
}

// Server is the scripted Messages API, an http.Handler.
type Server struct {
	fakellm.Log[Request] // the requests, and the end of stalled streams
	opts                 Options

	mu     sync.Mutex    // guards faults and titled
	faults int           // faults answered so far
	titled chan struct{} // closed once a structured-output call is answered
}

// AwaitTitleMax is the longest a turn waits for a title with
// Options.AwaitTitle.
const AwaitTitleMax = 10 * time.Second

// titledChan returns the channel closed once a structured-output call is
// answered.
func (s *Server) titledChan() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.titled == nil {
		s.titled = make(chan struct{})
	}
	return s.titled
}

// Request is one request the server got.
type Request struct {
	// Step is "text", "bash", "tool-answer", "slow", "json" for
	// /v1/messages, "fault-N" for one of Options.Faults; "count-tokens",
	// "models", "root" for the side endpoints; "error" for a request it
	// refused.
	fakellm.Request
	// Stream is the request's "stream" field.
	Stream bool
}

// New returns a Server.
func New(opts Options) *Server {
	return &Server{opts: opts}
}

// Title is the session title the model gives a prompt: its first five
// words.
func Title(prompt string) string {
	w := strings.Fields(prompt)
	return strings.Join(w[:min(len(w), 5)], " ")
}

// sessionText returns the text between <session> and </session>, where
// Claude Code puts what a title is to name, or all of prompt without them.
func sessionText(prompt string) string {
	_, rest, ok := strings.Cut(prompt, "<session>")
	if !ok {
		return prompt
	}
	text, _, _ := strings.Cut(rest, "</session>")
	return text
}

// request is the part of a Messages request the script reads.
type request struct {
	Model    string    `json:"model"`
	Messages []message `json:"messages"`
	Tools    []struct {
		Name        string `json:"name"`
		Type        string `json:"type"`
		InputSchema struct {
			Properties map[string]struct {
				Type json.RawMessage `json:"type"` // a name, or a list of them
			} `json:"properties"`
			Required []string `json:"required"`
		} `json:"input_schema"`
	} `json:"tools"`
	Stream       bool `json:"stream"`
	OutputConfig struct {
		Format struct {
			Type   string `json:"type"`
			Schema struct {
				Required []string `json:"required"`
			} `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// block is a content block of a message.
type block struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"` // of a tool_result
}

var (
	runWord     = regexp.MustCompile(`(?i)\brun\b`)
	slowlyWord  = regexp.MustCompile(`(?i)\bslowly\b`)
	lookUpWord  = regexp.MustCompile(`(?i)\blook\b.*\bup\b`)
	allowedDirs = regexp.MustCompile(`(?i)\ballowed directories\b`)
)

// mcpCalls are the MCP tools the fake calls: a prompt that matches word,
// with an MCP tool named mcp__SERVER__TOOL offered, gets a call of it
// with args. lookup is the test MCP server's; list_allowed_directories
// the npm filesystem server's.
var mcpCalls = []struct {
	word *regexp.Regexp
	tool string
	args string
}{
	{lookUpWord, "lookup", LookupArguments},
	{allowedDirs, "list_allowed_directories", `{}`},
}

// LookupArguments are the arguments of the MCP lookup call the fake asks
// for when a prompt says "look ... up" and an MCP tool named lookup
// (mcp__SERVER__lookup) is offered.
const LookupArguments = `{"topic":"answer"}`

// LookupAnswer is the answer after an MCP tool's result.
func LookupAnswer(result string) string { return "The lookup says: " + strings.TrimSpace(result) }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := Request{Request: fakellm.Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Step: "error"}}
	rec.Encoding, _ = httpcoding.Parse(r.Header)
	w.Header().Set("Request-Id", "req_"+randomID(24))
	body, err := decodeBody(r)
	rec.Body = body
	if err != nil {
		s.Keep(rec)
		apiError(w, http.StatusBadRequest, "invalid_request_error", "reading the request body: "+err.Error())
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		rec.Step = "root"
		s.Keep(rec)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			io.WriteString(w, "ok\n")
		}
	case path == "/v1/models" && r.Method == http.MethodGet:
		rec.Step = "models"
		s.Keep(rec)
		writeJSON(w, http.StatusOK, modelList())
	case strings.HasPrefix(path, "/v1/models/") && r.Method == http.MethodGet:
		id := strings.TrimPrefix(path, "/v1/models/")
		for _, m := range Models {
			if m.ID == id {
				rec.Step = "models"
				s.Keep(rec)
				writeJSON(w, http.StatusOK, modelJSON(m))
				return
			}
		}
		s.Keep(rec)
		apiError(w, http.StatusNotFound, "not_found_error", "model: "+id)
	case path == "/v1/messages/count_tokens" && r.Method == http.MethodPost:
		var req request
		if err := json.Unmarshal(body, &req); err != nil {
			s.Keep(rec)
			apiError(w, http.StatusBadRequest, "invalid_request_error", "the request body is not JSON: "+err.Error())
			return
		}
		rec.Step = "count-tokens"
		s.Keep(rec)
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": countTokens(body)})
	case path == "/v1/messages" && r.Method == http.MethodPost:
		s.messages(w, r, rec, body)
	default:
		s.Keep(rec)
		apiError(w, http.StatusNotFound, "not_found_error", "fakeanthropic does not serve "+r.Method+" "+r.URL.Path)
	}
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request, rec Request, body []byte) {
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		s.Keep(rec)
		apiError(w, http.StatusBadRequest, "invalid_request_error", "the request body is not JSON: "+err.Error())
		return
	}
	rec.Stream = req.Stream
	for _, t := range req.Tools {
		name := t.Name
		if name == "" {
			name = t.Type
		}
		rec.Tools = append(rec.Tools, name)
	}
	if len(req.Messages) == 0 {
		s.Keep(rec)
		apiError(w, http.StatusBadRequest, "invalid_request_error", "messages: at least one message is required")
		return
	}
	if req.Model == "" {
		s.Keep(rec)
		apiError(w, http.StatusBadRequest, "invalid_request_error", "model: Field required")
		return
	}
	structured := req.OutputConfig.Format.Type == "json_schema"
	if status, ok := s.fault(structured); ok {
		rec.Step = fmt.Sprintf("fault-%d", status)
		s.Keep(rec)
		faultError(w, status, s.opts.RetryAfter)
		return
	}
	out := &response{stream: req.Stream, w: w, model: req.Model, id: "msg_01" + randomID(22), inTokens: countTokens(body), r: r, inputDelay: s.opts.ToolInputDelay}
	if !structured {
		out.delay = s.opts.TurnDelay
		if s.opts.AwaitTitle {
			out.await = s.titledChan()
		}
	}
	prompt, toolOutput, isTool := lastUser(req.Messages)
	switch {
	case isTool && strings.HasPrefix(lastToolUse(req.Messages), "mcp__"):
		rec.Step = "mcp-answer"
		s.Keep(rec)
		out.text(s.opts.Variant + LookupAnswer(toolOutput))
	case isTool:
		rec.Step = "tool-answer"
		s.Keep(rec)
		out.text(s.opts.Variant + fakellm.ToolAnswer(toolOutput, BashOutput))
	case structured:
		rec.Step = "json"
		s.Keep(rec)
		fields := map[string]any{}
		for _, name := range req.OutputConfig.Format.Schema.Required {
			fields[name] = s.opts.Variant + fakellm.Answer(prompt)
			if name == "title" {
				fields[name] = s.opts.Variant + Title(sessionText(prompt))
			}
		}
		out.text(string(marshal(fields)))
		titled := s.titledChan()
		s.mu.Lock()
		select {
		case <-titled:
		default:
			close(titled)
		}
		s.mu.Unlock()
	case slowlyWord.MatchString(prompt):
		rec.Step = "slow"
		s.Keep(rec)
		out.slow(r, s.Done(), s.opts.Delay)
	case mcpCall(prompt, rec.Tools) != "":
		rec.Step = "mcp"
		s.Keep(rec)
		tool, args := mcpCallArgs(prompt, rec.Tools)
		out.toolUse(s.opts.Variant+ToolPreamble, tool, args)
	case runWord.MatchString(prompt):
		name := ""
		for _, want := range shellTools {
			if slices.Contains(rec.Tools, want) {
				name = want
				break
			}
		}
		if name == "" {
			rec.Step = "text"
			s.Keep(rec)
			out.text(s.opts.Variant + "I have no Bash tool to run it with; the tools offered are: " + strings.Join(rec.Tools, ", "))
			return
		}
		rec.Step = "bash"
		s.Keep(rec)
		args := map[string]any{"command": BashCommand, "description": BashDescription}
		// A required flag of the tool's own (qwen-code's is_background)
		// is off.
		for _, t := range req.Tools {
			if t.Name != name {
				continue
			}
			for _, p := range t.InputSchema.Required {
				if _, ok := args[p]; !ok && string(t.InputSchema.Properties[p].Type) == `"boolean"` {
					args[p] = false
				}
			}
		}
		out.toolUse(s.opts.Variant+ToolPreamble, name, string(marshal(args)))
	default:
		rec.Step = "text"
		s.Keep(rec)
		out.text(s.opts.Variant + fakellm.Answer(prompt))
	}
}

// fault returns the status of the next fault to answer, if any is left.
// A side call asking for structured output gets none: its place among
// the turn's requests varies from run to run.
func (s *Server) fault(structured bool) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if structured || s.faults >= len(s.opts.Faults) {
		return 0, false
	}
	s.faults++
	return s.opts.Faults[s.faults-1], true
}

// faultError answers as the real API does when it limits the client
// (429), is overloaded (529) or unwell (5xx): an error object with the
// request's id, and for a 429 the retry-after header.
func faultError(w http.ResponseWriter, status, retryAfter int) {
	typ, msg := "api_error", "Internal server error"
	switch status {
	case http.StatusTooManyRequests:
		typ, msg = "rate_limit_error", "This request would exceed your organization's rate limit. Please try again later."
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	case 529:
		typ, msg = "overloaded_error", "Overloaded"
	}
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}, "request_id": w.Header().Get("Request-Id")})
}

// lastUser reads the last user message: its prompt text, or, if it holds
// tool_result blocks, their output.
func lastUser(msgs []message) (prompt, toolOutput string, isTool bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(msgs[i].Content, &s) == nil {
			return s, "", false
		}
		var blocks []block
		json.Unmarshal(msgs[i].Content, &blocks)
		var text, all, tool strings.Builder
		for _, b := range blocks {
			switch b.Type {
			case "text":
				all.WriteString(b.Text)
				if !strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>") {
					text.WriteString(b.Text)
				}
			case "tool_result":
				isTool = true
				tool.WriteString(blocksText(b.Content))
			}
		}
		if isTool {
			return "", tool.String(), true
		}
		if text.Len() == 0 {
			return all.String(), "", false
		}
		return text.String(), "", false
	}
	return "", "", false
}

// blocksText returns the text of a tool_result's content: a string or a
// list of blocks.
func blocksText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []block
	json.Unmarshal(raw, &blocks)
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

// countTokens is the script's token count of a request: about four bytes
// a token, as for English text.
func countTokens(body []byte) int { return 1 + len(body)/4 }

func modelJSON(m Model) map[string]any {
	return map[string]any{"type": "model", "id": m.ID, "display_name": m.DisplayName, "created_at": m.CreatedAt}
}

func modelList() map[string]any {
	data := make([]any, len(Models))
	for i, m := range Models {
		data[i] = modelJSON(m)
	}
	return map[string]any{"data": data, "has_more": false, "first_id": Models[0].ID, "last_id": Models[len(Models)-1].ID}
}

// decodeBody reads the request body, decoded from its Content-Encoding.
func decodeBody(r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, err
	}
	_, codings := httpcoding.Parse(r.Header)
	b, err := httpcoding.Decode(raw, codings, maxBody)
	if err != nil {
		return raw, err
	}
	return b, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(marshal(v))
}

func apiError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

// response writes one answer, streamed or as one JSON message.
type response struct {
	stream   bool
	w        http.ResponseWriter
	model    string
	id       string
	inTokens int
	started  bool
	blocks   []any // the content of a JSON message
	// delay is the pause before the answer starts, cut short if the
	// client of r goes away.
	delay time.Duration
	// await, when not nil, is waited for after delay, at most
	// AwaitTitleMax.
	await <-chan struct{}
	r     *http.Request
	// inputDelay is Options.ToolInputDelay.
	inputDelay time.Duration
}

// wait pauses for o.delay and o.await, once, before the answer is
// written.
func (o *response) wait() {
	if o.delay > 0 {
		t := time.NewTimer(o.delay)
		o.delay = 0
		select {
		case <-t.C:
		case <-o.r.Context().Done():
		}
		t.Stop()
	}
	if o.await != nil {
		t := time.NewTimer(AwaitTitleMax)
		select {
		case <-o.await:
		case <-t.C:
		case <-o.r.Context().Done():
		}
		t.Stop()
		o.await = nil
	}
}

// usage is the usage object of message_start and of a JSON message.
func (o *response) usage(out int) map[string]any {
	return map[string]any{
		"input_tokens": o.inTokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
		"cache_creation": map[string]any{"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
		"output_tokens":  out, "service_tier": "standard", "inference_geo": "not_available",
	}
}

func (o *response) message(content []any, stopReason any, out int) map[string]any {
	return map[string]any{
		"model": o.model, "id": o.id, "type": "message", "role": "assistant", "content": content,
		"stop_reason": stopReason, "stop_sequence": nil, "usage": o.usage(out),
	}
}

// event writes one SSE event, its type in both the event line and the
// data, where it comes first as in the real API's.
func (o *response) event(typ string, fields map[string]any) {
	data := `{"type":` + string(marshal(typ))
	if rest := string(marshal(fields)); rest != "{}" {
		data += "," + rest[1:]
	} else {
		data += "}"
	}
	fmt.Fprintf(o.w, "event: %s\ndata: %s\n\n", typ, data)
	o.w.(http.Flusher).Flush()
}

// start writes message_start, for a stream.
func (o *response) start() {
	if !o.stream || o.started {
		return
	}
	o.started = true
	o.w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	o.w.Header().Set("Cache-Control", "no-cache")
	o.w.WriteHeader(http.StatusOK)
	o.event("message_start", map[string]any{"message": o.message([]any{}, nil, 1)})
}

// textBlock streams (or keeps) a text block of the given deltas at index i.
func (o *response) textBlock(i int, deltas []string) {
	if !o.stream {
		o.blocks = append(o.blocks, map[string]any{"type": "text", "text": strings.Join(deltas, "")})
		return
	}
	o.event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
	if i == 0 {
		o.event("ping", map[string]any{})
	}
	for _, d := range deltas {
		o.event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": d}})
	}
	o.event("content_block_stop", map[string]any{"index": i})
}

// finish ends the message with stopReason after out output tokens.
func (o *response) finish(stopReason string, out int) {
	if !o.stream {
		writeJSON(o.w, http.StatusOK, o.message(o.blocks, stopReason, out))
		return
	}
	o.event("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": stopReason, "stop_sequence": nil},
		"usage": map[string]any{"input_tokens": o.inTokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": out},
	})
	o.event("message_stop", map[string]any{})
}

// words splits an answer into deltas of a few words.
func words(answer string) []string {
	w := strings.SplitAfter(answer, " ")
	var out []string
	for i := 0; i < len(w); i += 3 {
		out = append(out, strings.Join(w[i:min(i+3, len(w))], ""))
	}
	return out
}

// text answers with a text block.
func (o *response) text(answer string) {
	o.wait()
	o.start()
	d := words(answer)
	o.textBlock(0, d)
	o.finish("end_turn", 1+len(d)*3)
}

// toolUse answers with a short text block and a call of tool name with
// input, its JSON streamed in fragments as the real API does: an empty
// one first, then pieces of a few bytes.
func (o *response) toolUse(preamble, name, input string) {
	o.wait()
	o.start()
	o.textBlock(0, words(preamble))
	id := "toolu_01" + randomID(22)
	if !o.stream {
		o.blocks = append(o.blocks, map[string]any{"type": "tool_use", "id": id, "name": name, "input": json.RawMessage(input)})
		o.finish("tool_use", 60)
		return
	}
	o.event("content_block_start", map[string]any{"index": 1,
		"content_block": map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}, "caller": map[string]any{"type": "direct"}}})
	if o.inputDelay > 0 {
		t := time.NewTimer(o.inputDelay)
		select {
		case <-t.C:
		case <-o.r.Context().Done():
		}
		t.Stop()
	}
	frags := []string{""}
	for rest := input; rest != ""; {
		n := min(len(rest), 12)
		frags = append(frags, rest[:n])
		rest = rest[n:]
	}
	for _, f := range frags {
		o.event("content_block_delta", map[string]any{"index": 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": f}})
	}
	o.event("content_block_stop", map[string]any{"index": 1})
	o.finish("tool_use", 60)
}

// slow streams SlowDeltas words of SlowAnswer, each after delay, and then
// keeps the response open, as a model still thinking does, until the
// client goes away or done is closed. A request that is not streamed
// gets no answer at all until then.
func (o *response) slow(r *http.Request, done <-chan struct{}, delay time.Duration) {
	o.wait()
	o.start()
	if o.stream {
		o.event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		o.event("ping", map[string]any{})
		w := strings.SplitAfter(fakellm.SlowAnswer, " ")
		for i := range SlowDeltas {
			if delay > 0 {
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-r.Context().Done():
					t.Stop()
					panic(http.ErrAbortHandler)
				case <-done:
					t.Stop()
					panic(http.ErrAbortHandler)
				}
			}
			o.event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": w[i%len(w)]}})
		}
	}
	select {
	case <-r.Context().Done():
	case <-done:
	}
	// The stream never ended: a clean return would end the chunked body
	// as if the response were complete.
	panic(http.ErrAbortHandler)
}

// marshal encodes v as the API does: without escaping <, > and &.
func marshal(v any) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}

const idAlphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// randomID returns n random characters of the base58 alphabet of the
// API's ids.
func randomID(n int) string {
	b := make([]byte, n)
	max := big.NewInt(int64(len(idAlphabet)))
	for i := range b {
		k, _ := rand.Int(rand.Reader, max)
		b[i] = idAlphabet[k.Int64()]
	}
	return string(b)
}

// Listener is a running fake: a Server at an Endpoint.
type Listener struct {
	*Server
	fakellm.Endpoint
}

// Start starts a plain HTTP fake on a loopback port.
func Start(opts Options) *Listener {
	s := New(opts)
	return &Listener{Server: s, Endpoint: fakellm.Serve(s, "")}
}

// StartTLS starts an HTTPS fake on a loopback port (see fakellm.ServeTLS),
// writing its CA file in dir.
func StartTLS(opts Options, dir string) (*Listener, error) {
	s := New(opts)
	ep, err := fakellm.ServeTLS(s, "", dir, "fakeanthropic")
	if err != nil {
		return nil, err
	}
	return &Listener{Server: s, Endpoint: ep}, nil
}

// StartTLSAt starts an HTTPS fake on a loopback address other than
// 127.0.0.1, such as 127.0.0.2 (see fakellm.ServeTLSAt), writing its
// certificate into dir.
func StartTLSAt(opts Options, ip, dir string) (*Listener, error) {
	s := New(opts)
	ep, err := fakellm.ServeTLSAt(s, ip, "", dir, "fakeanthropic")
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

// mcpCall returns the MCP tool the fake calls for prompt, of those
// offered, "" for none.
func mcpCall(prompt string, tools []string) string {
	tool, _ := mcpCallArgs(prompt, tools)
	return tool
}

// mcpCallArgs returns the MCP tool the fake calls for prompt and its
// arguments, "" for none.
func mcpCallArgs(prompt string, tools []string) (string, string) {
	for _, c := range mcpCalls {
		if !c.word.MatchString(prompt) {
			continue
		}
		for _, t := range tools {
			if strings.HasPrefix(t, "mcp__") && strings.HasSuffix(t, "__"+c.tool) {
				return t, c.args
			}
		}
	}
	return "", ""
}

// lastToolUse returns the name of the tool the last assistant message
// called, "" if it called none.
func lastToolUse(msgs []message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		var blocks []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		json.Unmarshal(msgs[i].Content, &blocks)
		for _, b := range blocks {
			if b.Type == "tool_use" {
				return b.Name
			}
		}
		return ""
	}
	return ""
}

// Package demo is the session `acptap demo` records and replays: a small ACP agent that fixes a typo with an LLM's help, and the editor that asks it to.
//
// Both are built for the demo and nothing else, so that the acptap binary
// carries no test double: the agent speaks just enough ACP (initialize,
// session/new, session/prompt, session/cancel; session/request_permission
// and fs/read_text_file to the editor) and the OpenAI Chat Completions
// streaming API, and the editor drives one session of text prompts.
// internal/demollm is the LLM they talk to.
package demo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acptap/acptap/internal/chatapi"

	"github.com/acptap/acptap/internal/acp"
)

// maxLine bounds a line the agent reads: the demo's are short.
const maxLine = 16 << 20

// Agent runs the demo agent on stdin and stdout with the command-line
// arguments args, and returns its exit code: 0 when stdin ends, 2 for bad
// arguments. Its LLM is at $OPENAI_BASE_URL (getenv). Flags:
//
//	--title-call     race a title-generation call against the first turn
//	--no-permission  read files without asking the editor's permission
func Agent(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("demo-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	titleCall := fs.Bool("title-call", false, "race a title-generation LLM call against the first turn")
	noPermission := fs.Bool("no-permission", false, "read files without session/request_permission")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demo-agent: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	a := &agent{
		out:          stdout,
		log:          stderr,
		llm:          strings.TrimRight(getenv("OPENAI_BASE_URL"), "/") + "/chat/completions",
		key:          getenv("OPENAI_API_KEY"),
		titleCall:    *titleCall,
		noPermission: *noPermission,
		sessions:     map[string]*session{},
		waiting:      map[int]chan rpcResponse{},
	}
	if getenv("OPENAI_BASE_URL") == "" {
		fmt.Fprintln(stderr, "demo-agent: OPENAI_BASE_URL is not set; it must be the URL of an OpenAI-compatible API")
		return 2
	}
	a.serve(stdin)
	return 0
}

// agent is the demo agent's state.
type agent struct {
	llm, key     string
	titleCall    bool
	noPermission bool
	log          io.Writer

	outMu sync.Mutex // guards out: one line at a time
	out   io.Writer

	mu       sync.Mutex               // guards the fields below
	sessions map[string]*session      // by sessionId
	waiting  map[int]chan rpcResponse // the agent's requests to the editor, by id
	nextID   int                      // the id of the agent's next request
	titled   bool                     // the title call was made
	turns    sync.WaitGroup           // turns in progress, waited for at the end of input
}

// session is one ACP session.
type session struct {
	id      string
	cwd     string
	history []chatapi.Message
	cancel  context.CancelFunc // of the turn in progress; nil between turns
}

// rpcResponse is the editor's answer to a request of the agent's.
type rpcResponse struct {
	result json.RawMessage
	err    *acp.ResponseError
}

// serve reads the editor's messages until stdin ends, then waits for the
// turns in progress.
func (a *agent) serve(stdin io.Reader) {
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var m acp.Envelope
		if err := json.Unmarshal(line, &m); err != nil {
			a.fail(json.RawMessage("null"), acp.CodeParseError, "parse error: "+err.Error())
			continue
		}
		switch {
		case m.Method == "" && m.ID != nil:
			a.answered(m)
		case m.Method == "session/cancel":
			a.cancelTurn(m.Params)
		case m.ID == nil:
			// A notification the demo agent does not know: ignored, as
			// JSON-RPC allows.
		default:
			a.request(m)
		}
	}
	a.mu.Lock()
	for _, s := range a.sessions {
		if s.cancel != nil {
			s.cancel()
		}
	}
	a.mu.Unlock()
	a.turns.Wait()
}

// request answers an editor request; a prompt in a goroutine of its own,
// so that the editor's answers to the agent's requests keep being read.
func (a *agent) request(m acp.Envelope) {
	switch m.Method {
	case "initialize":
		a.reply(m.ID, map[string]any{
			"protocolVersion":   1,
			"agentCapabilities": map[string]any{"loadSession": false, "promptCapabilities": map[string]any{"image": false, "audio": false, "embeddedContext": false}},
			"agentInfo":         map[string]any{"name": "acptap-demo-agent", "version": "1"},
			"authMethods":       []any{},
		})
	case "session/new":
		var p struct {
			Cwd string `json:"cwd"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil || !filepath.IsAbs(p.Cwd) {
			a.fail(m.ID, acp.CodeInvalidParams, "session/new needs an absolute cwd")
			return
		}
		s := &session{id: "sess_" + randomHex(12), cwd: p.Cwd}
		a.mu.Lock()
		a.sessions[s.id] = s
		a.mu.Unlock()
		a.reply(m.ID, map[string]any{"sessionId": s.id})
	case "session/prompt":
		var p struct {
			SessionID string `json:"sessionId"`
			Prompt    []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"prompt"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			a.fail(m.ID, acp.CodeInvalidParams, "invalid session/prompt params: "+err.Error())
			return
		}
		a.mu.Lock()
		s := a.sessions[p.SessionID]
		busy := s != nil && s.cancel != nil
		var ctx context.Context
		if s != nil && !busy {
			ctx, s.cancel = context.WithCancel(context.Background())
		}
		a.mu.Unlock()
		switch {
		case s == nil:
			a.fail(m.ID, acp.CodeInvalidParams, fmt.Sprintf("no session %q", p.SessionID))
			return
		case busy:
			a.fail(m.ID, acp.CodeInvalidRequest, "a prompt is already in progress in this session")
			return
		}
		var text []string
		for _, b := range p.Prompt {
			if b.Type == "text" {
				text = append(text, b.Text)
			}
		}
		a.turns.Go(func() {
			stop := a.turn(ctx, s, strings.Join(text, "\n"))
			a.mu.Lock()
			s.cancel()
			s.cancel = nil
			a.mu.Unlock()
			a.reply(m.ID, map[string]any{"stopReason": stop})
		})
	default:
		a.fail(m.ID, acp.CodeMethodNotFound, "method not found: "+m.Method)
	}
}

// cancelTurn cancels the turn in progress of the session params name.
func (a *agent) cancelTurn(params json.RawMessage) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(params, &p)
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[p.SessionID]; s != nil && s.cancel != nil {
		s.cancel()
	}
}

// turn runs one prompt turn: LLM calls until the model answers without a
// tool call. It returns the stop reason.
func (a *agent) turn(ctx context.Context, s *session, prompt string) string {
	var title sync.WaitGroup
	defer title.Wait() // the title call belongs to this turn
	if a.titleCall && a.firstTurn() {
		title.Go(func() { a.generateTitle(ctx, prompt) })
	}
	s.history = append(s.history, chatapi.Message{Role: "user", Content: prompt})
	for range maxToolRounds {
		comp, err := a.complete(ctx, chatapi.Request{
			Model:    "demo-model",
			Stream:   true,
			Messages: append([]chatapi.Message{systemMessage(s)}, s.history...),
			Tools:    []any{readFileTool},
		}, func(text string) {
			a.update(s, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}})
		})
		if ctx.Err() != nil {
			return "cancelled"
		}
		if err != nil {
			a.update(s, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "error: " + err.Error()}})
			return "end_turn"
		}
		s.history = append(s.history, chatapi.Message{Role: "assistant", Content: comp.text, ToolCalls: comp.toolCalls})
		if len(comp.toolCalls) == 0 {
			return "end_turn"
		}
		for _, tc := range comp.toolCalls {
			result := a.runTool(ctx, s, tc)
			s.history = append(s.history, chatapi.Message{Role: "tool", ToolCallID: tc.ID, Content: result})
		}
		if ctx.Err() != nil {
			return "cancelled"
		}
	}
	a.update(s, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "error: the model keeps calling tools; giving up"}})
	return "end_turn"
}

// maxToolRounds bounds the LLM calls of one turn.
const maxToolRounds = 8

// systemMessage is the system prompt: like a real agent's, it carries the
// working directory and the date, which a replay's normalization handles.
func systemMessage(s *session) chatapi.Message {
	return chatapi.Message{Role: "system", Content: fmt.Sprintf(
		"You are acptap's demo agent, a coding assistant. The working directory is %s. Today's date is %s. Use the read_file tool to read files.",
		s.cwd, time.Now().Format(time.DateOnly))}
}

// runTool runs the model's tool call through the editor, as an ACP tool
// call, and returns what the model is to read of it.
func (a *agent) runTool(ctx context.Context, s *session, tc chatapi.ToolCall) string {
	var args struct {
		Path string `json:"path"`
	}
	if tc.Function.Name != "read_file" {
		return fmt.Sprintf("error: unknown tool %q", tc.Function.Name)
	}
	if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil || args.Path == "" {
		return fmt.Sprintf(`error: read_file wants {"path": "..."}, not %s`, tc.Function.Arguments)
	}
	title := "Read " + args.Path
	a.update(s, map[string]any{"sessionUpdate": "tool_call", "toolCallId": tc.ID, "title": title, "kind": "read", "status": "pending"})
	done := func(status, result string) string {
		a.update(s, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": tc.ID, "status": status})
		return result
	}
	if !a.noPermission {
		res, err := a.call(ctx, "session/request_permission", map[string]any{
			"sessionId": s.id,
			"toolCall":  map[string]any{"toolCallId": tc.ID, "title": title, "kind": "read"},
			"options": []any{
				map[string]any{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
				map[string]any{"optionId": "reject", "name": "Reject", "kind": "reject_once"},
			},
		})
		if err != nil {
			return done("failed", "error: "+err.Error())
		}
		var out struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		}
		json.Unmarshal(res, &out)
		if out.Outcome.Outcome != "selected" || out.Outcome.OptionID != "allow" {
			return done("failed", "error: the user did not allow reading "+args.Path)
		}
	}
	path := args.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(s.cwd, path)
	}
	res, err := a.call(ctx, "fs/read_text_file", map[string]any{"sessionId": s.id, "path": path})
	if err != nil {
		return done("failed", "error: "+err.Error())
	}
	var file struct {
		Content string `json:"content"`
	}
	json.Unmarshal(res, &file)
	return done("completed", file.Content)
}

// firstTurn reports whether no turn has started before, once.
func (a *agent) firstTurn() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	first := !a.titled
	a.titled = true
	return first
}

// generateTitle is the title call some agents race against the first
// turn's main call; its answer only goes to stderr.
func (a *agent) generateTitle(ctx context.Context, prompt string) {
	comp, err := a.complete(ctx, chatapi.Request{
		Model:  "title-model",
		Stream: true,
		Messages: []chatapi.Message{
			{Role: "system", Content: "Write a title of at most six words for the conversation that starts with the user's message. Answer with the title only."},
			{Role: "user", Content: prompt},
		},
	}, nil)
	if err != nil {
		fmt.Fprintf(a.log, "demo-agent: title call failed: %v\n", err)
		return
	}
	fmt.Fprintf(a.log, "demo-agent: title: %q\n", comp.text)
}

// update sends a session/update notification.
func (a *agent) update(s *session, update map[string]any) {
	a.send(acp.EncodeNotification("session/update", map[string]any{"sessionId": s.id, "update": update}))
}

// call sends a request to the editor and waits for its answer.
func (a *agent) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	a.mu.Lock()
	id := a.nextID
	a.nextID++
	ch := make(chan rpcResponse, 1)
	a.waiting[id] = ch
	a.mu.Unlock()
	a.send(acp.EncodeRequest(json.RawMessage(strconv.Itoa(id)), method, params))
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%s: %w", method, r.err)
		}
		return r.result, nil
	case <-ctx.Done():
		a.mu.Lock()
		delete(a.waiting, id)
		a.mu.Unlock()
		return nil, ctx.Err()
	}
}

// answered hands the editor's answer to the request that waits for it.
func (a *agent) answered(m acp.Envelope) {
	var id int
	if json.Unmarshal(m.ID, &id) != nil {
		return
	}
	a.mu.Lock()
	ch := a.waiting[id]
	delete(a.waiting, id)
	a.mu.Unlock()
	if ch != nil {
		ch <- rpcResponse{result: m.Result, err: m.Error}
	}
}

func (a *agent) reply(id json.RawMessage, result any) {
	a.send(acp.EncodeResult(id, result))
}

func (a *agent) fail(id json.RawMessage, code int, message string) {
	a.send(acp.EncodeError(id, &acp.ResponseError{Code: code, Message: message}))
}

// send writes one message, encoded as one line (acp.Encode*).
func (a *agent) send(line []byte, err error) {
	if err != nil {
		panic(err) // the agent's own messages, of strings and maps, always encode
	}
	a.outMu.Lock()
	defer a.outMu.Unlock()
	a.out.Write(line)
}

// readFileTool is the one tool the model is offered.
var readFileTool = map[string]any{
	"type": "function",
	"function": map[string]any{
		"name":        "read_file",
		"description": "Read a text file of the workspace.",
		"parameters": map[string]any{
			"type":       "object",
			"properties": map[string]any{"path": map[string]any{"type": "string", "description": "Path of the file, relative to the working directory."}},
			"required":   []string{"path"},
		},
	},
}

// completion is a streamed answer, reassembled.
type completion struct {
	text      string
	toolCalls []chatapi.ToolCall
}

// complete makes a streaming Chat Completions call, handing each text
// delta to onText (if not nil) as it arrives.
func (a *agent) complete(ctx context.Context, req chatapi.Request, onText func(string)) (*completion, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, a.llm, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if a.key != "" {
		hreq.Header.Set("Authorization", "Bearer "+a.key)
	}
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return nil, fmt.Errorf("the LLM answered %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	comp := &completion{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return comp, nil
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return nil, fmt.Errorf("the LLM's stream: %w", err)
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != "" {
				comp.text += c.Delta.Content
				if onText != nil {
					onText(c.Delta.Content)
				}
			}
			for _, tc := range c.Delta.ToolCalls {
				for len(comp.toolCalls) <= tc.Index {
					comp.toolCalls = append(comp.toolCalls, chatapi.ToolCall{Type: "function"})
				}
				t := &comp.toolCalls[tc.Index]
				if tc.ID != "" {
					t.ID = tc.ID
				}
				t.Function.Name += tc.Function.Name
				t.Function.Arguments += tc.Function.Arguments
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("the LLM's stream: %w", err)
	}
	return nil, errors.New("the LLM's stream ended before [DONE]")
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/acptap/acptap/internal/acp"
)

// Options configure Play. Cwd is required; the zero value of the rest
// works.
type Options struct {
	// Cwd is the sessions' working directory, absolute: the copy of the
	// scenario's workspace the agent works in. The agent's fs and
	// terminal requests are served inside it.
	Cwd string
	// Version is the editor's version in initialize's clientInfo. If
	// empty, "dev".
	Version string
}

// Result is what happened in a Play.
type Result struct {
	// Sessions are the scenario's sessions, in its order.
	Sessions []SessionResult
}

// Turns counts the turns that ended, in every session.
func (r *Result) Turns() int {
	n := 0
	for _, s := range r.Sessions {
		for _, t := range s.Turns {
			if t.StopReason != "" {
				n++
			}
		}
	}
	return n
}

// SessionResult is what happened in one session.
type SessionResult struct {
	// ID is the sessionId the agent gave it.
	ID string
	// Turns are its prompt turns, in order, as far as they went.
	Turns []TurnResult
	// Permissions are the answers given to its permission requests, in
	// order: an option kind, or "cancelled".
	Permissions []string
}

// TurnResult is one prompt turn.
type TurnResult struct {
	// StopReason is the session/prompt response's; "" if the turn did not
	// end.
	StopReason string
	// Text is the agent's message chunks' text, concatenated.
	Text string
	// Chunks counts the agent_message_chunk notifications.
	Chunks int
}

// Play plays sc against an agent whose stdin is stdin and whose stdout is
// stdout: initialize, each session opened with session/new (its mode set,
// its MCP servers passed), then every session's prompts at once, each
// session's in order, answering the agent's permission requests from the
// scenario and its fs and terminal requests inside opts.Cwd. It closes
// stdin when the scenario is over, the agent's cue to exit, and returns;
// the agent's stdout is read on until it ends (the caller ends it once the
// agent is gone), answering nothing more.
//
// The Result says how far each session went, whatever the error. An error
// wraps ErrAgent when the agent did not play its part (an error answer, a
// permission option the scenario answers with missing, stdout closed
// early) and is the context's cause when sc.Timeout or ctx ended it.
func Play(ctx context.Context, sc *Scenario, stdin io.WriteCloser, stdout io.Reader, opts Options) (*Result, error) {
	if !filepath.IsAbs(opts.Cwd) {
		return nil, fmt.Errorf("scenario: the sessions' cwd %q is not absolute", opts.Cwd)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	ctx, cancel := context.WithTimeoutCause(ctx, sc.Timeout, fmt.Errorf("the scenario's timeout of %v ran out", sc.Timeout))
	defer cancel()
	p := &player{sc: sc, opts: opts, c: newConn(stdin), res: &Result{}, byID: map[string]*sessionState{}}
	p.c.onRequest = p.serve
	p.c.onNotification = p.notification
	go p.c.read(stdout)
	err := p.play(ctx)
	stdin.Close()
	p.terms.releaseAll()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sessions {
		p.res.Sessions = append(p.res.Sessions, s.result)
		if err == nil && s.failure != nil {
			err = s.failure
		}
	}
	return p.res, err
}

// player is the state of one Play.
type player struct {
	sc   *Scenario
	opts Options
	c    *conn
	res  *Result
	// embedded is the agent's promptCapabilities.embeddedContext.
	embedded bool
	terms    terminals

	mu sync.Mutex // guards sessions, byID and every sessionState
	// sessions are the scenario's sessions as they are opened.
	sessions []*sessionState
	byID     map[string]*sessionState
}

// sessionState is one session's progress; player.mu guards it.
type sessionState struct {
	index  int
	spec   Session
	result SessionResult
	// turn is the running turn's index in result.Turns, -1 between turns.
	turn int
	// cancelled is set once session/cancel was sent in the running turn:
	// permission requests are then answered cancelled, as ACP asks.
	cancelled bool
	// answered counts the permission answers taken from spec.Permissions.
	answered int
	// failure is the first failure that did not stop the session (a
	// permission answer the agent did not offer).
	failure error
}

func (p *player) play(ctx context.Context) error {
	var init struct {
		AgentCapabilities struct {
			PromptCapabilities struct {
				EmbeddedContext bool `json:"embeddedContext"`
			} `json:"promptCapabilities"`
		} `json:"agentCapabilities"`
	}
	err := p.c.call(ctx, "initialize", map[string]any{
		"protocolVersion": 1,
		"clientCapabilities": map[string]any{
			"fs":       map[string]any{"readTextFile": true, "writeTextFile": true},
			"terminal": true,
		},
		"clientInfo": map[string]any{"name": "acptap", "title": "acptap scenario", "version": p.opts.Version},
	}, &init)
	if err != nil {
		return err
	}
	p.embedded = init.AgentCapabilities.PromptCapabilities.EmbeddedContext
	for i, spec := range p.sc.Sessions {
		if err := p.open(ctx, i, spec); err != nil {
			return p.at(i, -1, err)
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	errs := make([]error, len(p.sessions))
	for i, s := range p.sessions {
		wg.Go(func() {
			if errs[i] = p.converse(ctx, s); errs[i] != nil {
				cancel(errs[i]) // one session failing ends the scenario
			}
		})
	}
	wg.Wait()
	// The first failure, not the others' giving up because of it.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return errors.Join(errs...)
}

// open opens session i and sets its mode.
func (p *player) open(ctx context.Context, i int, spec Session) error {
	servers := spec.MCPServers
	if servers == nil {
		servers = json.RawMessage("[]")
	}
	var opened struct {
		SessionID string `json:"sessionId"`
		Modes     *struct {
			AvailableModes []struct {
				ID string `json:"id"`
			} `json:"availableModes"`
		} `json:"modes"`
	}
	if err := p.c.call(ctx, "session/new", map[string]any{"cwd": p.opts.Cwd, "mcpServers": servers}, &opened); err != nil {
		return err
	}
	if opened.SessionID == "" {
		return fmt.Errorf("%w: its session/new response has no sessionId", ErrAgent)
	}
	s := &sessionState{index: i, spec: spec, turn: -1, result: SessionResult{ID: opened.SessionID}}
	p.mu.Lock()
	p.sessions = append(p.sessions, s)
	p.byID[opened.SessionID] = s
	p.mu.Unlock()
	if spec.Mode == "" {
		return nil
	}
	var offered []string
	if opened.Modes != nil {
		for _, m := range opened.Modes.AvailableModes {
			offered = append(offered, m.ID)
		}
	}
	if !slices.Contains(offered, spec.Mode) {
		if len(offered) == 0 {
			return fmt.Errorf("%w: the scenario sets mode %q, but the agent offers no modes", ErrAgent, spec.Mode)
		}
		return fmt.Errorf("%w: the scenario sets mode %q, but the agent offers %s", ErrAgent, spec.Mode, strings.Join(offered, ", "))
	}
	return p.c.call(ctx, "session/set_mode", map[string]any{"sessionId": opened.SessionID, "modeId": spec.Mode}, nil)
}

// converse runs a session's prompts one after the other.
func (p *player) converse(ctx context.Context, s *sessionState) error {
	for k, prompt := range s.spec.Prompts {
		blocks, err := p.blocks(prompt)
		if err != nil {
			return p.at(s.index, k, err)
		}
		p.mu.Lock()
		s.result.Turns = append(s.result.Turns, TurnResult{})
		s.turn, s.cancelled = len(s.result.Turns)-1, false
		p.mu.Unlock()
		var answer struct {
			StopReason string `json:"stopReason"`
		}
		err = p.c.call(ctx, "session/prompt", map[string]any{"sessionId": s.result.ID, "prompt": blocks}, &answer)
		p.mu.Lock()
		s.result.Turns[s.turn].StopReason = answer.StopReason
		s.turn = -1
		p.mu.Unlock()
		if err != nil {
			return p.at(s.index, k, err)
		}
		if answer.StopReason == "" {
			return p.at(s.index, k, fmt.Errorf("%w: its session/prompt response has no stopReason", ErrAgent))
		}
	}
	return nil
}

// at says where in the scenario err happened: session i (when there are
// several), prompt k (unless negative).
func (p *player) at(i, k int, err error) error {
	var where []string
	if len(p.sc.Sessions) > 1 {
		where = append(where, fmt.Sprintf("session %d", i+1))
	}
	if k >= 0 {
		where = append(where, fmt.Sprintf("prompt %d", k+1))
	}
	if len(where) == 0 {
		return err
	}
	return fmt.Errorf("%s: %w", strings.Join(where, ", "), err)
}

// The content blocks of a prompt, their members in the order ACP's
// schema gives them, as editors write them.
type (
	textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	linkBlock struct {
		Type     string `json:"type"`
		URI      string `json:"uri"`
		Name     string `json:"name"`
		MimeType string `json:"mimeType,omitempty"`
		Size     int64  `json:"size"`
	}
	resourceBlock struct {
		Type     string       `json:"type"`
		Resource textResource `json:"resource"`
	}
	textResource struct {
		URI      string `json:"uri"`
		MimeType string `json:"mimeType,omitempty"`
		Text     string `json:"text"`
	}
)

// blocks are a prompt's content blocks: its text, then its attached files
// as resource links, then its embedded ones.
func (p *player) blocks(prompt Prompt) ([]any, error) {
	var blocks []any
	if prompt.Text != "" {
		blocks = append(blocks, textBlock{"text", prompt.Text})
	}
	for _, name := range prompt.Attach {
		path := filepath.Join(p.opts.Cwd, filepath.FromSlash(name))
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("attaching %s: %w", name, err)
		}
		blocks = append(blocks, linkBlock{Type: "resource_link", URI: fileURI(path), Name: filepath.Base(path), MimeType: mimeType(path), Size: fi.Size()})
	}
	if len(prompt.Embed) > 0 && !p.embedded {
		return nil, fmt.Errorf("%w: the prompt embeds %s, but the agent does not take embedded context (promptCapabilities.embeddedContext); attach it instead", ErrAgent, prompt.Embed[0])
	}
	for _, name := range prompt.Embed {
		path := filepath.Join(p.opts.Cwd, filepath.FromSlash(name))
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("embedding %s: %w", name, err)
		}
		if !utf8.Valid(data) {
			return nil, fmt.Errorf("embedding %s: not text; attach it instead", name)
		}
		blocks = append(blocks, resourceBlock{"resource", textResource{URI: fileURI(path), MimeType: mimeType(path), Text: string(data)}})
	}
	return blocks, nil
}

// mimeType is a file's media type by its extension, without parameters
// (the system's tables differ in those), or "".
func mimeType(path string) string {
	mt, _, _ := strings.Cut(mime.TypeByExtension(filepath.Ext(path)), ";")
	return mt
}

// fileURI is the file: URI of an absolute path.
func fileURI(path string) string {
	return "file://" + filepath.ToSlash(path)
}

// notification takes the agent's session/update notifications: a turn's
// text, and its cancel once it has streamed enough.
func (p *player) notification(method string, params json.RawMessage) {
	if method != "session/update" {
		return
	}
	var n struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			SessionUpdate string `json:"sessionUpdate"`
			Content       struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	if json.Unmarshal(params, &n) != nil || n.Update.SessionUpdate != "agent_message_chunk" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.byID[n.SessionID]
	if s == nil || s.turn < 0 {
		return
	}
	t := &s.result.Turns[s.turn]
	t.Chunks++
	if n.Update.Content.Type == "text" {
		t.Text += n.Update.Content.Text
	}
	after := s.spec.Prompts[s.turn].CancelAfterChunks
	if after > 0 && t.Chunks == after && !s.cancelled {
		s.cancelled = true
		// On the reading goroutine, so that the cancel follows the
		// chunk that caused it before anything else the agent sent.
		p.c.notify("session/cancel", map[string]any{"sessionId": n.SessionID})
	}
}

// serve answers the agent's requests.
func (p *player) serve(method string, params json.RawMessage) (any, *acp.ResponseError) {
	switch {
	case method == "session/request_permission":
		return p.permission(params)
	case method == "fs/read_text_file":
		return p.readTextFile(params)
	case method == "fs/write_text_file":
		return p.writeTextFile(params)
	case strings.HasPrefix(method, "terminal/"):
		return p.terms.serve(method, params, p.opts.Cwd)
	}
	return nil, &acp.ResponseError{Code: acp.CodeMethodNotFound, Message: "method not found: " + method}
}

// permission answers a permission request with the session's next
// answer: the option of that kind, or cancelled.
func (p *player) permission(params json.RawMessage) (any, *acp.ResponseError) {
	var req struct {
		SessionID string `json:"sessionId"`
		Options   []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, &acp.ResponseError{Code: acp.CodeInvalidParams, Message: "invalid params: " + err.Error()}
	}
	cancelled := map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.byID[req.SessionID]
	if s == nil {
		return nil, &acp.ResponseError{Code: acp.CodeInvalidParams, Message: fmt.Sprintf("invalid params: unknown session %q", req.SessionID)}
	}
	if s.cancelled || s.answered >= len(s.spec.Permissions) {
		s.result.Permissions = append(s.result.Permissions, "cancelled")
		return cancelled, nil
	}
	kind := s.spec.Permissions[s.answered]
	s.answered++
	var offered []string
	for _, o := range req.Options {
		if o.Kind == kind {
			s.result.Permissions = append(s.result.Permissions, kind)
			return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": o.OptionID}}, nil
		}
		offered = append(offered, o.Kind)
	}
	s.result.Permissions = append(s.result.Permissions, "cancelled")
	if s.failure == nil {
		turn := -1
		if s.turn >= 0 {
			turn = s.turn
		}
		s.failure = p.at(s.index, turn, fmt.Errorf("%w: permission request %d offers %s, not %s, the scenario's answer (permissions[%d]); it was cancelled",
			ErrAgent, s.answered, strings.Join(offered, ", "), kind, s.answered-1))
	}
	return cancelled, nil
}

// inside resolves a path of the agent's fs request, which must be
// absolute and inside the sessions' cwd.
func (p *player) inside(path string) (string, *acp.ResponseError) {
	if !filepath.IsAbs(path) {
		return "", &acp.ResponseError{Code: acp.CodeInvalidParams, Message: fmt.Sprintf("invalid params: path %q is not absolute", path)}
	}
	rel, err := filepath.Rel(p.opts.Cwd, filepath.Clean(path))
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return "", &acp.ResponseError{Code: acp.CodeInvalidParams, Message: fmt.Sprintf("invalid params: %s is outside the session's workspace %s", path, p.opts.Cwd)}
	}
	return filepath.Join(p.opts.Cwd, rel), nil
}

func (p *player) readTextFile(params json.RawMessage) (any, *acp.ResponseError) {
	var req struct {
		Path  string `json:"path"`
		Line  int    `json:"line"`
		Limit int    `json:"limit"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, &acp.ResponseError{Code: acp.CodeInvalidParams, Message: "invalid params: " + err.Error()}
	}
	path, rerr := p.inside(req.Path)
	if rerr != nil {
		return nil, rerr
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fileError(err)
	}
	text := string(data)
	if req.Line > 1 || req.Limit > 0 {
		lines := strings.SplitAfter(text, "\n")
		from := min(max(req.Line, 1)-1, len(lines))
		to := len(lines)
		if req.Limit > 0 {
			to = min(from+req.Limit, len(lines))
		}
		text = strings.Join(lines[from:to], "")
	}
	return map[string]any{"content": text}, nil
}

func (p *player) writeTextFile(params json.RawMessage) (any, *acp.ResponseError) {
	var req struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, &acp.ResponseError{Code: acp.CodeInvalidParams, Message: "invalid params: " + err.Error()}
	}
	path, rerr := p.inside(req.Path)
	if rerr != nil {
		return nil, rerr
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fileError(err)
	}
	if err := os.WriteFile(path, []byte(req.Content), 0o644); err != nil {
		return nil, fileError(err)
	}
	return map[string]any{}, nil
}

// fileError is the error answer of a failed fs request.
func fileError(err error) *acp.ResponseError {
	if errors.Is(err, os.ErrNotExist) {
		return &acp.ResponseError{Code: acp.CodeResourceNotFound, Message: "resource not found: " + err.Error()}
	}
	return &acp.ResponseError{Code: acp.CodeInternalError, Message: err.Error()}
}

package testagent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// ACP stop reasons of a prompt turn.
const (
	stopEndTurn   = "end_turn"
	stopCancelled = "cancelled"
)

var (
	// errCancelled ends a turn with stopReason "cancelled": the editor
	// cancelled it, or can no longer answer (stdin closed).
	errCancelled = errors.New("turn cancelled")
	// errDenied is a tool call the editor did not allow.
	errDenied = errors.New("permission denied")
)

// turn runs one prompt turn and returns its stop reason.
func (a *agent) turn(ctx context.Context, s *session, prompt string) string {
	if !a.beforeTurn(ctx, s) {
		if ctx.Err() != nil {
			return stopCancelled
		}
		return stopEndTurn
	}
	if a.echo != "" {
		a.messageChunk(s, "environment: "+a.echo+"\n")
	}
	// The editor's MCP servers are reached within the turn: the
	// connection is made before the session/new answer, which the
	// editor awaits, could come back, and given up before the turn's
	// answer, so that the editor sees no request of a turn after it.
	a.connectACP(ctx, s)
	defer a.disconnectACP(s)
	if a.llm != nil {
		return a.llmTurn(ctx, s, prompt)
	}
	return a.scriptedTurn(ctx, s, prompt)
}

// scriptedTurn is the deterministic turn: an optional thought, an optional
// file read, then the answer in chunks.
func (a *agent) scriptedTurn(ctx context.Context, s *session, prompt string) string {
	if a.cfg.thought != "" {
		a.thoughtChunk(s, a.cfg.thought)
	}
	for _, path := range a.cfg.read {
		// A denied or failed read is reported in its tool_call_update and
		// the turn goes on, as with real agents.
		if _, err := a.readTool(ctx, s, "", path); errors.Is(err, errCancelled) {
			return stopCancelled
		}
	}
	rounds, err := a.featureRounds(ctx, s)
	if errors.Is(err, errCancelled) {
		return stopCancelled
	}
	if err != nil {
		rounds = "error: " + err.Error() + "\n"
	}
	mcpSaid, err := a.mcpRounds(ctx, s)
	if errors.Is(err, errCancelled) {
		return stopCancelled
	}
	rounds += mcpSaid
	for i := range a.cfg.junkLines {
		// Log lines on stdout, as some agents print them mid-session.
		a.c.send(fmt.Appendf(nil, "testagent log: turn line %d of %d (not JSON-RPC)\n", i+1, a.cfg.junkLines))
	}
	text := "You said: " + prompt
	if a.cfg.plant == plantSecondSession && s.number == 2 {
		text = "In session 2 you said: " + prompt
	}
	if a.cfg.message != nil {
		text = *a.cfg.message
	}
	text = rounds + a.modeWords(s) + text
	defer func() {
		s.mu.Lock()
		s.past = append(s.past, exchange{prompt: prompt, said: text})
		s.mu.Unlock()
	}()
	for i, chunk := range a.answerChunks(chunks(text, a.cfg.chunkSize)) {
		if i > 0 && a.cfg.chunkDelay > 0 && !sleep(ctx, a.cfg.chunkDelay) {
			return stopCancelled
		}
		if ctx.Err() != nil {
			return stopCancelled
		}
		a.messageChunk(s, chunk)
	}
	a.chunksSent(s)
	return stopEndTurn
}

// sleep waits for d and reports whether ctx was still live throughout.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// chunks splits s into pieces of at most n bytes, never inside a UTF-8
// sequence (a rune longer than n bytes makes a piece of its own).
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		end := min(n, len(s))
		for end < len(s) && end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
		if end == 0 { // the first rune is longer than n
			_, end = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

// toolCall is the tool_call session update.
type toolCall struct {
	SessionUpdate string           `json:"sessionUpdate"`
	ToolCallID    string           `json:"toolCallId"`
	Title         string           `json:"title"`
	Kind          string           `json:"kind"`
	Status        string           `json:"status"`
	Locations     []map[string]any `json:"locations,omitempty"`
	RawInput      map[string]any   `json:"rawInput,omitempty"`
}

// toolCallUpdate is the tool_call_update session update.
type toolCallUpdate struct {
	SessionUpdate string            `json:"sessionUpdate"`
	ToolCallID    string            `json:"toolCallId"`
	Status        string            `json:"status"`
	Content       []toolCallContent `json:"content"`
	RawOutput     map[string]any    `json:"rawOutput,omitempty"`
}

type toolCallContent struct {
	Type    string       `json:"type"`
	Content contentBlock `json:"content"`
}

func textContent(text string) []toolCallContent {
	return []toolCallContent{{Type: "content", Content: contentBlock{Type: "text", Text: text}}}
}

// readTool reads path (relative to the session cwd) through the editor,
// announcing it as tool call callID (minted when empty) and asking for
// permission first unless --no-permission. It returns the file's content;
// errDenied when the editor rejected the call, errCancelled when the turn
// is over, or the editor's error.
func (a *agent) readTool(ctx context.Context, s *session, callID, path string) (string, error) {
	if callID == "" {
		callID = "call_" + randHex(12)
	}
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(s.cwd, abs)
	}
	title := "Read " + path
	start := time.Now()
	a.update(s, toolCall{
		SessionUpdate: "tool_call",
		ToolCallID:    callID,
		Title:         title,
		Kind:          "read",
		Status:        "pending",
		Locations:     []map[string]any{{"path": abs}},
		RawInput:      map[string]any{"path": abs, "started_at_ms": start.UnixMilli()},
	})
	fail := func(err error) (string, error) {
		a.update(s, toolCallUpdate{
			SessionUpdate: "tool_call_update",
			ToolCallID:    callID,
			Status:        "failed",
			Content:       textContent("error: " + err.Error()),
			RawOutput:     map[string]any{"error": err.Error(), "duration_ms": time.Since(start).Milliseconds()},
		})
		return "", err
	}

	if !a.cfg.noPermission {
		if err := a.askPermission(ctx, s, callID, title, "read"); errors.Is(err, errCancelled) {
			return "", err
		} else if err != nil {
			return fail(err)
		}
	}
	a.toolProgress(s, callID)
	var res struct {
		Content string `json:"content"`
	}
	err := a.c.call(ctx, "fs/read_text_file", map[string]any{"sessionId": s.id, "path": abs}, &res)
	if ctx.Err() != nil || errors.Is(err, errInputClosed) {
		return "", errCancelled
	}
	if err != nil {
		return fail(err)
	}
	first, _, _ := strings.Cut(res.Content, "\n")
	text := fmt.Sprintf("%s (%d bytes)", first, len(res.Content))
	out := map[string]any{
		"first_line":  first,
		"bytes":       len(res.Content),
		"duration_ms": time.Since(start).Milliseconds(),
	}
	if a.noise != nil {
		text += a.noise.toolText(s.cwd, abs)
		out["run"] = a.noise.token
	}
	a.toolDone(s, toolCallUpdate{
		SessionUpdate: "tool_call_update",
		ToolCallID:    callID,
		Status:        "completed",
		Content:       textContent(text),
		RawOutput:     out,
	})
	a.drain(ctx, s)
	return res.Content, nil
}

// A permissionOption is a choice offered with a permission request.
type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// defaultPermissionOptions are the choices offered for every tool call
// unless --permission-options says otherwise.
var defaultPermissionOptions = []permissionOption{
	{OptionID: "allow", Name: "Allow", Kind: "allow_once"},
	{OptionID: "reject", Name: "Reject", Kind: "reject_once"},
}

// parsePermissionOptions reads --permission-options: KIND=OPTIONID,...
func parsePermissionOptions(v string) ([]permissionOption, error) {
	var out []permissionOption
	for _, item := range strings.Split(v, ",") {
		kind, id, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || id == "" || !(strings.HasPrefix(kind, "allow_") || strings.HasPrefix(kind, "reject_")) {
			return nil, fmt.Errorf("--permission-options: %q is not KIND=OPTIONID with an allow_ or reject_ kind", item)
		}
		name := kind
		if i := slices.IndexFunc(defaultPermissionOptions, func(o permissionOption) bool { return o.Kind == kind }); i >= 0 {
			name = defaultPermissionOptions[i].Name
		}
		out = append(out, permissionOption{OptionID: id, Name: name, Kind: kind})
	}
	return out, nil
}

// askPermission asks the editor whether tool call callID may run. It
// returns nil when allowed, errDenied when rejected and errCancelled when
// the turn is over (the editor answered "cancelled", the turn's context
// ended, or stdin closed).
func (a *agent) askPermission(ctx context.Context, s *session, callID, title, kind string) error {
	var res struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	err := a.c.call(ctx, "session/request_permission", map[string]any{
		"sessionId": s.id,
		"toolCall":  map[string]any{"toolCallId": callID, "title": title, "kind": kind},
		"options":   a.cfg.permissionOptions,
	}, &res)
	chosen := ""
	if i := slices.IndexFunc(a.cfg.permissionOptions, func(o permissionOption) bool { return o.OptionID == res.Outcome.OptionID }); i >= 0 {
		chosen = a.cfg.permissionOptions[i].Kind
	}
	switch o := res.Outcome; {
	case ctx.Err() != nil, errors.Is(err, errInputClosed):
		return errCancelled
	case err != nil:
		return err
	case o.Outcome == "cancelled":
		return errCancelled
	case o.Outcome == "selected" && strings.HasPrefix(chosen, "allow_"):
		return nil
	case o.Outcome == "selected" && strings.HasPrefix(chosen, "reject_"):
		return errDenied
	default:
		return fmt.Errorf("session/request_permission: unexpected outcome %q with option %q", o.Outcome, o.OptionID)
	}
}

package testagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/acptap/acptap/internal/acp"
)

// features are what --features turns on: the parts of ACP a real editor
// session uses beyond one session and its prompts.
type features struct {
	load     bool // loadSession, session/list, session/resume and session/close, with history
	modes    bool // session modes (ask, code); the mode words the answer (scripted) or the system prompt (LLM)
	models   bool // session models and session/set_model, which no schema file has
	terminal bool // a terminal round in each scripted turn: terminal/create, wait_for_exit, output, release
	elicit   bool // an elicitation/create in each scripted turn, its answer in the text
	vendor   bool // a _testagent/status request and a _testagent/progress notification in each scripted turn
	mcpACP   bool // mcpCapabilities.acp: the agent reaches MCP servers the editor hosts over ACP (the RFD "MCP-over-ACP")
	embed    bool // promptCapabilities.embeddedContext; a prompt's resource links and embedded resources are part of its text
}

const featuresUsage = "turn on parts of ACP a real editor session uses: a comma-separated `LIST` of " +
	"load (session/load with history, session/list, session/resume, session/close), " +
	"modes (ask and code; the mode words the answer), models (session/set_model), " +
	"terminal (a terminal round in each turn), elicit (an elicitation/create in each turn), " +
	"vendor (a _testagent/status request and a _testagent/progress notification in each turn), " +
	"mcp-acp (mcpCapabilities.acp: MCP servers of type acp, reached over the ACP connection), " +
	"embed (embedded context; a prompt's attached and embedded files are part of what it says)"

func parseFeatures(v string) (features, error) {
	var f features
	for _, name := range strings.Split(v, ",") {
		switch strings.TrimSpace(name) {
		case "load":
			f.load = true
		case "modes":
			f.modes = true
		case "models":
			f.models = true
		case "terminal":
			f.terminal = true
		case "elicit":
			f.elicit = true
		case "vendor":
			f.vendor = true
		case "mcp-acp":
			f.mcpACP = true
		case "embed":
			f.embed = true
		default:
			return features{}, fmt.Errorf("--features: unknown feature %q (want load, modes, models, terminal, elicit, vendor, mcp-acp or embed)", name)
		}
	}
	return f, nil
}

// The session modes under --features modes; a session starts in the first.
var sessionModes = []map[string]string{
	{"id": "ask", "name": "Ask", "description": "Answer without changing files"},
	{"id": "code", "name": "Code", "description": "Change files"},
}

// The session models under --features models.
var sessionModels = []map[string]string{
	{"modelId": "test-model", "name": "Test model"},
	{"modelId": "test-model-large", "name": "Test model, large"},
}

// capabilities adds what the features advertise to initialize's
// agentCapabilities.
func (f features) capabilities(caps map[string]any) {
	if f.mcpACP {
		caps["mcpCapabilities"].(map[string]any)["acp"] = true
	}
	if f.embed {
		caps["promptCapabilities"].(map[string]any)["embeddedContext"] = true
	}
	if f.load {
		caps["loadSession"] = true
		caps["sessionCapabilities"] = map[string]any{"list": map[string]any{}, "resume": map[string]any{}, "close": map[string]any{}}
	}
}

// sessionState adds a session's modes and models, as the features have
// them, to the answer of session/new, session/load or session/resume.
func (a *agent) sessionState(s *session, res map[string]any) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.cfg.features.modes {
		res["modes"] = map[string]any{"currentModeId": s.mode, "availableModes": sessionModes}
	}
	if a.cfg.features.models {
		res["models"] = map[string]any{"currentModelId": s.model, "availableModels": sessionModels}
	}
	return res
}

// An exchange of a session's history: a prompt and what the agent said.
type exchange struct{ prompt, said string }

// loadSession answers session/load: the session's history as
// user_message_chunk and agent_message_chunk updates, then the answer.
// session/resume (history false) answers at once.
func (a *agent) loadSession(m *acp.Envelope, history bool) {
	if m.ID == nil {
		return
	}
	var p struct {
		SessionID string `json:"sessionId"`
		Cwd       string `json:"cwd"`
	}
	if !a.decodeParams(m, &p) {
		return
	}
	s := a.session(p.SessionID)
	if s == nil {
		a.c.replyError(m.ID, acp.CodeInvalidParams, "invalid params for %s: unknown session %q", m.Method, p.SessionID)
		return
	}
	s.mu.Lock()
	s.closed = false
	if p.Cwd != "" {
		s.cwd = p.Cwd
	}
	past := slices.Clone(s.past)
	s.mu.Unlock()
	if history {
		for i, x := range past {
			a.update(s, chunkUpdate{"user_message_chunk", contentBlock{"text", x.prompt}})
			if a.cfg.plant == plantHistoryDrop && i == len(past)-1 {
				continue
			}
			a.messageChunk(s, x.said)
		}
	}
	a.c.reply(m.ID, a.sessionState(s, map[string]any{}))
}

// listSessions answers session/list: every session, in the order made.
func (a *agent) listSessions(m *acp.Envelope) {
	if m.ID == nil {
		return
	}
	a.mu.Lock()
	all := make([]*session, 0, len(a.sessions))
	for _, s := range a.sessions {
		all = append(all, s)
	}
	a.mu.Unlock()
	slices.SortFunc(all, func(x, y *session) int { return x.number - y.number })
	list := []map[string]any{}
	for _, s := range all {
		s.mu.Lock()
		entry := map[string]any{"sessionId": s.id, "cwd": s.cwd}
		if len(s.past) > 0 {
			entry["title"] = s.past[0].prompt
		}
		s.mu.Unlock()
		list = append(list, entry)
	}
	a.c.reply(m.ID, map[string]any{"sessions": list})
}

// closeSession answers session/close: the session's running turn is
// cancelled and it takes no prompts until loaded or resumed.
func (a *agent) closeSession(m *acp.Envelope) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if m.ID == nil || !a.decodeParams(m, &p) {
		return
	}
	s := a.session(p.SessionID)
	if s == nil {
		a.c.replyError(m.ID, acp.CodeInvalidParams, "invalid params for session/close: unknown session %q", p.SessionID)
		return
	}
	s.mu.Lock()
	s.closed = true
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	a.c.reply(m.ID, map[string]any{})
}

// setMode answers session/set_mode, and session/set_model: the session's
// mode or model changes, a mode change announced by a current_mode_update.
func (a *agent) setMode(m *acp.Envelope) {
	var p struct {
		SessionID string `json:"sessionId"`
		ModeID    string `json:"modeId"`
		ModelID   string `json:"modelId"`
	}
	if m.ID == nil || !a.decodeParams(m, &p) {
		return
	}
	s := a.session(p.SessionID)
	model := m.Method == "session/set_model"
	if s == nil || model && !a.cfg.features.models || !model && !a.cfg.features.modes {
		a.c.replyError(m.ID, acp.CodeInvalidParams, "invalid params for %s: unknown session %q or no modes", m.Method, p.SessionID)
		return
	}
	if model {
		if !slices.ContainsFunc(sessionModels, func(x map[string]string) bool { return x["modelId"] == p.ModelID }) {
			a.c.replyError(m.ID, acp.CodeInvalidParams, "invalid params for session/set_model: unknown model %q", p.ModelID)
			return
		}
		s.mu.Lock()
		s.model = p.ModelID
		s.mu.Unlock()
		a.c.reply(m.ID, map[string]any{})
		return
	}
	if !slices.ContainsFunc(sessionModes, func(x map[string]string) bool { return x["id"] == p.ModeID }) {
		a.c.replyError(m.ID, acp.CodeInvalidParams, "invalid params for session/set_mode: unknown mode %q", p.ModeID)
		return
	}
	s.mu.Lock()
	s.mode = p.ModeID
	s.mu.Unlock()
	a.update(s, map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": p.ModeID})
	a.c.reply(m.ID, map[string]any{})
}

// modeWords returns what the session's mode adds to an answer (scripted)
// or a system prompt (LLM): "" in the first mode, and always under
// --plant mode-ignored.
func (a *agent) modeWords(s *session) string {
	s.mu.Lock()
	mode := s.mode
	s.mu.Unlock()
	if !a.cfg.features.modes || mode == sessionModes[0]["id"] || a.cfg.plant == plantModeIgnored {
		return ""
	}
	return "[" + mode + " mode] "
}

// featureRounds runs the rounds --features adds to a scripted turn, and
// returns what the answer says of them.
func (a *agent) featureRounds(ctx context.Context, s *session) (string, error) {
	var said []string
	if a.cfg.features.vendor {
		a.c.notify("_testagent/progress", map[string]any{"sessionId": s.id, "stage": "started"})
		var res json.RawMessage
		err := a.c.call(ctx, "_testagent/status", map[string]any{"sessionId": s.id}, &res)
		if ctx.Err() != nil || errors.Is(err, errInputClosed) {
			return "", errCancelled
		}
		var rerr *acp.ResponseError
		switch {
		case errors.As(err, &rerr):
			said = append(said, fmt.Sprintf("status: error %d", rerr.Code))
		case err != nil:
			return "", err
		default:
			said = append(said, "status: "+string(res))
		}
	}
	if a.cfg.features.elicit {
		var res struct {
			Action  string         `json:"action"`
			Content map[string]any `json:"content"`
		}
		err := a.c.call(ctx, "elicitation/create", map[string]any{
			"sessionId": s.id,
			"mode":      "form",
			"message":   "How should I greet you?",
			"requestedSchema": map[string]any{
				"type":       "object",
				"properties": map[string]any{"greeting": map[string]any{"type": "string", "title": "Greeting"}},
				"required":   []string{"greeting"},
			},
		}, &res)
		if ctx.Err() != nil || errors.Is(err, errInputClosed) {
			return "", errCancelled
		}
		if err != nil {
			return "", err
		}
		said = append(said, fmt.Sprintf("elicitation: %s %v", res.Action, res.Content["greeting"]))
	}
	if a.cfg.features.terminal {
		out, err := a.terminalRound(ctx, s)
		if err != nil {
			return "", err
		}
		said = append(said, "terminal: "+out)
	}
	if len(said) == 0 {
		return "", nil
	}
	return strings.Join(said, "; ") + "\n", nil
}

// terminalRound runs `echo` in an editor terminal as a tool call: create,
// wait for exit, read the output, release.
func (a *agent) terminalRound(ctx context.Context, s *session) (string, error) {
	callID := "call_" + randHex(12)
	a.update(s, toolCall{SessionUpdate: "tool_call", ToolCallID: callID, Title: "Run echo", Kind: "execute", Status: "pending",
		RawInput: map[string]any{"command": "echo terminal round"}})
	call := func(method string, params map[string]any, res any) error {
		params["sessionId"] = s.id
		err := a.c.call(ctx, method, params, res)
		if ctx.Err() != nil || errors.Is(err, errInputClosed) {
			return errCancelled
		}
		return err
	}
	echo, err := exec.LookPath("echo")
	if err != nil {
		echo = "echo"
	}
	var created struct {
		TerminalID string `json:"terminalId"`
	}
	if err := call("terminal/create", map[string]any{"command": echo, "args": []string{"terminal", "round"}, "cwd": s.cwd, "outputByteLimit": 4096}, &created); err != nil {
		return "", err
	}
	a.update(s, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": callID, "status": "in_progress",
		"content": []map[string]any{{"type": "terminal", "terminalId": created.TerminalID}}})
	var exit struct {
		ExitCode *int    `json:"exitCode"`
		Signal   *string `json:"signal"`
	}
	if err := call("terminal/wait_for_exit", map[string]any{"terminalId": created.TerminalID}, &exit); err != nil {
		return "", err
	}
	var output struct {
		Output    string `json:"output"`
		Truncated bool   `json:"truncated"`
	}
	if err := call("terminal/output", map[string]any{"terminalId": created.TerminalID}, &output); err != nil {
		return "", err
	}
	if err := call("terminal/release", map[string]any{"terminalId": created.TerminalID}, &json.RawMessage{}); err != nil {
		return "", err
	}
	code := -1
	if exit.ExitCode != nil {
		code = *exit.ExitCode
	}
	text := fmt.Sprintf("%s(exit %d)", output.Output, code)
	a.update(s, toolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: callID, Status: "completed", Content: textContent(text)})
	return strings.TrimSpace(output.Output), nil
}

// sessionMethod handles the session methods of --features, and reports
// whether the features have m's method.
func (a *agent) sessionMethod(m *acp.Envelope) bool {
	f := a.cfg.features
	var on bool
	var handle func(*acp.Envelope)
	switch m.Method {
	case "session/load", "session/resume":
		on, handle = f.load, func(m *acp.Envelope) { a.loadSession(m, m.Method == "session/load") }
	case "session/list":
		on, handle = f.load, a.listSessions
	case "session/close":
		on, handle = f.load, a.closeSession
	case "session/set_mode":
		on, handle = f.modes, a.setMode
	case "session/set_model":
		on, handle = f.models, a.setMode
	}
	if on {
		handle(m)
	}
	return on
}

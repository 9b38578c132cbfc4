package testeditor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/acptap/acptap/internal/acp"
)

// agentCaps is what the editor reads of initialize's answer: in Zed mode,
// and whether the agent reaches MCP servers over ACP.
type agentCaps struct {
	AgentCapabilities struct {
		MCPCapabilities struct {
			ACP bool `json:"acp"`
		} `json:"mcpCapabilities"`
		LoadSession         bool `json:"loadSession"`
		SessionCapabilities struct {
			List   json.RawMessage `json:"list"`
			Resume json.RawMessage `json:"resume"`
			Close  json.RawMessage `json:"close"`
		} `json:"sessionCapabilities"`
	} `json:"agentCapabilities"`
}

// sessionAnswer is what the editor reads of a session/new answer.
type sessionAnswer struct {
	SessionID string `json:"sessionId"`
	Modes     *struct {
		CurrentModeID  string `json:"currentModeId"`
		AvailableModes []struct {
			ID string `json:"id"`
		} `json:"availableModes"`
	} `json:"modes"`
	Models *struct {
		CurrentModelID  string `json:"currentModelId"`
		AvailableModels []struct {
			ModelID string `json:"modelId"`
		} `json:"availableModels"`
	} `json:"models"`
}

// converseZed runs the session as Zed 1.x does (see Options.Zed), after
// initialize, whose answer is caps.
func (e *editor) converseZed(ctx context.Context, cwd string, prompts []string, caps agentCaps) error {
	n := max(e.opts.Sessions, 2)
	news := make([]request, n)
	for k := range news {
		news[k] = request{method: "session/new", params: map[string]any{"cwd": cwd, "mcpServers": e.mcpServers()}}
	}
	results, err := e.callAll(ctx, news)
	if err != nil {
		return err
	}
	ids := make([]string, n)
	var settings []request
	for k, r := range results {
		var s sessionAnswer
		if json.Unmarshal(r, &s) != nil || s.SessionID == "" {
			return fmt.Errorf("session/new #%d: no sessionId in the agent's answer", k+1)
		}
		ids[k] = s.SessionID
		// The user picks the next mode and model in each session.
		if s.Modes != nil && len(s.Modes.AvailableModes) > 1 {
			settings = append(settings, request{method: "session/set_mode", params: map[string]any{"sessionId": s.SessionID, "modeId": s.Modes.AvailableModes[1].ID}})
		}
		if s.Models != nil && len(s.Models.AvailableModels) > 1 {
			settings = append(settings, request{method: "session/set_model", params: map[string]any{"sessionId": s.SessionID, "modelId": s.Models.AvailableModels[1].ModelID}})
		}
	}
	e.tr.SessionID = ids[0]
	if len(settings) > 0 {
		if _, err := e.callAll(ctx, settings); err != nil {
			return err
		}
	}
	sc := caps.AgentCapabilities.SessionCapabilities
	if sc.List != nil {
		var list json.RawMessage
		if err := e.call(ctx, "session/list", "the session/list response", map[string]any{"cwd": cwd}, &list); err != nil {
			return err
		}
	}
	if err := e.promptAll(ctx, ids, prompts); err != nil {
		return err
	}
	// The user closes the first thread and opens it again from the
	// history, then goes on in it.
	reopen := ""
	switch {
	case caps.AgentCapabilities.LoadSession:
		reopen = "session/load"
	case sc.Resume != nil:
		reopen = "session/resume"
	default:
		return nil
	}
	if sc.Close != nil {
		if err := e.call(ctx, "session/close", "the session/close response", map[string]any{"sessionId": ids[0]}, &json.RawMessage{}); err != nil {
			return err
		}
	}
	if err := e.call(ctx, reopen, "the "+reopen+" response", map[string]any{"sessionId": ids[0], "cwd": cwd, "mcpServers": e.mcpServers()}, &json.RawMessage{}); err != nil {
		return err
	}
	return e.promptAll(ctx, ids[:1], []string{"and once more"})
}

// terminals are the terminals the agent asked the editor for, by id.
type terminals struct {
	mu sync.Mutex // guards byID
	// byID holds the terminals not yet released.
	byID map[string]*terminal
}

// terminal is a command run for the agent.
type terminal struct {
	cmd  *exec.Cmd
	out  bytes.Buffer // its output, once done is closed
	done chan struct{}
	code int
}

// serveTerminal answers the agent's terminal/* requests: commands run in
// the session's cwd, their output kept for terminal/output.
func (e *editor) serveTerminal(m *acp.Envelope) (any, *acp.ResponseError) {
	var p struct {
		TerminalID string   `json:"terminalId"`
		Command    string   `json:"command"`
		Args       []string `json:"args"`
		Cwd        string   `json:"cwd"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, invalidParams(m, err)
	}
	e.terms.mu.Lock()
	defer e.terms.mu.Unlock()
	if e.terms.byID == nil {
		e.terms.byID = map[string]*terminal{}
	}
	if m.Method == "terminal/create" {
		t := &terminal{cmd: exec.Command(p.Command, p.Args...), done: make(chan struct{})}
		t.cmd.Dir = p.Cwd
		t.cmd.Stdout, t.cmd.Stderr = &t.out, &t.out
		if err := t.cmd.Start(); err != nil {
			return nil, &acp.ResponseError{Code: acp.CodeInternalError, Message: "terminal/create: " + err.Error()}
		}
		go func() {
			t.cmd.Wait()
			t.code = t.cmd.ProcessState.ExitCode()
			close(t.done)
		}()
		id := "term_" + newUUID()
		e.terms.byID[id] = t
		return map[string]any{"terminalId": id}, nil
	}
	t := e.terms.byID[p.TerminalID]
	if t == nil {
		return nil, invalidParams(m, fmt.Errorf("unknown terminal %q", p.TerminalID))
	}
	switch m.Method {
	case "terminal/wait_for_exit":
		select {
		case <-t.done:
		case <-time.After(10 * time.Second):
			return nil, &acp.ResponseError{Code: acp.CodeInternalError, Message: "terminal/wait_for_exit: the command runs on"}
		}
		return map[string]any{"exitCode": t.code, "signal": nil}, nil
	case "terminal/output":
		select {
		case <-t.done:
			return map[string]any{"output": t.out.String(), "truncated": false, "exitStatus": map[string]any{"exitCode": t.code, "signal": nil}}, nil
		default:
			return map[string]any{"output": "", "truncated": false}, nil
		}
	case "terminal/kill", "terminal/release":
		select {
		case <-t.done:
		default:
			t.cmd.Process.Signal(syscall.SIGKILL)
			<-t.done
		}
		if m.Method == "terminal/release" {
			delete(e.terms.byID, p.TerminalID)
		}
		return map[string]any{}, nil
	}
	return nil, &acp.ResponseError{Code: acp.CodeMethodNotFound, Message: "method not found: " + m.Method}
}

// releaseTerminals kills what the agent left running.
func (e *editor) releaseTerminals() {
	e.terms.mu.Lock()
	defer e.terms.mu.Unlock()
	for id, t := range e.terms.byID {
		select {
		case <-t.done:
		default:
			t.cmd.Process.Signal(syscall.SIGKILL)
			<-t.done
		}
		delete(e.terms.byID, id)
	}
}

// elicit answers elicitation/create as a user filling in the form: each
// property of the requested schema gets a value of its type.
func elicit(m *acp.Envelope) (any, *acp.ResponseError) {
	var p struct {
		RequestedSchema struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		} `json:"requestedSchema"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, invalidParams(m, err)
	}
	content := map[string]any{}
	for name, prop := range p.RequestedSchema.Properties {
		switch prop.Type {
		case "boolean":
			content[name] = true
		case "number", "integer":
			content[name] = 1
		default:
			content[name] = "hello from the editor"
		}
	}
	return map[string]any{"action": "accept", "content": content}, nil
}

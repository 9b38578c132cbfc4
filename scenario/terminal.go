package scenario

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/acptap/acptap/internal/acp"
)

// defaultOutputLimit bounds a terminal's kept output when the agent sets
// no outputByteLimit.
const defaultOutputLimit = 1 << 20

// terminals are the commands the agent ran through the editor, by id.
type terminals struct {
	mu     sync.Mutex // guards byID and next
	byID   map[string]*terminal
	next   int
	closed bool // releaseAll ran: no more terminals
}

// terminal is one command run for the agent, in a process group of its
// own so that killing it leaves nothing behind.
type terminal struct {
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed once the command has exited
	// status is the exit status, set before done is closed.
	status map[string]any
}

// serve answers a terminal/* request, running commands in cwd unless the
// request names another directory inside it.
func (ts *terminals) serve(method string, params json.RawMessage, cwd string) (any, *acp.ResponseError) {
	var req struct {
		TerminalID string   `json:"terminalId"`
		Command    string   `json:"command"`
		Args       []string `json:"args"`
		Env        []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"env"`
		Cwd             string `json:"cwd"`
		OutputByteLimit int    `json:"outputByteLimit"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, &acp.ResponseError{Code: acp.CodeInvalidParams, Message: "invalid params: " + err.Error()}
	}
	if method == "terminal/create" {
		return ts.create(req.Command, req.Args, req.Env, req.Cwd, req.OutputByteLimit, cwd)
	}
	ts.mu.Lock()
	t := ts.byID[req.TerminalID]
	ts.mu.Unlock()
	if t == nil {
		return nil, &acp.ResponseError{Code: acp.CodeInvalidParams, Message: fmt.Sprintf("invalid params: unknown terminal %q", req.TerminalID)}
	}
	switch method {
	case "terminal/output":
		out, truncated := t.out.text()
		res := map[string]any{"output": out, "truncated": truncated}
		select {
		case <-t.done:
			res["exitStatus"] = t.status
		default:
		}
		return res, nil
	case "terminal/wait_for_exit":
		<-t.done // releaseAll kills what still runs when the scenario ends
		return t.status, nil
	case "terminal/kill":
		t.kill()
		return map[string]any{}, nil
	case "terminal/release":
		t.kill()
		ts.mu.Lock()
		delete(ts.byID, req.TerminalID)
		ts.mu.Unlock()
		return map[string]any{}, nil
	}
	return nil, &acp.ResponseError{Code: acp.CodeMethodNotFound, Message: "method not found: " + method}
}

func (ts *terminals) create(command string, args []string, env []struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}, dir string, limit int, cwd string) (any, *acp.ResponseError) {
	if command == "" {
		return nil, &acp.ResponseError{Code: acp.CodeInvalidParams, Message: "invalid params: terminal/create without a command"}
	}
	if dir == "" {
		dir = cwd
	}
	if rel, err := filepath.Rel(cwd, dir); err != nil || !filepath.IsAbs(dir) || rel != "." && !filepath.IsLocal(rel) {
		return nil, &acp.ResponseError{Code: acp.CodeInvalidParams, Message: fmt.Sprintf("invalid params: terminal cwd %s is outside the session's workspace %s", dir, cwd)}
	}
	if limit <= 0 {
		limit = defaultOutputLimit
	}
	cmd := exec.Command(command, args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for _, e := range env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	t := &terminal{cmd: cmd, out: &tailBuffer{limit: limit}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = t.out, t.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closed {
		return nil, &acp.ResponseError{Code: acp.CodeInternalError, Message: "terminal/create: the scenario is over"}
	}
	if err := cmd.Start(); err != nil {
		return nil, &acp.ResponseError{Code: acp.CodeInternalError, Message: "terminal/create: " + err.Error()}
	}
	go func() {
		cmd.Wait() // the status is in cmd.ProcessState
		status := map[string]any{"exitCode": nil, "signal": nil}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			status["signal"] = ws.Signal().String()
		} else {
			status["exitCode"] = cmd.ProcessState.ExitCode()
		}
		t.status = status
		close(t.done)
	}()
	if ts.byID == nil {
		ts.byID = map[string]*terminal{}
	}
	ts.next++
	id := "term-" + strconv.Itoa(ts.next)
	ts.byID[id] = t
	return map[string]any{"terminalId": id}, nil
}

// kill ends the command's process group, if it still runs, and waits for
// it.
func (t *terminal) kill() {
	select {
	case <-t.done:
		return
	default:
	}
	syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
	<-t.done
}

// releaseAll kills what the agent left running; no terminal starts after.
func (ts *terminals) releaseAll() {
	ts.mu.Lock()
	ts.closed = true
	left := ts.byID
	ts.byID = nil
	ts.mu.Unlock()
	for _, t := range left {
		t.kill()
	}
}

// tailBuffer keeps the last limit bytes written to it, cut at a character
// boundary, as ACP's outputByteLimit asks.
type tailBuffer struct {
	mu        sync.Mutex // guards buf and truncated
	limit     int
	buf       []byte
	truncated bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.truncated = true
	}
	return len(p), nil
}

func (b *tailBuffer) text() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.buf
	for len(out) > 0 && !utf8.RuneStart(out[0]) {
		out = out[1:]
	}
	return string(out), b.truncated
}

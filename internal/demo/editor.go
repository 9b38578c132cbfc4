package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/acptap/acptap/internal/acp"
)

// EditorOptions say what session the demo editor drives.
type EditorOptions struct {
	// Argv is the command the editor starts as its agent (acptap record
	// with the agent after --, in the demo).
	Argv []string
	// Dir is the agent's working directory, and Env its environment.
	Dir string
	Env []string
	// Cwd is the session's cwd, an absolute path.
	Cwd string
	// Prompts are sent one turn after another, as text prompts.
	Prompts []string
	// Stderr receives the agent's stderr. If nil, it is discarded.
	Stderr io.Writer
}

// A Turn is a prompt and what the agent answered it.
type Turn struct {
	Prompt     string
	Text       string // the agent's message chunks, joined
	StopReason string
}

// exitWait is how long the agent may take to exit once its stdin is
// closed, before it is terminated.
const exitWait = 5 * time.Second

// Drive starts the agent, opens a session, sends the prompts one turn at
// a time, and answers the agent's requests as an editor would: permission
// granted with the first allow_once option, files read from disk. It
// returns the turns once the agent has exited, after its stdin was
// closed.
func Drive(ctx context.Context, opts EditorOptions) ([]Turn, error) {
	if len(opts.Argv) == 0 {
		return nil, errors.New("no agent command")
	}
	cmd := exec.Command(opts.Argv[0], opts.Argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stderr = opts.Dir, opts.Env, opts.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", opts.Argv[0], err)
	}
	e := &editor{in: stdin, pending: map[int]chan acp.Envelope{}}
	readDone := make(chan error, 1)
	go func() { readDone <- e.read(stdout) }()
	turns, err := e.session(ctx, opts)
	stdin.Close()
	exited := make(chan error, 1)
	go func() {
		<-readDone
		exited <- cmd.Wait()
	}()
	select {
	case werr := <-exited:
		if err == nil && werr != nil {
			err = fmt.Errorf("the agent: %w", werr)
		}
	case <-time.After(exitWait):
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		if err == nil {
			err = fmt.Errorf("the agent did not exit within %v of the end of its input", exitWait)
		}
	}
	return turns, err
}

// editor is the demo editor's side of the connection.
type editor struct {
	inMu sync.Mutex // guards in: one line at a time
	in   io.Writer

	mu      sync.Mutex                // guards the fields below
	nextID  int                       // the id of the editor's next request
	pending map[int]chan acp.Envelope // the editor's requests, by id
	turn    *Turn                     // the turn in progress, or nil
}

// session runs initialize, session/new and the prompts.
func (e *editor) session(ctx context.Context, opts EditorOptions) ([]Turn, error) {
	if _, err := e.call(ctx, "initialize", map[string]any{
		"protocolVersion":    1,
		"clientCapabilities": map[string]any{"fs": map[string]any{"readTextFile": true, "writeTextFile": false}, "terminal": false},
		"clientInfo":         map[string]any{"name": "acptap-demo-editor", "version": "1"},
	}); err != nil {
		return nil, err
	}
	res, err := e.call(ctx, "session/new", map[string]any{"cwd": opts.Cwd, "mcpServers": []any{}})
	if err != nil {
		return nil, err
	}
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &s); err != nil || s.SessionID == "" {
		return nil, fmt.Errorf("session/new answered %s, without a sessionId", res)
	}
	var turns []Turn
	for _, prompt := range opts.Prompts {
		t := &Turn{Prompt: prompt}
		e.mu.Lock()
		e.turn = t
		e.mu.Unlock()
		res, err := e.call(ctx, "session/prompt", map[string]any{
			"sessionId": s.SessionID,
			"prompt":    []any{map[string]any{"type": "text", "text": prompt}},
		})
		e.mu.Lock()
		e.turn = nil
		e.mu.Unlock()
		if err != nil {
			return turns, err
		}
		var r struct {
			StopReason string `json:"stopReason"`
		}
		json.Unmarshal(res, &r)
		t.StopReason = r.StopReason
		turns = append(turns, *t)
	}
	return turns, nil
}

// call sends a request and waits for its answer.
func (e *editor) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	e.mu.Lock()
	id := e.nextID
	e.nextID++
	ch := make(chan acp.Envelope, 1)
	e.pending[id] = ch
	e.mu.Unlock()
	if err := e.send(acp.EncodeRequest(json.RawMessage(strconv.Itoa(id)), method, params)); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("%s: the agent's output ended before its answer", method)
		}
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %w", method, m.Error)
		}
		return m.Result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// read reads the agent's messages until its stdout ends.
func (e *editor) read(r io.Reader) error {
	defer func() {
		e.mu.Lock()
		for id, ch := range e.pending {
			close(ch)
			delete(e.pending, id)
		}
		e.mu.Unlock()
	}()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		var m acp.Envelope
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue // not JSON-RPC: agents print junk, editors skip it
		}
		switch {
		case m.Method == "" && m.ID != nil:
			var id int
			if json.Unmarshal(m.ID, &id) != nil {
				continue
			}
			e.mu.Lock()
			ch := e.pending[id]
			delete(e.pending, id)
			e.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		case m.Method == "session/update":
			e.update(m.Params)
		case m.ID != nil:
			e.answer(m)
		}
	}
	return sc.Err()
}

// update adds a message chunk to the turn in progress.
func (e *editor) update(params json.RawMessage) {
	var p struct {
		Update struct {
			Kind    string `json:"sessionUpdate"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	if json.Unmarshal(params, &p) != nil || p.Update.Kind != "agent_message_chunk" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.turn != nil {
		e.turn.Text += p.Update.Content.Text
	}
}

// answer answers a request of the agent's.
func (e *editor) answer(m acp.Envelope) {
	reply := func(result any) { e.send(acp.EncodeResult(m.ID, result)) }
	fail := func(code int, message string) {
		e.send(acp.EncodeError(m.ID, &acp.ResponseError{Code: code, Message: message}))
	}
	switch m.Method {
	case "session/request_permission":
		var p struct {
			Options []struct {
				OptionID string `json:"optionId"`
				Kind     string `json:"kind"`
			} `json:"options"`
		}
		json.Unmarshal(m.Params, &p)
		for _, o := range p.Options {
			if o.Kind == "allow_once" {
				reply(map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": o.OptionID}})
				return
			}
		}
		reply(map[string]any{"outcome": map[string]any{"outcome": "cancelled"}})
	case "fs/read_text_file":
		var p struct {
			Path string `json:"path"`
		}
		json.Unmarshal(m.Params, &p)
		b, err := os.ReadFile(p.Path)
		if err != nil {
			fail(acp.CodeResourceNotFound, err.Error())
			return
		}
		reply(map[string]any{"content": string(b)})
	default:
		fail(acp.CodeMethodNotFound, "method not found: "+m.Method)
	}
}

// send writes one message, encoded as one line (acp.Encode*).
func (e *editor) send(line []byte, err error) error {
	if err != nil {
		return err
	}
	e.inMu.Lock()
	defer e.inMu.Unlock()
	_, err = e.in.Write(line)
	return err
}

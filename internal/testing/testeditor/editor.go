// Package testeditor is a scripted ACP client that stands in for an editor: it starts an agent, opens a session, sends prompts and answers the agent's requests.
package testeditor

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/acptap/acptap/internal/acp"
)

// DefaultExitWait is the ExitWait used when Options.ExitWait is zero.
const DefaultExitWait = 5 * time.Second

// drainGrace is how long the agent's output may trail its exit: a
// grandchild that inherited the agent's stdout could hold the pipe open
// forever.
const drainGrace = 2 * time.Second

// Options configures Run. The zero value of every field but Argv works.
type Options struct {
	// Argv is the agent's command line; Argv[0] is looked up in PATH.
	Argv []string
	// Dir is the agent's working directory; empty means the current one.
	Dir string
	// Env is the agent's environment; nil means this process's.
	Env []string
	// Stderr receives the agent's stderr; nil means os.Stderr.
	Stderr io.Writer

	// Cwd is the session's cwd sent in session/new, made absolute; empty
	// means the current directory.
	Cwd string
	// Prompts are sent one turn after the other in one session, as text
	// prompts; nil means the single prompt "hello".
	Prompts []string
	// Reject answers permission requests with the first reject_once
	// option (else reject_always) instead of the first allow_once (else
	// allow_always).
	Reject bool
	// CancelAfter, when positive, sends session/cancel once the first turn
	// has received that many session/update notifications. Permission
	// requests arriving after the cancel are answered "cancelled".
	CancelAfter int
	// Sessions, when 2 or more, opens that many sessions with concurrent
	// session/new requests, as Zed does, and sends each prompt to every
	// session at once, so that their turns are in flight together; the
	// answers are awaited by id, in whatever order they come. Each
	// session's prompts carry "(session K)" after the text. It does not
	// combine with the cancel options.
	Sessions int
	// CancelRequest cancels the first turn with $/cancel_request of its
	// session/prompt request, instead of session/cancel, at the point
	// CancelAfter or CancelAfterText says; the agent's -32800 error answer
	// ends the turn as cancelled.
	CancelRequest bool
	// CancelAfterText, when positive, sends session/cancel once the first
	// turn has received that many agent_message_chunk notifications. Unlike
	// CancelAfter it does not count the notifications whose place in the
	// turn is up to the agent's scheduling (available_commands_update,
	// thoughts, plans), so the cancel comes after the same text every run.
	CancelAfterText int
	// StringIDs makes the editor's request ids UUID strings instead of
	// numbers counting from 0.
	StringIDs bool
	// MCPServers, if not nil, is the mcpServers array of session/new and
	// session/load (JSON); nil sends an empty one.
	MCPServers json.RawMessage
	// MCPOverACP are the names of MCP servers the editor hosts on the
	// ACP connection (see acpHost), each with testmcp's lookup tool,
	// added to MCPServers when the agent advertises mcpCapabilities.acp.
	MCPOverACP []string
	// Zed makes the editor behave as Zed 1.x does: UUID string ids;
	// terminal and elicitation capabilities, whose requests it serves
	// (commands run in the session's cwd; every form field filled in);
	// Sessions sessions (at least 2) opened with concurrent session/new
	// requests; in each, session/set_mode to the second mode and
	// session/set_model to the second model when the agent offers them;
	// session/list when the agent advertises it; every prompt to every
	// session at once, as Sessions does; then, when the agent can load
	// (else resume) sessions, the first session closed (when it
	// advertises session/close), loaded again with its history, and
	// prompted once more. It does not combine with the cancel options.
	Zed bool
	// ExitWait is how long to wait for the agent to exit once its stdin is
	// closed before sending SIGTERM; zero means DefaultExitWait.
	ExitWait time.Duration
	// TermWait is how long to wait after SIGTERM before SIGKILL; zero
	// means ExitWait.
	TermWait time.Duration
	// Linger is how long to go on handling the agent's messages after the
	// last turn, before closing its stdin, as an editor that stays open
	// does: what an agent sends a moment after its last turn (qwen-code's
	// available_commands_update) is then part of the session.
	Linger time.Duration

	// InitializeMeta, if not nil, is sent as initialize's _meta, as
	// editors send their own settings there (JetBrains a proxyConfig
	// with a gateway key).
	InitializeMeta json.RawMessage
	// Authenticate, if not nil, is the params of an authenticate request
	// sent after initialize (a methodId, and what else the editor puts
	// there, such as a key).
	Authenticate json.RawMessage
}

// Transcript is what happened in a Run.
type Transcript struct {
	// Messages are the lines written to and read from the agent, in order.
	// Blank lines from the agent are left out.
	Messages []Message
	// SessionID is the id the agent gave the session.
	SessionID string
	// Turns are the prompt turns started, in order.
	Turns []Turn
	// ExitCode is the agent's exit status, 128+n if signal n killed it,
	// and -1 if it could not be started.
	ExitCode int
	// Signal is the signal the editor had to send to stop the agent after
	// closing its stdin ("SIGTERM" or "SIGKILL"), or "" if it exited by
	// itself.
	Signal string
}

// Message is one line of the conversation, as written in a transcript
// file.
type Message struct {
	// Dir is "send" for editor → agent and "recv" for agent → editor.
	Dir string `json:"dir"`
	// Msg is the line when it is JSON.
	Msg json.RawMessage `json:"msg,omitempty"`
	// Raw is the line when it is not JSON, as agents sometimes print.
	Raw string `json:"raw,omitempty"`
}

// Turn is one prompt turn.
type Turn struct {
	Prompt     string
	StopReason string // "" when the turn did not end
	Text       string // the agent_message_chunk texts, concatenated
	Updates    int    // session/update notifications received during the turn
	Chunks     int    // agent_message_chunk notifications among them
}

// WriteNDJSON writes the transcript as one JSON object per line: the
// messages ({"dir":"send","msg":{...}} or {"dir":"recv","raw":"..."}),
// then {"exit_code":N} with "signal" when the editor had to send one.
func (t *Transcript) WriteNDJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, m := range t.Messages {
		if err := enc.Encode(m); err != nil {
			return fmt.Errorf("writing transcript: %w", err)
		}
	}
	end := struct {
		ExitCode int    `json:"exit_code"`
		Signal   string `json:"signal,omitempty"`
	}{t.ExitCode, t.Signal}
	if err := enc.Encode(end); err != nil {
		return fmt.Errorf("writing transcript: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing transcript: %w", err)
	}
	return nil
}

// Run starts the agent, initializes it, opens a session, runs the prompt
// turns one after the other while answering the agent's requests, then
// closes the agent's stdin and waits for it to exit (see
// Options.ExitWait). Session permission requests, fs/read_text_file and
// fs/write_text_file are served; other agent requests get a
// method-not-found error. Lines from the agent that are not JSON are
// recorded and skipped.
//
// Run returns an error when a turn did not end with a stop reason, the
// agent answered a request with an error, or ctx ended first; the error
// says what the editor was waiting for. The transcript is returned in
// every case, with the agent stopped and its exit code set.
func Run(ctx context.Context, opts Options) (*Transcript, error) {
	tr := &Transcript{ExitCode: -1}
	if len(opts.Argv) == 0 {
		return tr, errors.New("no agent command")
	}
	cwd := opts.Cwd
	if cwd == "" {
		cwd = "."
	}
	cwd, err := filepath.Abs(cwd)
	if err != nil {
		return tr, fmt.Errorf("session cwd: %w", err)
	}
	prompts := opts.Prompts
	if prompts == nil {
		prompts = []string{"hello"}
	}
	exitWait := opts.ExitWait
	if exitWait <= 0 {
		exitWait = DefaultExitWait
	}
	termWait := opts.TermWait
	if termWait <= 0 {
		termWait = exitWait
	}

	if opts.Zed {
		opts.StringIDs = true
	}
	e := &editor{opts: opts, tr: tr, acp: newACPHost(opts.MCPOverACP)}
	if err := e.start(); err != nil {
		return tr, err
	}
	// A write blocked on a full pipe must not outlive ctx.
	stop := context.AfterFunc(ctx, func() { e.stdin.SetWriteDeadline(time.Now()) })
	defer stop()

	err = e.converse(ctx, cwd, prompts)
	waiting := e.waitingFor()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("gave up waiting for %s: %w", waiting, context.Cause(ctx))
	}
	if err == nil && opts.Linger > 0 {
		e.pumpUntil(e.exited, opts.Linger)
	}
	e.shutdown(exitWait, termWait)
	e.releaseTerminals()
	if errors.Is(err, errOutputClosed) {
		if tr.Signal == "" {
			err = fmt.Errorf("the agent exited with status %d while the editor waited for %s", tr.ExitCode, waiting)
		} else {
			err = fmt.Errorf("the agent closed its stdout while the editor waited for %s (stopped with %s: exit status %d)", waiting, tr.Signal, tr.ExitCode)
		}
	}
	return tr, err
}

// errOutputClosed is the agent's stdout reaching EOF while the editor
// still expects an answer.
var errOutputClosed = errors.New("the agent closed its stdout")

// editor is the state of one Run. Everything but the inbox and the exit
// status is used by Run's goroutine only.
type editor struct {
	opts   Options
	tr     *Transcript
	cmd    *exec.Cmd
	stdin  *os.File // write end of the agent's stdin
	stdout *os.File // read end of the agent's stdout
	in     *inbox
	exited chan struct{} // closed once the agent has been waited for

	nextID    int
	waiting   string          // the response the editor is waiting for, for error messages
	waitID    json.RawMessage // its request id
	turn      int             // index in tr.Turns of the running turn, -1 outside turns
	cancelled bool            // session/cancel was sent in the running turn
	// turnOf is, with Options.Sessions, each session's running turn (its
	// index in tr.Turns), by sessionId.
	turnOf map[string]int
	terms  terminals // the agent's terminals, in Zed mode
	acp    *acpHost  // the MCP servers hosted over ACP
}

func (e *editor) start() error {
	argv := e.opts.Argv
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = e.opts.Dir
	cmd.Env = e.opts.Env
	cmd.Stderr = e.opts.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	// Wait copies a non-file Stderr; don't let a grandchild holding the
	// pipe block it.
	cmd.WaitDelay = drainGrace

	// Pipes made here rather than by exec.Cmd so that Wait, which closes
	// Cmd-made pipes, can run while output is still being read.
	inR, inW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("starting agent: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return fmt.Errorf("starting agent: %w", err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return fmt.Errorf("starting agent: %w", err)
	}

	e.cmd, e.stdin, e.stdout = cmd, inW, outR
	e.in = newInbox()
	e.exited = make(chan struct{})
	e.turn = -1
	go e.in.read(outR)
	go func() {
		cmd.Wait() // the exit status is read from cmd.ProcessState
		close(e.exited)
		select {
		case <-e.in.done:
		case <-time.After(drainGrace):
			outR.Close() // unblocks the reader
		}
	}()
	return nil
}

// converse runs the session: initialize, session/new, the prompt turns.
func (e *editor) converse(ctx context.Context, cwd string, prompts []string) error {
	init := map[string]any{
		"protocolVersion": 1,
		"clientCapabilities": map[string]any{
			"fs":       map[string]any{"readTextFile": true, "writeTextFile": true},
			"terminal": e.opts.Zed,
		},
	}
	if e.opts.Zed {
		init["clientCapabilities"].(map[string]any)["elicitation"] = map[string]any{"form": map[string]any{}}
		init["clientInfo"] = map[string]any{"name": "zed", "version": "1.0.0"}
	}
	if e.opts.InitializeMeta != nil {
		init["_meta"] = e.opts.InitializeMeta
	}
	var caps agentCaps
	err := e.call(ctx, "initialize", "the initialize response", init, &caps)
	if err != nil {
		return err
	}
	e.acp.offered = caps.AgentCapabilities.MCPCapabilities.ACP
	if len(e.opts.MCPOverACP) > 0 && !e.acp.offered {
		fmt.Fprintf(e.stderr(), "testeditor: the agent does not advertise mcpCapabilities.acp: no MCP server over ACP for it\n")
	}
	if e.opts.Authenticate != nil {
		if err := e.call(ctx, "authenticate", "the authenticate response", e.opts.Authenticate, &struct{}{}); err != nil {
			return err
		}
	}

	if e.opts.Zed {
		return e.converseZed(ctx, cwd, prompts, caps)
	}
	if e.opts.Sessions > 1 {
		return e.converseSessions(ctx, cwd, prompts)
	}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	err = e.call(ctx, "session/new", "the session/new response", map[string]any{
		"cwd":        cwd,
		"mcpServers": e.mcpServers(),
	}, &sess)
	if err != nil {
		return err
	}
	if sess.SessionID == "" {
		return errors.New("session/new: no sessionId in the agent's answer")
	}
	e.tr.SessionID = sess.SessionID

	for i, p := range prompts {
		e.tr.Turns = append(e.tr.Turns, Turn{Prompt: p})
		e.turn, e.cancelled = i, false
		var res struct {
			StopReason string `json:"stopReason"`
		}
		what := fmt.Sprintf("the session/prompt response of turn %d of %d", i+1, len(prompts))
		err := e.call(ctx, "session/prompt", what, map[string]any{
			"sessionId": sess.SessionID,
			"prompt":    []map[string]string{{"type": "text", "text": p}},
		}, &res)
		var re *acp.ResponseError
		if errors.As(err, &re) && re.Code == acp.CodeRequestCancelled && e.cancelled && e.opts.CancelRequest {
			// The answer $/cancel_request asks for.
			res.StopReason, err = "cancelled", nil
		}
		if err != nil {
			return err
		}
		if !stopReasons[res.StopReason] {
			return fmt.Errorf("turn %d: the agent answered stopReason %q", i+1, res.StopReason)
		}
		e.tr.Turns[i].StopReason = res.StopReason
		e.turn = -1
	}
	return nil
}

// converseSessions opens Options.Sessions sessions at once and sends each
// prompt to all of them at once, each turn's answer awaited by its id.
func (e *editor) converseSessions(ctx context.Context, cwd string, prompts []string) error {
	n := e.opts.Sessions
	news := make([]request, n)
	for k := range news {
		news[k] = request{method: "session/new", params: map[string]any{"cwd": cwd, "mcpServers": e.mcpServers()}}
	}
	results, err := e.callAll(ctx, news)
	if err != nil {
		return err
	}
	ids := make([]string, n)
	for k, r := range results {
		var sess struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(r, &sess) != nil || sess.SessionID == "" {
			return fmt.Errorf("session/new #%d: no sessionId in the agent's answer", k+1)
		}
		ids[k] = sess.SessionID
	}
	e.tr.SessionID = ids[0]
	return e.promptAll(ctx, ids, prompts)
}

// promptAll sends each prompt to every session of ids at once, and waits
// for all their answers before the next prompt.
func (e *editor) promptAll(ctx context.Context, ids []string, prompts []string) error {
	n := len(ids)
	e.turnOf = make(map[string]int, n)
	for i, p := range prompts {
		turns := make([]request, n)
		for k, id := range ids {
			text := fmt.Sprintf("%s (session %d)", p, k+1)
			e.turnOf[id] = len(e.tr.Turns)
			e.tr.Turns = append(e.tr.Turns, Turn{Prompt: text})
			turns[k] = request{method: "session/prompt", params: map[string]any{
				"sessionId": id,
				"prompt":    []map[string]string{{"type": "text", "text": text}},
			}}
		}
		results, err := e.callAll(ctx, turns)
		if err != nil {
			return err
		}
		for k, r := range results {
			var res struct {
				StopReason string `json:"stopReason"`
			}
			if json.Unmarshal(r, &res) != nil || !stopReasons[res.StopReason] {
				return fmt.Errorf("turn %d of session %d: the agent answered %s", i+1, k+1, r)
			}
			e.tr.Turns[len(e.tr.Turns)-n+k].StopReason = res.StopReason
		}
	}
	return nil
}

// An answerError is an error response of the agent's to a request of
// method.
type answerError struct {
	method string
	err    *acp.ResponseError
}

func (e *answerError) Error() string {
	return fmt.Sprintf("%s: the agent answered with error %d: %s", e.method, e.err.Code, e.err.Message)
}

func (e *answerError) Unwrap() error { return e.err }

// A request is one of the requests callAll sends.
type request struct {
	method string
	params any
}

// callAll sends reqs back to back and returns their results in the order
// of reqs, once every one is answered, in whatever order the answers
// come; the agent's requests meanwhile are served.
func (e *editor) callAll(ctx context.Context, reqs []request) ([]json.RawMessage, error) {
	byID := make(map[string]int, len(reqs))
	for k, r := range reqs {
		id := e.newID()
		byID[acp.IDKey(id)] = k
		e.waiting, e.waitID = fmt.Sprintf("the %s responses", r.method), id
		line, err := acp.EncodeRequest(id, r.method, r.params)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", r.method, err)
		}
		if err := e.send(line); errors.Is(err, syscall.EPIPE) {
			return nil, errOutputClosed
		} else if err != nil {
			return nil, err
		}
	}
	results := make([]json.RawMessage, len(reqs))
	for left := len(reqs); left > 0; {
		m, err := e.next(ctx)
		if err != nil {
			return nil, err
		}
		k, ok := byID[acp.IDKey(m.ID)]
		if m.Method != "" || m.ID == nil || !ok {
			e.handle(m)
			continue
		}
		if m.Error != nil {
			return nil, &answerError{method: reqs[k].method, err: m.Error}
		}
		results[k] = m.Result
		delete(byID, acp.IDKey(m.ID))
		left--
	}
	return results, nil
}

// stopReasons are the stop reasons ACP defines.
var stopReasons = map[string]bool{
	"end_turn":          true,
	"max_tokens":        true,
	"max_turn_requests": true,
	"refusal":           true,
	"cancelled":         true,
}

// waitingFor describes what the editor is waiting for.
func (e *editor) waitingFor() string {
	if e.turn >= 0 {
		return fmt.Sprintf("%s (id %s; %d session/update notifications so far in the turn)", e.waiting, e.waitID, e.tr.Turns[e.turn].Updates)
	}
	return fmt.Sprintf("%s (id %s)", e.waiting, e.waitID)
}

// call sends a request and handles the agent's messages until its
// response, which it decodes into result.
func (e *editor) call(ctx context.Context, method, what string, params, result any) error {
	id := e.newID()
	e.waiting, e.waitID = what, id
	line, err := acp.EncodeRequest(id, method, params)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", method, err)
	}
	if err := e.send(line); errors.Is(err, syscall.EPIPE) {
		return errOutputClosed // it is gone, as its exit status will tell
	} else if err != nil {
		return err
	}
	for {
		m, err := e.next(ctx)
		if err != nil {
			return err
		}
		if m.Method == "" && m.ID != nil && acp.IDKey(m.ID) == acp.IDKey(id) {
			if m.Error != nil {
				return &answerError{method: method, err: m.Error}
			}
			if err := json.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("%s: decoding the agent's answer: %w", method, err)
			}
			return nil
		}
		e.handle(m)
	}
}

func (e *editor) newID() json.RawMessage {
	if e.opts.StringIDs {
		return json.RawMessage(strconv.Quote(newUUID()))
	}
	id := e.nextID
	e.nextID++
	return json.RawMessage(strconv.Itoa(id))
}

// next returns the next JSON-RPC message from the agent, recording every
// line and skipping those that are not messages.
func (e *editor) next(ctx context.Context) (*acp.Envelope, error) {
	for {
		line, ok := e.in.pop()
		if !ok {
			select {
			case <-e.in.ready:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-e.in.done:
				if line, ok = e.in.pop(); !ok {
					return nil, errOutputClosed
				}
			}
		}
		if m := e.record(line); m != nil {
			return m, nil
		}
	}
}

// record adds a line from the agent to the transcript and returns it as a
// message, or nil if it is blank or not a JSON-RPC message.
func (e *editor) record(line []byte) *acp.Envelope {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	if !json.Valid(line) {
		e.tr.Messages = append(e.tr.Messages, Message{Dir: "recv", Raw: string(line)})
		return nil
	}
	e.tr.Messages = append(e.tr.Messages, Message{Dir: "recv", Msg: json.RawMessage(line)})
	var m acp.Envelope
	if err := json.Unmarshal(line, &m); err != nil {
		return nil // valid JSON, but not an object with members of the envelope's types
	}
	return &m
}

// send writes line, one encoded message, to the agent and records it.
func (e *editor) send(line []byte) error {
	if _, err := e.stdin.Write(line); err != nil {
		return fmt.Errorf("writing to the agent's stdin: %w", err)
	}
	e.tr.Messages = append(e.tr.Messages, Message{Dir: "send", Msg: json.RawMessage(bytes.TrimSuffix(line, []byte("\n")))})
	return nil
}

// handle acts on a message that is not the awaited response.
func (e *editor) handle(m *acp.Envelope) {
	switch {
	case m.Method != "" && m.ID != nil:
		result, rerr := e.serve(m)
		var line []byte
		var err error
		if rerr != nil {
			line, err = acp.EncodeError(m.ID, rerr)
		} else {
			line, err = acp.EncodeResult(m.ID, result)
		}
		// A failed write means the agent is gone; the next read says so.
		if err == nil {
			e.send(line)
		}
	case m.Method == "session/update":
		e.update(m)
	case m.Method == "mcp/message":
		e.acp.notify(m)
	}
}

// update accounts a session/update notification to the running turn, of
// its session with Options.Sessions.
func (e *editor) update(m *acp.Envelope) {
	turn := e.turn
	if e.turnOf != nil {
		var p struct {
			SessionID string `json:"sessionId"`
		}
		json.Unmarshal(m.Params, &p)
		if i, ok := e.turnOf[p.SessionID]; ok {
			turn = i
		}
	}
	if turn < 0 {
		return
	}
	t := &e.tr.Turns[turn]
	t.Updates++
	var p struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
			Content       struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	if json.Unmarshal(m.Params, &p) == nil && p.Update.SessionUpdate == "agent_message_chunk" {
		t.Chunks++
		if p.Update.Content.Type == "text" {
			t.Text += p.Update.Content.Text
		}
	}
	byUpdates := e.opts.CancelAfter > 0 && t.Updates >= e.opts.CancelAfter
	byText := e.opts.CancelAfterText > 0 && t.Chunks >= e.opts.CancelAfterText
	if e.turn == 0 && !e.cancelled && (byUpdates || byText) {
		e.cancelled = true
		method, params := "session/cancel", map[string]any{"sessionId": e.tr.SessionID}
		if e.opts.CancelRequest {
			method, params = "$/cancel_request", map[string]any{"requestId": e.waitID}
		}
		if line, err := acp.EncodeNotification(method, params); err == nil {
			e.send(line)
		}
	}
}

// serve answers a request from the agent.
func (e *editor) serve(m *acp.Envelope) (any, *acp.ResponseError) {
	if len(e.acp.servers) > 0 {
		if result, rerr, ok := e.acp.serve(m); ok {
			return result, rerr
		}
	}
	switch m.Method {
	case "session/request_permission":
		return e.permission(m)
	case "fs/read_text_file":
		return readTextFile(m)
	case "fs/write_text_file":
		return writeTextFile(m)
	case "terminal/create", "terminal/output", "terminal/wait_for_exit", "terminal/release", "terminal/kill":
		if e.opts.Zed {
			return e.serveTerminal(m)
		}
	case "elicitation/create":
		if e.opts.Zed {
			return elicit(m)
		}
	}
	return nil, &acp.ResponseError{Code: acp.CodeMethodNotFound, Message: "method not found: " + m.Method}
}

func invalidParams(m *acp.Envelope, err error) *acp.ResponseError {
	return &acp.ResponseError{Code: acp.CodeInvalidParams, Message: fmt.Sprintf("invalid params for %s: %v", m.Method, err)}
}

func (e *editor) permission(m *acp.Envelope) (any, *acp.ResponseError) {
	var p struct {
		Options []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, invalidParams(m, err)
	}
	if e.cancelled {
		// ACP: once the editor cancels a turn it answers pending and
		// later permission requests with "cancelled".
		return map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}, nil
	}
	kinds := []string{"allow_once", "allow_always"}
	if e.opts.Reject {
		kinds = []string{"reject_once", "reject_always"}
	}
	for _, k := range kinds {
		for _, o := range p.Options {
			if o.Kind == k {
				return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": o.OptionID}}, nil
			}
		}
	}
	return nil, invalidParams(m, fmt.Errorf("no option of kind %s or %s", kinds[0], kinds[1]))
}

func readTextFile(m *acp.Envelope) (any, *acp.ResponseError) {
	var p struct {
		Path  string `json:"path"`
		Line  *int   `json:"line"`  // 1-based first line
		Limit *int   `json:"limit"` // most lines to return
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, invalidParams(m, err)
	}
	if !filepath.IsAbs(p.Path) {
		return nil, invalidParams(m, fmt.Errorf("path %q is not absolute", p.Path))
	}
	b, err := os.ReadFile(p.Path)
	if err != nil {
		return nil, fileError(err)
	}
	content := string(b)
	if p.Line != nil || p.Limit != nil {
		lines := strings.SplitAfter(content, "\n")
		start := 0
		if p.Line != nil {
			start = min(max(*p.Line-1, 0), len(lines))
		}
		end := len(lines)
		if p.Limit != nil {
			end = min(start+max(*p.Limit, 0), len(lines))
		}
		content = strings.Join(lines[start:end], "")
	}
	return map[string]any{"content": content}, nil
}

func writeTextFile(m *acp.Envelope) (any, *acp.ResponseError) {
	var p struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, invalidParams(m, err)
	}
	if !filepath.IsAbs(p.Path) {
		return nil, invalidParams(m, fmt.Errorf("path %q is not absolute", p.Path))
	}
	if err := os.WriteFile(p.Path, []byte(p.Content), 0o644); err != nil {
		return nil, fileError(err)
	}
	return map[string]any{}, nil
}

// fileError is the JSON-RPC error for a failed file operation.
func fileError(err error) *acp.ResponseError {
	if errors.Is(err, fs.ErrNotExist) {
		return &acp.ResponseError{Code: acp.CodeResourceNotFound, Message: err.Error()}
	}
	return &acp.ResponseError{Code: acp.CodeInternalError, Message: err.Error()}
}

// shutdown closes the agent's stdin and waits for it to exit, sending
// SIGTERM and then SIGKILL each after wait, while still handling its
// messages; then it reads what remains of its output.
func (e *editor) shutdown(wait, termWait time.Duration) {
	e.turn = -1
	e.stdin.Close()
	if !e.pumpUntil(e.exited, wait) {
		e.tr.Signal = "SIGTERM"
		e.cmd.Process.Signal(syscall.SIGTERM)
		if !e.pumpUntil(e.exited, termWait) {
			e.tr.Signal = "SIGKILL"
			e.cmd.Process.Kill()
			e.pumpUntil(e.exited, -1)
		}
	}
	e.pumpUntil(e.in.done, -1) // bounded by drainGrace, see start
	for line, ok := e.in.pop(); ok; line, ok = e.in.pop() {
		if m := e.record(line); m != nil {
			e.handle(m)
		}
	}
	e.stdout.Close()
	e.tr.ExitCode = exitStatus(e.cmd.ProcessState)
}

// pumpUntil handles the agent's messages until stop is closed (true) or,
// unless wait is negative, wait has passed (false).
func (e *editor) pumpUntil(stop <-chan struct{}, wait time.Duration) bool {
	var timeout <-chan time.Time
	if wait >= 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		if line, ok := e.in.pop(); ok {
			if m := e.record(line); m != nil {
				e.handle(m)
			}
			continue
		}
		select {
		case <-stop:
			return true
		case <-e.in.ready:
		case <-timeout:
			return false
		}
	}
}

// exitStatus is the process's exit code, or 128+n if signal n killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// inbox queues the agent's output lines for Run's goroutine without bound,
// so that reading the agent never waits for the editor: an agent blocked
// on a full stdout while the editor writes to its full stdin would
// deadlock both.
type inbox struct {
	mu    sync.Mutex // guards lines
	lines [][]byte
	ready chan struct{} // capacity 1; signalled after each push
	done  chan struct{} // closed when reading has stopped, after the last push
}

func newInbox() *inbox {
	return &inbox{ready: make(chan struct{}, 1), done: make(chan struct{})}
}

// read reads lines (without their "\n" or "\r\n") until r fails or ends.
func (in *inbox) read(r io.Reader) {
	defer close(in.done)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			in.mu.Lock()
			in.lines = append(in.lines, line)
			in.mu.Unlock()
			select {
			case in.ready <- struct{}{}:
			default:
			}
		}
		if err != nil {
			return
		}
	}
}

func (in *inbox) pop() ([]byte, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.lines) == 0 {
		return nil, false
	}
	line := in.lines[0]
	in.lines[0] = nil
	in.lines = in.lines[1:]
	return line, true
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// mcpServers returns the mcpServers of session/new and session/load:
// Options.MCPServers, then the servers hosted over ACP.
func (e *editor) mcpServers() any {
	hosted := e.acp.entries()
	if hosted == nil {
		if e.opts.MCPServers == nil {
			return []any{}
		}
		return e.opts.MCPServers
	}
	var servers []any
	if e.opts.MCPServers != nil {
		if err := json.Unmarshal(e.opts.MCPServers, &servers); err != nil {
			// Not an array: sent as it is, as without hosted servers,
			// for the agent to refuse.
			return e.opts.MCPServers
		}
	}
	return append(servers, hosted...)
}

// stderr is where the editor's notes go: Options.Stderr, else os.Stderr.
func (e *editor) stderr() io.Writer {
	if e.opts.Stderr != nil {
		return e.opts.Stderr
	}
	return os.Stderr
}

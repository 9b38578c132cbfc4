package driver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/internal/testing/testagent"
	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/replay/driver"
	"github.com/acptap/acptap/stdiotap"
)

// agentEnv, set to 1, makes the test binary run testagent.Main instead of
// the tests, so that the tests can start the agent as a real process.
// With muteEnv set to N as well, the agent's stdout passes only its first
// N lines: an agent that stops answering.
const (
	agentEnv = "DRIVER_TEST_AGENT"
	muteEnv  = "DRIVER_TEST_MUTE_AFTER"
)

func TestMain(m *testing.M) {
	if os.Getenv(agentEnv) == "1" {
		var stdout io.Writer = os.Stdout
		if n, err := strconv.Atoi(os.Getenv(muteEnv)); err == nil {
			stdout = &muted{w: os.Stdout, left: n}
		}
		os.Exit(testagent.Main(os.Args[1:], os.Stdin, stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

// muted passes the first left lines to w and drops the rest. The test
// agent writes each line with one Write.
type muted struct {
	mu   sync.Mutex // guards left
	w    io.Writer
	left int
}

func (m *muted) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.left <= 0 {
		return len(p), nil
	}
	m.left -= bytes.Count(p, []byte("\n"))
	return m.w.Write(p)
}

// agentEnviron is the agent's environment: this process's in the scripted
// mode, plus extra.
func agentEnviron(extra ...string) []string {
	return testkit.ChildEnv(append([]string{agentEnv + "=1"}, extra...)...)
}

// hangGuard bounds a test's wait for a process that went wrong.
const hangGuard = 2 * time.Minute

// record runs the test agent with args under the scripted editor and
// returns the session's frames, as acptap record would have them.
func record(t *testing.T, opts testeditor.Options, args ...string) ([]lane.Line, *testeditor.Transcript) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	opts.Argv = testkit.SelfArgv(t, args...)
	opts.Env = agentEnviron()
	var stderr testkit.SyncBuffer
	opts.Stderr = &stderr
	tr, err := testeditor.Run(ctx, opts)
	if err != nil {
		t.Fatalf("recording: %v\nagent stderr:\n%s", err, stderr.String())
	}
	var frames []lane.Line
	for _, m := range tr.Messages {
		f := lane.Line{Lane: lane.Agent, Data: []byte(m.Raw)}
		if m.Dir == "send" {
			f.Lane = lane.Editor
		}
		if m.Msg != nil {
			f.Data = slices.Clone(m.Msg)
		}
		frames = append(frames, f)
	}
	return frames, tr
}

// replay starts the test agent with args over stdiotap and drives it with
// d, then closes its stdin and waits for it to exit.
func replay(t *testing.T, d *driver.Driver, env []string, args ...string) (driver.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	lines := make(chan []byte)
	pr, pw := io.Pipe()
	var stderr testkit.SyncBuffer
	sess, err := stdiotap.Start(stdiotap.Config{
		Argv:   testkit.SelfArgv(t, args...),
		Env:    env,
		Stdin:  pr,
		Stdout: io.Discard,
		Stderr: &stderr,
		Grace:  10 * time.Second,
		OnLine: func(l stdiotap.Line) {
			if l.Stream == stdiotap.Stdout {
				lines <- l.Data
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		sess.Wait()
		close(lines)
	}()
	res, runErr := d.Run(ctx, pw, lines)
	pw.Close()
	for range lines {
	}
	if _, err := sess.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent stderr:\n%s", stderr.String())
		}
	})
	return res, runErr
}

// lines returns the data of the frames of lane l.
func lines(frames []lane.Line, l lane.Lane) [][]byte {
	var out [][]byte
	for _, f := range frames {
		if f.Lane == l {
			out = append(out, f.Data)
		}
	}
	return out
}

// shape describes lines by what they are, leaving out what varies from
// run to run: ids, texts.
func shape(lines [][]byte) []string {
	var out []string
	for _, l := range lines {
		m := acp.Parse(l)
		switch m.Kind {
		case acp.Request:
			out = append(out, "request "+m.Method)
		case acp.Notification:
			out = append(out, strings.TrimSpace(m.Method+" "+m.UpdateKind))
		case acp.Response:
			var r struct {
				StopReason string `json:"stopReason"`
				Outcome    struct {
					Outcome string `json:"outcome"`
				} `json:"outcome"`
			}
			json.Unmarshal(m.Result, &r)
			out = append(out, strings.TrimSpace("response "+r.StopReason+" "+r.Outcome.Outcome))
		case acp.Error:
			out = append(out, fmt.Sprintf("error %d", m.ErrorCode))
		default:
			out = append(out, "junk")
		}
	}
	return out
}

// msg is a decoded JSON-RPC message.
type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params map[string]any  `json:"params"`
	Result map[string]any  `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decode(t *testing.T, line []byte) msg {
	t.Helper()
	var m msg
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return m
}

// sessionIDs returns the sessionId of each session/new response in
// lines.
func sessionIDs(t *testing.T, lines [][]byte) []string {
	t.Helper()
	var ids []string
	for _, l := range lines {
		if m := acp.Parse(l); m.Kind == acp.Response {
			if s, ok := decode(t, l).Result["sessionId"].(string); ok {
				ids = append(ids, s)
			}
		}
	}
	return ids
}

// workspace returns a temporary directory holding notes.txt.
func workspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello file\nsecond line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReplay(t *testing.T) {
	tests := []struct {
		name              string
		recArgs, liveArgs []string
		editorStringIDs   bool
		runs              int
	}{
		{"numeric ids", nil, nil, false, 5},
		{"string ids", []string{"--string-ids"}, []string{"--string-ids"}, true, 20},
		{"numeric recorded, string live", nil, []string{"--string-ids"}, false, 5},
		{"string recorded, numeric live", []string{"--string-ids"}, nil, true, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recWS := workspace(t)
			common := []string{"--read", "notes.txt", "--junk"}
			frames, tr := record(t, testeditor.Options{
				Cwd:       recWS,
				Prompts:   []string{"one", "two"},
				StringIDs: tt.editorStringIDs,
			}, append(common, tt.recArgs...)...)
			if len(tr.Turns) != 2 || tr.Turns[1].StopReason != "end_turn" {
				t.Fatalf("recorded turns = %+v, want two ended turns", tr.Turns)
			}
			for i := range tt.runs {
				liveWS := t.TempDir() // empty: the editor's answers are recorded
				d := driver.New(driver.Options{Recorded: frames, PathMap: map[string]string{recWS: liveWS}})
				reps := 1
				if i == 0 {
					reps = 2 // a Driver is reusable
				}
				for range reps {
					res, err := replay(t, d, agentEnviron(), append(common, tt.liveArgs...)...)
					if err != nil {
						t.Fatalf("run %d: %v", i, err)
					}
					checkReplay(t, frames, res, recWS, liveWS)
					if t.Failed() {
						t.Fatalf("run %d failed", i)
					}
				}
			}
		})
	}
}

// checkReplay checks a replay of a two-turn session with a permission
// request and a file read.
func checkReplay(t *testing.T, frames []lane.Line, res driver.Result, recWS, liveWS string) {
	t.Helper()
	recAgent, recEditor := lines(frames, lane.Agent), lines(frames, lane.Editor)
	if got, want := shape(res.Live), shape(recAgent); !reflect.DeepEqual(got, want) {
		t.Errorf("live agent output:\n%s\nwant the shape of the recorded:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, want := shape(res.Sent), shape(recEditor); !reflect.DeepEqual(got, want) {
		t.Errorf("sent:\n%s\nwant the shape of the recorded:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The agent minted a new sessionId and got it back in each prompt:
	// the prompts' responses above were not errors.
	recIDs, liveIDs := sessionIDs(t, recAgent), sessionIDs(t, res.Live)
	if len(recIDs) != 1 || len(liveIDs) != 1 || recIDs[0] == liveIDs[0] {
		t.Fatalf("session ids: recorded %q, live %q; want one each, different", recIDs, liveIDs)
	}
	prompts := 0
	for _, l := range res.Sent {
		m := decode(t, l)
		switch m.Method {
		case "session/new":
			if m.Params["cwd"] != liveWS {
				t.Errorf("session/new cwd = %v, want %q (mapped from %q)", m.Params["cwd"], liveWS, recWS)
			}
		case "session/prompt":
			prompts++
			if m.Params["sessionId"] != liveIDs[0] {
				t.Errorf("session/prompt sessionId = %v, want the live %q", m.Params["sessionId"], liveIDs[0])
			}
		}
	}
	if prompts != 2 {
		t.Errorf("sent %d prompts, want 2", prompts)
	}

	// Each agent request got the recorded answer under its own id.
	answers := make(map[string]msg)
	for _, l := range res.Sent {
		if m := acp.Parse(l); m.Kind == acp.Response {
			answers[acp.IDKey(m.ID)] = decode(t, l)
		}
	}
	reads := 0
	for _, l := range res.Live {
		m := acp.Parse(l)
		if m.Kind != acp.Request {
			continue
		}
		a, ok := answers[acp.IDKey(m.ID)]
		if !ok {
			t.Errorf("agent request %s id=%s got no answer", m.Method, m.ID)
			continue
		}
		req := decode(t, l)
		switch m.Method {
		case "session/request_permission":
			if got := a.Result["outcome"]; !reflect.DeepEqual(got, map[string]any{"outcome": "selected", "optionId": "allow"}) {
				t.Errorf("permission answer = %v, want allow", got)
			}
		case "fs/read_text_file":
			reads++
			if want := filepath.Join(liveWS, "notes.txt"); req.Params["path"] != want {
				t.Errorf("fs/read_text_file path = %v, want %q", req.Params["path"], want)
			}
			if got, want := a.Result["content"], "hello file\nsecond line\n"; got != want {
				t.Errorf("fs/read_text_file answer content = %q, want the recorded %q", got, want)
			}
		default:
			t.Errorf("unexpected agent request %s", m.Method)
		}
	}
	if reads != 2 {
		t.Errorf("agent made %d fs/read_text_file requests, want 2", reads)
	}
}

// TestReplayRemapsIDs checks that answers carry the live ids, not the
// recorded ones, when the two differ.
func TestReplayRemapsIDs(t *testing.T) {
	ws := workspace(t)
	frames, _ := record(t, testeditor.Options{Cwd: ws, Prompts: []string{"one"}}, "--read", "notes.txt")
	recIDs := make(map[string]bool)
	for _, l := range lines(frames, lane.Agent) {
		if m := acp.Parse(l); m.Kind == acp.Request {
			recIDs[acp.IDKey(m.ID)] = true
		}
	}
	if !reflect.DeepEqual(recIDs, map[string]bool{"0": true, "1": true}) {
		t.Fatalf("recorded agent request ids = %v, want 0 and 1", recIDs)
	}
	d := driver.New(driver.Options{Recorded: frames})
	res, err := replay(t, d, agentEnviron(), "--read", "notes.txt", "--string-ids")
	if err != nil {
		t.Fatal(err)
	}
	var liveIDs, answered []string
	for _, l := range res.Live {
		if m := acp.Parse(l); m.Kind == acp.Request {
			liveIDs = append(liveIDs, acp.IDKey(m.ID))
		}
	}
	for _, l := range res.Sent {
		if m := acp.Parse(l); m.Kind == acp.Response {
			answered = append(answered, acp.IDKey(m.ID))
		}
	}
	if len(liveIDs) != 2 || !reflect.DeepEqual(answered, liveIDs) {
		t.Errorf("answered ids %q, want the live request ids %q", answered, liveIDs)
	}
	for _, id := range liveIDs {
		if recIDs[id] || !strings.HasPrefix(id, `"`) {
			t.Errorf("live request id %s, want a fresh UUID string", id)
		}
	}
}

// TestReplayRemapsIDsBeyondFloat64 checks that two recorded agent request
// ids a float64 cannot tell apart, 2^53 and 2^53+1, stay two requests,
// each paired with its own recorded answer, which is sent under the id of
// the live request.
func TestReplayRemapsIDsBeyondFloat64(t *testing.T) {
	recorded := []lane.Line{
		{Lane: lane.Editor, Data: []byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)},
		{Lane: lane.Agent, Data: []byte(`{"jsonrpc":"2.0","id":9007199254740992,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/a"}}`)},
		{Lane: lane.Agent, Data: []byte(`{"jsonrpc":"2.0","id":9007199254740993,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/b"}}`)},
		{Lane: lane.Editor, Data: []byte(`{"jsonrpc":"2.0","id":9007199254740992,"result":{"content":"a"}}`)},
		{Lane: lane.Editor, Data: []byte(`{"jsonrpc":"2.0","id":9007199254740993,"result":{"content":"b"}}`)},
		{Lane: lane.Agent, Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)},
	}
	// The live agent numbers its requests the other way round.
	live := make(chan []byte, 3)
	live <- []byte(`{"jsonrpc":"2.0","id":9007199254740993,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/a"}}`)
	live <- []byte(`{"jsonrpc":"2.0","id":9007199254740992,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/b"}}`)
	live <- []byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	res, err := driver.New(driver.Options{Recorded: recorded}).Run(ctx, io.Discard, live)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		string(recorded[0].Data),
		`{"jsonrpc":"2.0","id":9007199254740993,"result":{"content":"a"}}`,
		`{"jsonrpc":"2.0","id":9007199254740992,"result":{"content":"b"}}`,
	}
	var got []string
	for _, l := range res.Sent {
		got = append(got, string(l))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sent:\n%s\nwant each answer under its live request's id:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// turns returns, for each editor prompt in sent, the agent's message text
// and stop reason in live.
func turns(t *testing.T, sent, live [][]byte) (texts, reasons []string) {
	t.Helper()
	var ids []string
	for _, l := range sent {
		if m := acp.Parse(l); m.Kind == acp.Request && m.Method == "session/prompt" {
			ids = append(ids, acp.IDKey(m.ID))
		}
	}
	texts, reasons = make([]string, len(ids)), make([]string, len(ids))
	cur := 0
	for _, l := range live {
		m := acp.Parse(l)
		switch {
		case m.UpdateKind == "agent_message_chunk" && cur < len(ids):
			content, _ := decode(t, l).Params["update"].(map[string]any)["content"].(map[string]any)
			text, _ := content["text"].(string)
			texts[cur] += text
		case m.Kind == acp.Response && cur < len(ids) && acp.IDKey(m.ID) == ids[cur]:
			reasons[cur], _ = decode(t, l).Result["stopReason"].(string)
			cur++
		}
	}
	return texts, reasons
}

func TestReplayCancel(t *testing.T) {
	args := []string{"--chunk-size", "4", "--chunk-delay", "200ms"}
	frames, tr := record(t, testeditor.Options{
		Cwd:         t.TempDir(),
		Prompts:     []string{"count slowly to ten please", "ok"},
		CancelAfter: 2,
	}, args...)
	if len(tr.Turns) != 2 || tr.Turns[0].StopReason != "cancelled" {
		t.Fatalf("recorded turns = %+v, want the first cancelled", tr.Turns)
	}
	// The text the agent had sent when the editor cancelled.
	var before string
	for _, f := range frames {
		m := acp.Parse(f.Data)
		if m.Method == "session/cancel" {
			break
		}
		if m.UpdateKind == "agent_message_chunk" {
			before += decode(t, f.Data).Params["update"].(map[string]any)["content"].(map[string]any)["text"].(string)
		}
	}
	if before != "You said" {
		t.Fatalf("recorded text before the cancel = %q, want two chunks", before)
	}

	d := driver.New(driver.Options{Recorded: frames})
	res, err := replay(t, d, agentEnviron(), args...)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := shape(res.Sent), shape(lines(frames, lane.Editor)); !reflect.DeepEqual(got, want) {
		t.Errorf("sent %q, want %q", got, want)
	}
	texts, reasons := turns(t, res.Sent, res.Live)
	if want := []string{"cancelled", "end_turn"}; !reflect.DeepEqual(reasons, want) {
		t.Errorf("live stop reasons = %q, want %q", reasons, want)
	}
	// Sent too early, the cancel would have cut the turn after its first
	// chunk; the driver waited for as much text as was recorded.
	if !strings.HasPrefix(texts[0], before) || len(texts[0]) >= len("You said: count slowly to ten please") {
		t.Errorf("live text of the cancelled turn = %q, want %q and more, but not all", texts[0], before)
	}
}

func TestReplayChangedAgent(t *testing.T) {
	ws := workspace(t)
	frames, _ := record(t, testeditor.Options{Cwd: ws, Prompts: []string{"one", "two"}}, "--read", "notes.txt")
	d := driver.New(driver.Options{Recorded: frames})
	res, err := replay(t, d, agentEnviron(), "--read", "notes.txt", "--message", "Something else entirely, and longer too.")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(res.Sent), len(lines(frames, lane.Editor)); got != want {
		t.Errorf("sent %d lines, want all %d", got, want)
	}
	texts, reasons := turns(t, res.Sent, res.Live)
	want := "Something else entirely, and longer too."
	if !reflect.DeepEqual(texts, []string{want, want}) || !reflect.DeepEqual(reasons, []string{"end_turn", "end_turn"}) {
		t.Errorf("live turns = %q %q, want the changed text twice, ended", texts, reasons)
	}
}

// frameIndex returns the index of the n-th (from 1) editor frame of
// method.
func frameIndex(t *testing.T, frames []lane.Line, method string, n int) int {
	t.Helper()
	for i, f := range frames {
		if f.Lane == lane.Editor && acp.Parse(f.Data).Method == method {
			if n--; n == 0 {
				return i
			}
		}
	}
	t.Fatalf("no %s frame in the recording", method)
	return -1
}

func TestReplayAgentStopsAnswering(t *testing.T) {
	frames, _ := record(t, testeditor.Options{Cwd: t.TempDir(), Prompts: []string{"one", "two"}})
	d := driver.New(driver.Options{Recorded: frames, Timeout: 300 * time.Millisecond})
	// The agent answers initialize and session/new, then falls silent.
	res, err := replay(t, d, agentEnviron(muteEnv+"=2"))
	var we *driver.WaitError
	if !errors.As(err, &we) || !errors.Is(err, driver.ErrTimeout) {
		t.Fatalf("Run error = %v, want a *WaitError wrapping ErrTimeout", err)
	}
	second := frameIndex(t, frames, "session/prompt", 2)
	want := fmt.Sprintf("frame %d (session/prompt id=3) waited 300ms for: the response to editor request id=2 (session/prompt)", second)
	if we.Frame != second || err.Error() != want {
		t.Errorf("Run error = %q (frame %d), want %q", err, we.Frame, want)
	}
	if got := shape(res.Sent); !reflect.DeepEqual(got, []string{"request initialize", "request session/new", "request session/prompt"}) {
		t.Errorf("sent %q, want up to the first prompt", got)
	}

	// Options.FrameName names the frame as the caller numbers it.
	d = driver.New(driver.Options{Recorded: frames, Timeout: 300 * time.Millisecond, FrameName: func(i int) string { return fmt.Sprintf("frame #%d", 100+i) }})
	_, err = replay(t, d, agentEnviron(muteEnv+"=2"))
	want = fmt.Sprintf("frame #%d (session/prompt id=3) waited 300ms for: the response to editor request id=2 (session/prompt)", 100+second)
	if !errors.As(err, &we) || we.Frame != second || err.Error() != want {
		t.Errorf("with FrameName: Run error = %q, want %q", err, want)
	}
}

func TestReplayCancelWaitsForUpdates(t *testing.T) {
	args := []string{"--chunk-size", "4", "--chunk-delay", "200ms"}
	frames, _ := record(t, testeditor.Options{
		Cwd:         t.TempDir(),
		Prompts:     []string{"count slowly to ten please"},
		CancelAfter: 2,
	}, args...)
	d := driver.New(driver.Options{Recorded: frames, Timeout: 300 * time.Millisecond})
	// The agent's first chunk comes through, then nothing.
	_, err := replay(t, d, agentEnviron(muteEnv+"=3"), args...)
	var we *driver.WaitError
	if !errors.As(err, &we) || !errors.Is(err, driver.ErrTimeout) {
		t.Fatalf("Run error = %v, want a *WaitError wrapping ErrTimeout", err)
	}
	want := []string{"4 more bytes of session/update (agent_message_chunk) text"}
	if cancel := frameIndex(t, frames, "session/cancel", 1); we.Frame != cancel || !reflect.DeepEqual(we.Missing, want) {
		t.Errorf("WaitError at frame %d missing %q, want frame %d (the cancel) missing %q", we.Frame, we.Missing, cancel, want)
	}
	if !strings.Contains(err.Error(), "(session/cancel)") {
		t.Errorf("Run error = %q, want it to name the session/cancel", err)
	}
}

func TestReplayAgentExits(t *testing.T) {
	frames, _ := record(t, testeditor.Options{Cwd: t.TempDir()})
	d := driver.New(driver.Options{Recorded: frames})
	_, err := replay(t, d, agentEnviron(), "--exit", "3")
	var we *driver.WaitError
	if !errors.As(err, &we) || !errors.Is(err, driver.ErrOutputClosed) {
		t.Fatalf("Run error = %v, want a *WaitError wrapping ErrOutputClosed", err)
	}
}

func TestReplayContextEnds(t *testing.T) {
	frames, _ := record(t, testeditor.Options{Cwd: t.TempDir()})
	d := driver.New(driver.Options{Recorded: frames})
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stopped by the test")
	cancel(stop)
	// Nothing comes from this agent: only the context can end the wait.
	_, err := d.Run(ctx, io.Discard, make(chan []byte))
	var we *driver.WaitError
	if !errors.As(err, &we) || !errors.Is(err, stop) {
		t.Fatalf("Run error = %v, want a *WaitError wrapping the context's cause", err)
	}
}

func TestReplayUnrecordedRequest(t *testing.T) {
	ws := workspace(t)
	frames, _ := record(t, testeditor.Options{Cwd: ws, Prompts: []string{"one"}})
	d := driver.New(driver.Options{Recorded: frames})
	// This agent reads a file the recorded one never asked for.
	res, err := replay(t, d, agentEnviron(), "--read", "notes.txt", "--no-permission")
	checkMismatch(t, res, err, driver.MismatchError{Method: "fs/read_text_file", N: 1, Recorded: 0}, len(lines(frames, lane.Editor)))
}

func TestReplayMoreRequestsThanRecorded(t *testing.T) {
	ws := workspace(t)
	frames, _ := record(t, testeditor.Options{Cwd: ws, Prompts: []string{"one", "two"}}, "--read", "notes.txt")
	// Drop the second fs/read_text_file request and its answer.
	var id string
	n := 0
	frames = slices.DeleteFunc(frames, func(f lane.Line) bool {
		m := acp.Parse(f.Data)
		if m.Method == "fs/read_text_file" {
			if n++; n == 2 {
				id = acp.IDKey(m.ID)
				return true
			}
		}
		return f.Lane == lane.Editor && m.Kind == acp.Response && acp.IDKey(m.ID) == id
	})
	if id == "" {
		t.Fatal("the recording has no second fs/read_text_file request")
	}
	d := driver.New(driver.Options{Recorded: frames})
	res, err := replay(t, d, agentEnviron(), "--read", "notes.txt")
	checkMismatch(t, res, err, driver.MismatchError{Method: "fs/read_text_file", N: 2, Recorded: 1}, len(lines(frames, lane.Editor)))
}

// checkMismatch checks a Run that ended with the one mismatch want, after
// sending all editor frames and an error response.
func checkMismatch(t *testing.T, res driver.Result, err error, want driver.MismatchError, editorFrames int) {
	t.Helper()
	var me *driver.MismatchError
	if !errors.As(err, &me) || *me != want {
		t.Fatalf("Run error = %v, want the *MismatchError %+v", err, want)
	}
	if err.Error() != me.Error() {
		t.Errorf("Run error = %q, want only the mismatch", err)
	}
	if len(res.Sent) != editorFrames+1 {
		t.Errorf("sent %d lines, want the %d recorded and an error response", len(res.Sent), editorFrames)
	}
	// The agent's request got an error response under its id, and the
	// agent reported the failed read.
	var reqID string
	for _, l := range res.Live {
		if m := acp.Parse(l); m.Kind == acp.Request && m.Method == want.Method {
			reqID = acp.IDKey(m.ID)
		}
	}
	wantMsg := fmt.Sprintf("acptap replay: no recorded answer for %s #%d", want.Method, want.N)
	found := false
	for _, l := range res.Sent {
		m := acp.Parse(l)
		if m.Kind == acp.Error && acp.IDKey(m.ID) == reqID {
			found = true
			if m.ErrorCode != -32603 || m.ErrorMessage != wantMsg {
				t.Errorf("error response %s, want code -32603 and %q", l, wantMsg)
			}
		}
	}
	if !found {
		t.Errorf("no error response to the agent's request id=%s in %q", reqID, res.Sent)
	}
	failed := false
	for _, l := range res.Live {
		if bytes.Contains(l, []byte(`"status":"failed"`)) && bytes.Contains(l, []byte(wantMsg)) {
			failed = true
		}
	}
	if !failed {
		t.Errorf("the agent did not report the failed read: %q", res.Live)
	}
}

func TestReplayJunk(t *testing.T) {
	frames, _ := record(t, testeditor.Options{Cwd: t.TempDir()}, "--junk")
	junk := []byte("editor banner \xff (not JSON)")
	at := frameIndex(t, frames, "initialize", 1) + 1
	frames = slices.Insert(frames, at, lane.Line{Lane: lane.Editor, Data: junk})
	d := driver.New(driver.Options{Recorded: frames})
	res, err := replay(t, d, agentEnviron(), "--junk")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sent) < 2 || !bytes.Equal(res.Sent[1], junk) {
		t.Errorf("sent %q, want the junk line second, as recorded", res.Sent)
	}
	if len(res.Live) == 0 || acp.Parse(res.Live[0]).Kind != acp.Junk {
		t.Errorf("live %q, want the agent's junk line first", res.Live)
	}
}

// TestReplayCancelStateRace replays a cancelled turn whose recording has an
// available_commands_update, sent by the agent right after its session/new
// answer, after the editor's session/prompt: it raced the prompt. The live
// agent sends it before the prompt. The cancel must wait for the turn's
// message text only, never for the state notification, and cut the turn
// as the recorded one did.
func TestReplayCancelStateRace(t *testing.T) {
	args := []string{"--chunk-size", "4", "--chunk-delay", "200ms", "--concurrent-updates", "early"}
	frames, tr := record(t, testeditor.Options{
		Cwd:         t.TempDir(),
		Prompts:     []string{"count slowly to ten please", "ok"},
		CancelAfter: 2,
	}, args...)
	if len(tr.Turns) != 2 || tr.Turns[0].StopReason != "cancelled" {
		t.Fatalf("recorded turns = %+v, want the first cancelled", tr.Turns)
	}
	commands := slices.IndexFunc(frames, func(f lane.Line) bool {
		return acp.Parse(f.Data).UpdateKind == "available_commands_update"
	})
	if commands < 0 || commands > frameIndex(t, frames, "session/prompt", 1) {
		t.Fatalf("the recording has no available_commands_update before the first prompt")
	}
	commandsFrame := frames[commands]
	frames = slices.Delete(frames, commands, commands+1)
	frames = slices.Insert(frames, frameIndex(t, frames, "session/prompt", 1)+1, commandsFrame)

	d := driver.New(driver.Options{Recorded: frames, Timeout: time.Minute})
	res, err := replay(t, d, agentEnviron(), args...)
	if err != nil {
		t.Fatal(err)
	}
	texts, reasons := turns(t, res.Sent, res.Live)
	if want := []string{"cancelled", "end_turn"}; !reflect.DeepEqual(reasons, want) {
		t.Errorf("live stop reasons = %q, want %q: the cancel waited for the state notification", reasons, want)
	}
	if !strings.HasPrefix(texts[0], "You said") {
		t.Errorf("live text of the cancelled turn = %q, want the recorded two chunks and maybe more", texts[0])
	}
}

// TestReplayLingersForLastStates: the recording's editor stayed open after
// the last turn and got a state notification the agent sends from a
// background task; the replay waits for it (Options.Linger) before it
// ends, and ends without error when it does not come, or the agent's
// output ends.
func TestReplayLingersForLastStates(t *testing.T) {
	recorded := []lane.Line{
		{Lane: lane.Editor, Data: []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)},
		{Lane: lane.Agent, Data: []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)},
		{Lane: lane.Agent, Data: []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}`)},
	}
	answer := []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)
	state := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}`)
	for _, tc := range []struct {
		name     string
		after    time.Duration // when the live agent sends the state; negative: never
		close    bool          // the agent's output ends instead
		received int
		atLeast  time.Duration
	}{
		{"state a moment later", 300 * time.Millisecond, false, 2, 300 * time.Millisecond},
		{"state never", -1, false, 1, time.Second},
		{"output ends", -1, true, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := driver.New(driver.Options{Recorded: recorded, Linger: time.Second, Timeout: 10 * time.Second})
			from := make(chan []byte, 4)
			pr, pw := io.Pipe()
			go func() {
				br := bufio.NewReader(pr)
				if _, err := br.ReadBytes('\n'); err != nil {
					return
				}
				from <- answer
				switch {
				case tc.close:
					close(from)
				case tc.after >= 0:
					time.Sleep(tc.after)
					from <- state
				}
				io.Copy(io.Discard, br)
			}()
			start := time.Now()
			res, err := d.Run(context.Background(), pw, from)
			took := time.Since(start)
			pw.Close()
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Received != tc.received {
				t.Errorf("received %d lines, want %d", res.Received, tc.received)
			}
			if took < tc.atLeast || took > tc.atLeast+2*time.Second {
				t.Errorf("Run took %v, want about %v", took, tc.atLeast)
			}
		})
	}
}

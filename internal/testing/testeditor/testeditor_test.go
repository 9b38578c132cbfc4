package testeditor_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/testagent"
	"github.com/acptap/acptap/internal/testing/testeditor"
)

// agentEnv, set to 1, makes the test binary run testagent.Main instead of
// the tests, so that the tests can start the agent as a real process.
const agentEnv = "TESTEDITOR_RUN_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(agentEnv) == "1" {
		os.Exit(testagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// asAgent makes processes started by the test run as the test agent, in
// its scripted mode, without the race detector's second of sleep at exit.
func asAgent(t *testing.T) {
	t.Setenv(agentEnv, "1")
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("GORACE", os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

// runMain runs Main and returns its exit status, stdout and stderr.
func runMain(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := testeditor.Main(args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestMainSession(t *testing.T) {
	asAgent(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	transcript := filepath.Join(t.TempDir(), "transcript.ndjson")
	code, stdout, stderr := runMain(t, "from stdin\n",
		"--prompt", "one", "--prompt", "-", "--cwd", dir, "--transcript", transcript,
		"--", self(t), "--read", "notes.txt", "--junk")
	if code != 0 {
		t.Fatalf("Main = %d, want 0; stderr:\n%s", code, stderr)
	}
	if want := "You said: one\nYou said: from stdin\n"; stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
	if want := "agent exit: 0\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}

	b, err := os.ReadFile(transcript)
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("transcript line %q: %v", sc.Text(), err)
		}
		lines = append(lines, v)
	}
	if len(lines) < 4 {
		t.Fatalf("transcript has %d lines, want a whole session", len(lines))
	}
	first := lines[0]
	if first["dir"] != "send" || first["msg"].(map[string]any)["method"] != "initialize" || first["msg"].(map[string]any)["id"] != 0.0 {
		t.Errorf("first transcript line = %v, want the initialize request with id 0", first)
	}
	if raw, _ := lines[1]["raw"].(string); lines[1]["dir"] != "recv" || !strings.Contains(raw, "not JSON") {
		t.Errorf("second transcript line = %v, want the agent's junk line", lines[1])
	}
	if last := lines[len(lines)-1]; !reflect.DeepEqual(last, map[string]any{"exit_code": 0.0}) {
		t.Errorf("last transcript line = %v, want {\"exit_code\":0}", last)
	}
	var prompts, cwds []string
	for _, l := range lines {
		msg, _ := l["msg"].(map[string]any)
		params, _ := msg["params"].(map[string]any)
		switch msg["method"] {
		case "session/prompt":
			prompts = append(prompts, params["prompt"].([]any)[0].(map[string]any)["text"].(string))
		case "session/new":
			cwds = append(cwds, params["cwd"].(string))
		}
	}
	if want := []string{"one", "from stdin"}; !reflect.DeepEqual(prompts, want) {
		t.Errorf("prompts sent = %q, want %q", prompts, want)
	}
	if want := []string{dir}; !reflect.DeepEqual(cwds, want) {
		t.Errorf("session/new cwd = %q, want %q", cwds, want)
	}
}

func TestMainDefaultPrompt(t *testing.T) {
	asAgent(t)
	t.Chdir(t.TempDir())
	code, stdout, stderr := runMain(t, "", "--", self(t))
	if code != 0 || stdout != "You said: hello\n" {
		t.Errorf("Main = %d with stdout %q, want 0 and the answer to \"hello\"; stderr:\n%s", code, stdout, stderr)
	}
}

func TestMainUsage(t *testing.T) {
	tests := []struct {
		args     []string
		wantCode int
		want     string
	}{
		{nil, 2, "no agent command"},
		{[]string{"--prompt", "x"}, 2, "no agent command"},
		{[]string{"--bogus", "--", "agent"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"--prompt", "-", "--prompt", "-", "--", "agent"}, 2, "--prompt - given twice"},
		{[]string{"--timeout", "-1s", "--", "agent"}, 2, "must not be negative"},
		{[]string{"--cancel-after-text", "-1", "--", "agent"}, 2, "must not be negative"},
		{[]string{"-h"}, 0, "usage: testeditor"},
		{[]string{"--", "/nonexistent/agent"}, 1, "testeditor: starting agent: "},
	}
	for _, tt := range tests {
		code, stdout, stderr := runMain(t, "", tt.args...)
		if code != tt.wantCode || !strings.Contains(stderr, tt.want) || stdout != "" {
			t.Errorf("Main(%q) = %d, stdout %q, stderr %q; want %d and %q", tt.args, code, stdout, stderr, tt.wantCode, tt.want)
		}
	}
}

func TestMainTimeoutSaysWhatItWaitedFor(t *testing.T) {
	asAgent(t)
	t.Chdir(t.TempDir())
	// The agent sends one chunk and then pauses for an hour.
	code, stdout, stderr := runMain(t, "", "--timeout", "300ms", "--exit-wait", "100ms", "--", self(t), "--chunk-delay", "1h")
	if code != 1 {
		t.Errorf("Main = %d, want 1", code)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing: no turn ended", stdout)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	want := "testeditor: gave up waiting for the session/prompt response of turn 1 of 1 (id 2; 1 session/update notifications so far in the turn): --timeout 300ms expired"
	if last != want {
		t.Errorf("last stderr line =\n%s\nwant\n%s", last, want)
	}
	// The agent exits on stdin EOF once its turn is over, which it is not:
	// the editor had to signal it.
	if !strings.Contains(stderr, "sent SIGTERM\nagent exit: 143\n") {
		t.Errorf("stderr = %q, want the SIGTERM and exit status 143 reported", stderr)
	}
}

func TestMainAgentExits(t *testing.T) {
	asAgent(t)
	code, _, stderr := runMain(t, "", "--", self(t), "--exit", "4")
	want := "agent exit: 4\ntesteditor: the agent exited with status 4 while the editor waited for the initialize response (id 0)\n"
	if code != 1 || !strings.HasSuffix(stderr, want) {
		t.Errorf("Main = %d with stderr %q; want 1 and %q", code, stderr, want)
	}
}

func TestMainReportsStubbornAgent(t *testing.T) {
	asAgent(t)
	t.Chdir(t.TempDir())
	// The agent ignores EOF but not SIGTERM, which it may take a while
	// to act on when the machine is busy: it gets a minute.
	code, _, stderr := runMain(t, "", "--exit-wait", "100ms", "--term-wait", "1m", "--", self(t), "--ignore-eof")
	if code != 0 {
		t.Errorf("Main = %d, want 0: every turn ended", code)
	}
	if want := "testeditor: the agent did not exit within 100ms of its stdin closing; sent SIGTERM\nagent exit: 143\n"; !strings.HasSuffix(stderr, want) {
		t.Errorf("stderr = %q, want it to end with %q", stderr, want)
	}
}

// shellAgent is an ACP agent written in sh: it answers initialize and
// session/new, then, in its one turn, prints junk and stray messages, makes
// requests of the editor and logs each answer to $LOG, and ends the turn.
const shellAgent = `
set -e
answer() { IFS= read -r line; printf '%s\n' "$line" >> "$LOG"; }
IFS= read -r line
printf 'shell agent starting\n\n'
printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}'
IFS= read -r line
printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}'
IFS= read -r line
printf '%s\n' '{"jsonrpc":"2.0","id":99,"result":{"stray":"answer to nothing"}}' '[1,2,3]' '{"jsonrpc":"2.0","method":"x/unknown_notification"}'
printf '{"jsonrpc":"2.0","id":"read","method":"fs/read_text_file","params":{"sessionId":"s1","path":"%s","line":2,"limit":2}}\n' "$DIR/in.txt"
answer
printf '{"jsonrpc":"2.0","id":"whole","method":"fs/read_text_file","params":{"sessionId":"s1","path":"%s"}}\n' "$DIR/in.txt"
answer
printf '{"jsonrpc":"2.0","id":"missing","method":"fs/read_text_file","params":{"sessionId":"s1","path":"%s"}}\n' "$DIR/missing.txt"
answer
printf '%s\n' '{"jsonrpc":"2.0","id":"relative","method":"fs/read_text_file","params":{"sessionId":"s1","path":"in.txt"}}'
answer
printf '{"jsonrpc":"2.0","id":"write","method":"fs/write_text_file","params":{"sessionId":"s1","path":"%s","content":"written\\n"}}\n' "$DIR/out.txt"
answer
printf '%s\n' '{"jsonrpc":"2.0","id":"term","method":"terminal/create","params":{"sessionId":"s1","command":"ls"}}'
answer
printf '%s\n' '{"jsonrpc":"2.0","id":"perm","method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t1"},"options":[{"optionId":"always","name":"Always","kind":"allow_always"},{"optionId":"once","name":"Once","kind":"allow_once"},{"optionId":"never","name":"Never","kind":"reject_always"},{"optionId":"no","name":"No","kind":"reject_once"}]}}'
answer
printf '%s\n' '{"jsonrpc":"2.0","id":"perm2","method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t2"},"options":[{"optionId":"a","name":"A","kind":"allow_always"},{"optionId":"r","name":"R","kind":"reject_always"}]}}'
answer
printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"}}}}'
printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
IFS= read -r line || exit 0
`

func TestAgentRequests(t *testing.T) {
	for _, reject := range []bool{false, true} {
		t.Run("reject="+strconv.FormatBool(reject), func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "answers.log")
			if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("one\ntwo\nthree\nfour\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness guard
			defer cancel()
			tr, err := testeditor.Run(ctx, testeditor.Options{
				Argv:   []string{"sh", "-c", shellAgent},
				Env:    append(os.Environ(), "LOG="+log, "DIR="+dir),
				Cwd:    dir,
				Reject: reject,
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if tr.ExitCode != 0 || tr.SessionID != "s1" || tr.Turns[0].Text != "done" || tr.Turns[0].StopReason != "end_turn" {
				t.Errorf("transcript: exit %d, session %q, turns %+v; want 0, s1, one turn \"done\" ending end_turn", tr.ExitCode, tr.SessionID, tr.Turns)
			}
			if got := tr.Messages[1]; got.Dir != "recv" || got.Raw != "shell agent starting" {
				t.Errorf("second message = %+v, want the junk line", got)
			}

			b, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			answers := map[string]string{}
			for line := range strings.Lines(string(b)) {
				var a struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      string          `json:"id"`
					Result  json.RawMessage `json:"result"`
					Error   *struct {
						Code int `json:"code"`
					} `json:"error"`
				}
				if err := json.Unmarshal([]byte(line), &a); err != nil || a.JSONRPC != "2.0" {
					t.Fatalf("editor answer %q is not a JSON-RPC response: %v", line, err)
				}
				if a.Error != nil {
					answers[a.ID] = "error " + strconv.Itoa(a.Error.Code)
				} else {
					answers[a.ID] = string(a.Result)
				}
			}
			want := map[string]string{
				"read":     `{"content":"two\nthree\n"}`,
				"whole":    `{"content":"one\ntwo\nthree\nfour\n"}`,
				"missing":  "error -32002",
				"relative": "error -32602",
				"write":    `{}`,
				"term":     "error -32601",
				"perm":     `{"outcome":{"optionId":"once","outcome":"selected"}}`,
				"perm2":    `{"outcome":{"optionId":"a","outcome":"selected"}}`,
			}
			if reject {
				want["perm"] = `{"outcome":{"optionId":"no","outcome":"selected"}}`
				want["perm2"] = `{"outcome":{"optionId":"r","outcome":"selected"}}`
			}
			if !reflect.DeepEqual(answers, want) {
				t.Errorf("editor answers =\n%v\nwant\n%v", answers, want)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(b) != "written\n" {
				t.Errorf("written file = %q, %v; want %q", b, err, "written\n")
			}
		})
	}
}

func TestStringIDs(t *testing.T) {
	asAgent(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness guard
	defer cancel()
	tr, err := testeditor.Run(ctx, testeditor.Options{Argv: []string{self(t)}, Cwd: t.TempDir(), StringIDs: true, Prompts: []string{"a", "b"}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	seen := map[string]bool{}
	for _, m := range tr.Messages {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal(m.Msg, &msg)
		if m.Dir != "send" || msg.ID == nil {
			continue
		}
		var id string
		if err := json.Unmarshal(msg.ID, &id); err != nil || len(id) != 36 || seen[id] {
			t.Errorf("%s request id %s, want a fresh UUID string", msg.Method, msg.ID)
		}
		seen[id] = true
	}
	if len(seen) != 4 {
		t.Errorf("got %d editor requests, want 4", len(seen))
	}
}

func TestRunErrors(t *testing.T) {
	tr, err := testeditor.Run(t.Context(), testeditor.Options{})
	if err == nil || tr.ExitCode != -1 {
		t.Errorf("Run without Argv = %v, exit code %d; want an error and -1", err, tr.ExitCode)
	}
	tr, err = testeditor.Run(t.Context(), testeditor.Options{Argv: []string{filepath.Join(t.TempDir(), "absent")}})
	if err == nil || !strings.Contains(err.Error(), "starting agent") || tr.ExitCode != -1 {
		t.Errorf("Run with a missing agent = %v, exit code %d; want a start error and -1", err, tr.ExitCode)
	}

	// An agent that answers initialize with an error.
	script := `IFS= read -r l; printf '%s\n' '{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"boom"}}'; IFS= read -r l || exit 3`
	tr, err = testeditor.Run(t.Context(), testeditor.Options{Argv: []string{"sh", "-c", script}})
	if want := "initialize: the agent answered with error -32603: boom"; err == nil || err.Error() != want {
		t.Errorf("Run = %v, want %q", err, want)
	}
	if tr.ExitCode != 3 {
		t.Errorf("exit code = %d, want 3 (the agent exits so on stdin EOF)", tr.ExitCode)
	}
}

func TestAgentExitsWhileGrandchildHoldsItsStdout(t *testing.T) {
	// The agent answers initialize and exits, leaving a background process
	// with its stdout: the editor must not wait on that pipe forever.
	pidFile := filepath.Join(t.TempDir(), "pid")
	script := `IFS= read -r l; printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}'; sleep 60 & echo $! > "$PIDFILE"; exit 5`
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness guard
	defer cancel()
	tr, err := testeditor.Run(ctx, testeditor.Options{
		Argv: []string{"sh", "-c", script},
		Env:  append(os.Environ(), "PIDFILE="+pidFile),
	})
	want := "the agent exited with status 5 while the editor waited for the session/new response (id 1)"
	if err == nil || err.Error() != want {
		t.Errorf("Run = %v, want %q", err, want)
	}
	if tr.ExitCode != 5 {
		t.Errorf("exit code = %d, want 5", tr.ExitCode)
	}
}

func TestWriteNDJSON(t *testing.T) {
	tr := &testeditor.Transcript{
		Messages: []testeditor.Message{
			{Dir: "send", Msg: json.RawMessage(`{"jsonrpc":"2.0","id":0,"method":"initialize"}`)},
			{Dir: "recv", Raw: "<junk & more>"},
		},
		ExitCode: 137,
		Signal:   "SIGKILL",
	}
	var buf bytes.Buffer
	if err := tr.WriteNDJSON(&buf); err != nil {
		t.Fatal(err)
	}
	want := `{"dir":"send","msg":{"jsonrpc":"2.0","id":0,"method":"initialize"}}
{"dir":"recv","raw":"<junk & more>"}
{"exit_code":137,"signal":"SIGKILL"}
`
	if got := buf.String(); got != want {
		t.Errorf("WriteNDJSON wrote\n%s\nwant\n%s", got, want)
	}
}

// TestMainSessions: --sessions 2 opens two sessions with concurrent
// session/new requests and prompts both at once; each turn's answer is
// matched by id and its text by its session.
func TestMainSessions(t *testing.T) {
	asAgent(t)
	dir := t.TempDir()
	transcript := filepath.Join(t.TempDir(), "transcript.ndjson")
	code, stdout, stderr := runMain(t, "", "--sessions", "2", "--prompt", "one", "--prompt", "two", "--cwd", dir,
		"--transcript", transcript, "--", self(t), "--chunk-size", "3", "--chunk-delay", "2ms")
	if code != 0 {
		t.Fatalf("Main = %d, want 0; stderr:\n%s", code, stderr)
	}
	want := "You said: one (session 1)\nYou said: one (session 2)\nYou said: two (session 1)\nYou said: two (session 2)\n"
	if stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
	b, err := os.ReadFile(transcript)
	if err != nil {
		t.Fatal(err)
	}
	// The two session/new requests go out before either answer comes.
	var order []string
	for line := range strings.Lines(string(b)) {
		var m struct {
			Dir string `json:"dir"`
			Msg struct {
				Method string          `json:"method"`
				Result json.RawMessage `json:"result"`
			} `json:"msg"`
		}
		json.Unmarshal([]byte(line), &m)
		switch {
		case m.Dir == "send" && m.Msg.Method == "session/new":
			order = append(order, "new")
		case m.Dir == "recv" && strings.Contains(string(m.Msg.Result), "sessionId"):
			order = append(order, "answer")
		}
	}
	if strings.Join(order, " ") != "new new answer answer" {
		t.Errorf("session/new requests and answers in the order %v, want both requests first", order)
	}
	if code, _, stderr := runMain(t, "", "--sessions", "2", "--cancel-after", "1", "--", self(t)); code != 2 || !strings.Contains(stderr, "do not combine with --cancel-after") {
		t.Errorf("--sessions with --cancel-after: exit %d, stderr %q; want 2 and why", code, stderr)
	}
}

// TestMainZed: --zed against an agent with every feature of a real editor
// session: UUID ids, two sessions at once, set_mode and set_model,
// session/list, a terminal round and an elicitation in each turn, an
// unknown agent request answered method-not-found, then session/close,
// session/load with the history, and one more prompt.
func TestMainZed(t *testing.T) {
	asAgent(t)
	dir := t.TempDir()
	transcript := filepath.Join(t.TempDir(), "transcript.ndjson")
	code, stdout, stderr := runMain(t, "", "--zed", "--prompt", "one", "--cwd", dir, "--transcript", transcript,
		"--", self(t), "--features", "load,modes,models,terminal,elicit,vendor")
	if code != 0 {
		t.Fatalf("Main = %d, want 0; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"status: error -32601; elicitation: accept hello from the editor; terminal: terminal round\n[code mode] You said: one (session 1)",
		"[code mode] You said: one (session 2)",
		"[code mode] You said: and once more (session 1)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	b, err := os.ReadFile(transcript)
	if err != nil {
		t.Fatal(err)
	}
	var methods []string
	history := 0
	for line := range strings.Lines(string(b)) {
		var m struct {
			Dir string `json:"dir"`
			Msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Update struct {
						SessionUpdate string `json:"sessionUpdate"`
					} `json:"update"`
				} `json:"params"`
			} `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || m.Msg.Method == "" {
			continue
		}
		if m.Dir == "send" && !strings.HasPrefix(string(m.Msg.ID), `"`) {
			t.Errorf("the editor's %s has id %s, want a UUID string", m.Msg.Method, m.Msg.ID)
		}
		if m.Msg.Params.Update.SessionUpdate == "user_message_chunk" {
			history++
		}
		if !slices.Contains(methods, m.Msg.Method) {
			methods = append(methods, m.Msg.Method)
		}
	}
	for _, want := range []string{"session/set_mode", "session/set_model", "session/list", "_testagent/status", "_testagent/progress",
		"elicitation/create", "terminal/create", "terminal/wait_for_exit", "terminal/output", "terminal/release", "session/close", "session/load"} {
		if !slices.Contains(methods, want) {
			t.Errorf("no %s in the session; methods: %v", want, methods)
		}
	}
	if history != 1 {
		t.Errorf("session/load replayed %d user messages, want the 1 of the first session", history)
	}
}

// lateAgent answers one prompt, then sends a state update 300ms after
// the turn's end unless its stdin closes first (bash: read -t), as
// qwen-code does.
const lateAgent = `
IFS= read -r line
printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}'
IFS= read -r line
printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}'
IFS= read -r line
printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
IFS= read -r -t 0.3 line
[ $? -gt 128 ] || exit 0
printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}'
IFS= read -r line || exit 0
`

// TestLinger: with Linger the editor handles what the agent sends a
// moment after the last turn before closing its stdin; without, the
// session ends first.
func TestLinger(t *testing.T) {
	for _, linger := range []time.Duration{0, 3 * time.Second} {
		t.Run(linger.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness guard
			defer cancel()
			tr, err := testeditor.Run(ctx, testeditor.Options{Argv: []string{"bash", "-c", lateAgent}, Cwd: t.TempDir(), Linger: linger})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			late := false
			for _, m := range tr.Messages {
				late = late || strings.Contains(string(m.Msg), "available_commands_update")
			}
			if late != (linger > 0) {
				t.Errorf("linger %v: the update after the turn recorded: %v, want %v", linger, late, linger > 0)
			}
		})
	}
}

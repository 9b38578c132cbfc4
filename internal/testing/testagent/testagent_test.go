package testagent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acptap/acptap/internal/testing/testagent"
	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/internal/testing/testkit"
)

// agentEnv, set to 1, makes the test binary run testagent.Main instead of
// the tests, so that the tests can start the agent as a real process.
const agentEnv = "TESTAGENT_RUN_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(agentEnv) == "1" {
		os.Exit(testagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

// agentEnviron is the agent's environment: this process's without what
// would change the agent's HTTP setup, plus extra.
func agentEnviron(extra ...string) []string {
	return testkit.ChildEnv(append([]string{agentEnv + "=1"}, extra...)...)
}

// session runs the agent with args under the test editor; env is added to
// the agent's environment. The session cwd defaults to a new temporary
// directory.
func session(t *testing.T, opts testeditor.Options, env []string, args ...string) (tr *testeditor.Transcript, stderr string, err error) {
	t.Helper()
	var errBuf testkit.SyncBuffer
	opts.Argv = testkit.SelfArgv(t, args...)
	opts.Env = agentEnviron(env...)
	opts.Stderr = &errBuf
	if opts.Cwd == "" {
		opts.Cwd = t.TempDir()
	}
	// A liveness guard, not a timing assertion: a hung agent fails the
	// test with the editor's account of what it waited for.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tr, err = testeditor.Run(ctx, opts)
	return tr, errBuf.String(), err
}

// mustSession is session for runs that must succeed with exit status 0.
func mustSession(t *testing.T, opts testeditor.Options, env []string, args ...string) (*testeditor.Transcript, string) {
	t.Helper()
	tr, stderr, err := session(t, opts, env, args...)
	if err != nil {
		t.Fatalf("Run: %v\nagent stderr:\n%s", err, stderr)
	}
	if tr.ExitCode != 0 || tr.Signal != "" {
		t.Fatalf("agent exit status %d (signal %q), want 0 without signal\nagent stderr:\n%s", tr.ExitCode, tr.Signal, stderr)
	}
	return tr, stderr
}

// wireMsg is a transcript message decoded.
type wireMsg struct {
	Dir    string          // "send" or "recv"
	Raw    string          // a non-JSON line
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params map[string]any  `json:"params"`
	Result map[string]any  `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decode(t *testing.T, tr *testeditor.Transcript) []wireMsg {
	t.Helper()
	var out []wireMsg
	for _, m := range tr.Messages {
		w := wireMsg{Dir: m.Dir, Raw: m.Raw}
		if m.Msg != nil {
			if err := json.Unmarshal(m.Msg, &w); err != nil {
				t.Fatalf("transcript message %s: %v", m.Msg, err)
			}
			w.Dir = m.Dir
		}
		out = append(out, w)
	}
	return out
}

// updates returns the update objects of the session/update notifications
// the agent sent.
func updates(msgs []wireMsg) []map[string]any {
	var out []map[string]any
	for _, m := range msgs {
		if m.Dir == "recv" && m.Method == "session/update" {
			out = append(out, m.Params["update"].(map[string]any))
		}
	}
	return out
}

// index returns the position of the first message matching f, or -1.
func index(msgs []wireMsg, f func(wireMsg) bool) int {
	for i, m := range msgs {
		if f(m) {
			return i
		}
	}
	return -1
}

// answerTo returns the editor's answer to the agent's request with id.
func answerTo(t *testing.T, msgs []wireMsg, id json.RawMessage) wireMsg {
	t.Helper()
	i := index(msgs, func(m wireMsg) bool { return m.Dir == "send" && m.Method == "" && string(m.ID) == string(id) })
	if i < 0 {
		t.Fatalf("the editor did not answer request %s", id)
	}
	return msgs[i]
}

func agentRequest(method string) func(wireMsg) bool {
	return func(m wireMsg) bool { return m.Dir == "recv" && m.Method == method && m.ID != nil }
}

func updateOf(kind string) func(wireMsg) bool {
	return func(m wireMsg) bool {
		if m.Dir != "recv" || m.Method != "session/update" {
			return false
		}
		u, _ := m.Params["update"].(map[string]any)
		return u["sessionUpdate"] == kind
	}
}

// messageChunks returns the texts of the agent_message_chunk updates.
func messageChunks(msgs []wireMsg) []string {
	var out []string
	for _, u := range updates(msgs) {
		if u["sessionUpdate"] == "agent_message_chunk" {
			out = append(out, u["content"].(map[string]any)["text"].(string))
		}
	}
	return out
}

// get walks a decoded JSON value along keys.
func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func TestOnePrompt(t *testing.T) {
	tr, stderr := mustSession(t, testeditor.Options{Prompts: []string{"hello, agent"}}, nil)
	msgs := decode(t, tr)

	if got, want := len(tr.Turns), 1; got != want {
		t.Fatalf("got %d turns, want %d", got, want)
	}
	if got, want := tr.Turns[0].StopReason, "end_turn"; got != want {
		t.Errorf("stop reason = %q, want %q", got, want)
	}
	if got, want := messageChunks(msgs), []string{"You said", ": hello,", " agent"}; !reflect.DeepEqual(got, want) {
		t.Errorf("message chunks = %q, want %q", got, want)
	}
	if got, want := tr.Turns[0].Updates, 3; got != want {
		t.Errorf("turn updates = %d, want %d", got, want)
	}
	if !regexp.MustCompile(`^sess_[0-9a-f]{24}$`).MatchString(tr.SessionID) {
		t.Errorf("sessionId = %q, want sess_ and 24 hex digits", tr.SessionID)
	}
	init := msgs[index(msgs, func(m wireMsg) bool { return m.Dir == "recv" && string(m.ID) == "0" })]
	if got := get(init.Result, "protocolVersion"); got != 1.0 {
		t.Errorf("initialize protocolVersion = %v, want 1", got)
	}
	if got := get(init.Result, "agentCapabilities", "loadSession"); got != false {
		t.Errorf("initialize agentCapabilities.loadSession = %v, want false", got)
	}
	if got, ok := get(init.Result, "authMethods").([]any); !ok || len(got) != 0 {
		t.Errorf("initialize authMethods = %v, want []", get(init.Result, "authMethods"))
	}
	// The editor numbers its requests from 0.
	var ids []string
	for _, m := range msgs {
		if m.Dir == "send" && m.Method != "" && m.ID != nil {
			ids = append(ids, string(m.ID))
		}
	}
	if want := []string{"0", "1", "2"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("editor request ids = %v, want %v", ids, want)
	}
	if stderr != "" {
		t.Errorf("agent stderr = %q, want nothing without --stderr-log", stderr)
	}
}

func TestTwoPromptsOneSession(t *testing.T) {
	tr, _ := mustSession(t, testeditor.Options{Prompts: []string{"first", "second"}}, nil, "--chunk-size", "100")
	var texts, reasons []string
	for _, turn := range tr.Turns {
		texts = append(texts, turn.Text)
		reasons = append(reasons, turn.StopReason)
	}
	if want := []string{"You said: first", "You said: second"}; !reflect.DeepEqual(texts, want) {
		t.Errorf("turn texts = %q, want %q", texts, want)
	}
	if want := []string{"end_turn", "end_turn"}; !reflect.DeepEqual(reasons, want) {
		t.Errorf("stop reasons = %q, want %q", reasons, want)
	}
	for _, m := range decode(t, tr) {
		if m.Method == "session/update" || m.Method == "session/prompt" {
			if got := m.Params["sessionId"]; got != tr.SessionID {
				t.Errorf("%s %s has sessionId %v, want %q", m.Dir, m.Method, got, tr.SessionID)
			}
		}
	}

	// Session ids are minted at random.
	tr2, _ := mustSession(t, testeditor.Options{}, nil)
	if tr2.SessionID == tr.SessionID {
		t.Errorf("two agent processes minted the same sessionId %q", tr.SessionID)
	}
}

func TestChunksKeepRunesWhole(t *testing.T) {
	const message = "héllo wörld — ✓"
	tr, _ := mustSession(t, testeditor.Options{}, nil, "--chunk-size", "3", "--message", message)
	chunks := messageChunks(decode(t, tr))
	if got := strings.Join(chunks, ""); got != message {
		t.Errorf("chunks join to %q, want %q", got, message)
	}
	for _, c := range chunks {
		if !utf8.ValidString(c) || len(c) > 3 {
			t.Errorf("chunk %q: want valid UTF-8 of at most 3 bytes", c)
		}
	}
	if len(chunks) < 6 {
		t.Errorf("got %d chunks, want the message split in at least 6", len(chunks))
	}
}

func TestThoughtAndMessage(t *testing.T) {
	tr, _ := mustSession(t, testeditor.Options{}, nil, "--thought", "pondering", "--message", "Custom answer.")
	ups := updates(decode(t, tr))
	if len(ups) == 0 {
		t.Fatal("no session/update")
	}
	if got, want := ups[0]["sessionUpdate"], "agent_thought_chunk"; got != want {
		t.Errorf("first update is %v, want %v", got, want)
	}
	if got, want := get(ups[0], "content", "text"), "pondering"; got != want {
		t.Errorf("thought = %v, want %v", got, want)
	}
	if got, want := tr.Turns[0].Text, "Custom answer."; got != want {
		t.Errorf("answer = %q, want %q", got, want)
	}
}

// workspace makes a session cwd holding notes.txt.
func workspace(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReadAllowed(t *testing.T) {
	const content = "first line\nsecond line\n"
	dir := workspace(t, content)
	tr, _ := mustSession(t, testeditor.Options{Cwd: dir}, nil, "--read", "notes.txt")
	msgs := decode(t, tr)
	path := filepath.Join(dir, "notes.txt")

	call := index(msgs, updateOf("tool_call"))
	perm := index(msgs, agentRequest("session/request_permission"))
	read := index(msgs, agentRequest("fs/read_text_file"))
	done := index(msgs, updateOf("tool_call_update"))
	chunk := index(msgs, updateOf("agent_message_chunk"))
	if !(0 <= call && call < perm && perm < read && read < done && done < chunk) {
		t.Fatalf("positions: tool_call %d, permission %d, fs/read_text_file %d, tool_call_update %d, first chunk %d; want them in this order",
			call, perm, read, done, chunk)
	}

	tc := msgs[call].Params["update"].(map[string]any)
	id, _ := tc["toolCallId"].(string)
	if !regexp.MustCompile(`^call_[0-9a-f]+$`).MatchString(id) {
		t.Errorf("toolCallId = %q, want call_ and hex", id)
	}
	for key, want := range map[string]any{"kind": "read", "status": "pending", "title": "Read notes.txt"} {
		if tc[key] != want {
			t.Errorf("tool_call %s = %v, want %v", key, tc[key], want)
		}
	}
	if got := get(tc, "rawInput", "path"); got != path {
		t.Errorf("tool_call rawInput.path = %v, want %v", got, path)
	}
	if ms, _ := get(tc, "rawInput", "started_at_ms").(float64); ms < float64(time.Now().Add(-time.Hour).UnixMilli()) {
		t.Errorf("tool_call rawInput.started_at_ms = %v, want the current time in ms", get(tc, "rawInput", "started_at_ms"))
	}

	p := msgs[perm]
	if got := get(p.Params, "toolCall", "toolCallId"); got != id {
		t.Errorf("permission toolCall.toolCallId = %v, want %v", got, id)
	}
	if got, want := fmt.Sprint(p.Params["options"]), "[map[kind:allow_once name:Allow optionId:allow] map[kind:reject_once name:Reject optionId:reject]]"; got != want {
		t.Errorf("permission options = %s, want %s", got, want)
	}
	answer := answerTo(t, msgs, p.ID)
	if got, want := fmt.Sprint(answer.Result), "map[outcome:map[optionId:allow outcome:selected]]"; got != want {
		t.Errorf("editor's permission answer = %s, want %s", got, want)
	}
	if got := msgs[read].Params["path"]; got != path {
		t.Errorf("fs/read_text_file path = %v, want %v", got, path)
	}

	upd := msgs[done].Params["update"].(map[string]any)
	if upd["toolCallId"] != id || upd["status"] != "completed" {
		t.Errorf("tool_call_update = %v, want status completed for %s", upd, id)
	}
	if got, want := fmt.Sprint(upd["content"]), "[map[content:map[text:first line (23 bytes) type:text] type:content]]"; got != want {
		t.Errorf("tool_call_update content = %s, want %s", got, want)
	}
	if _, ok := get(upd, "rawOutput", "duration_ms").(float64); !ok {
		t.Errorf("tool_call_update rawOutput = %v, want a duration_ms", upd["rawOutput"])
	}
	// The agent numbers its own requests from 0.
	if got := string(p.ID) + "," + string(msgs[read].ID); got != "0,1" {
		t.Errorf("agent request ids = %s, want 0,1", got)
	}
	if got, want := tr.Turns[0].Text, "You said: hello"; got != want {
		t.Errorf("answer = %q, want %q", got, want)
	}
}

func TestReadRejected(t *testing.T) {
	dir := workspace(t, "secret\n")
	tr, _ := mustSession(t, testeditor.Options{Cwd: dir, Reject: true}, nil, "--read", "notes.txt")
	msgs := decode(t, tr)
	if i := index(msgs, agentRequest("fs/read_text_file")); i >= 0 {
		t.Errorf("the agent read the file after a rejection: %v", msgs[i])
	}
	p := msgs[index(msgs, agentRequest("session/request_permission"))]
	answer := answerTo(t, msgs, p.ID)
	if got := get(answer.Result, "outcome", "optionId"); got != "reject" {
		t.Errorf("editor selected %v, want reject", got)
	}
	upd := msgs[index(msgs, updateOf("tool_call_update"))].Params["update"]
	if got := get(upd, "status"); got != "failed" {
		t.Errorf("tool_call_update status = %v, want failed", got)
	}
	if got, want := fmt.Sprint(get(upd, "content")), "[map[content:map[text:error: permission denied type:text] type:content]]"; got != want {
		t.Errorf("tool_call_update content = %s, want %s", got, want)
	}
	if got := tr.Turns[0]; got.StopReason != "end_turn" || got.Text != "You said: hello" {
		t.Errorf("turn = %+v, want end_turn with the usual answer", got)
	}
}

func TestReadWithoutPermission(t *testing.T) {
	dir := workspace(t, "only line")
	tr, _ := mustSession(t, testeditor.Options{Cwd: dir}, nil, "--read", "notes.txt", "--no-permission")
	msgs := decode(t, tr)
	if i := index(msgs, agentRequest("session/request_permission")); i >= 0 {
		t.Errorf("permission asked despite --no-permission: %v", msgs[i])
	}
	upd := msgs[index(msgs, updateOf("tool_call_update"))].Params["update"]
	if got, want := get(upd, "rawOutput", "first_line"), "only line"; got != want {
		t.Errorf("rawOutput.first_line = %v, want %v", got, want)
	}
	if got, want := get(upd, "rawOutput", "bytes"), 9.0; got != want {
		t.Errorf("rawOutput.bytes = %v, want %v", got, want)
	}
}

func TestReadMissingFile(t *testing.T) {
	dir := t.TempDir()
	tr, _ := mustSession(t, testeditor.Options{Cwd: dir}, nil, "--read", "absent.txt")
	upd := updates(decode(t, tr))
	var failed map[string]any
	for _, u := range upd {
		if u["sessionUpdate"] == "tool_call_update" {
			failed = u
		}
	}
	if failed["status"] != "failed" {
		t.Fatalf("tool_call_update = %v, want status failed", failed)
	}
	if text, _ := get(failed["content"].([]any)[0], "content", "text").(string); !strings.Contains(text, "no such file") {
		t.Errorf("failure text = %q, want the editor's no-such-file error", text)
	}
	if got := tr.Turns[0].StopReason; got != "end_turn" {
		t.Errorf("stop reason = %q, want end_turn", got)
	}
}

func TestCancelMidStream(t *testing.T) {
	// The agent pauses an hour after its first chunk: only the cancel can
	// end the turn.
	tr, _ := mustSession(t, testeditor.Options{CancelAfter: 1}, nil, "--chunk-size", "4", "--chunk-delay", "1h")
	turn := tr.Turns[0]
	if turn.StopReason != "cancelled" || turn.Updates != 1 || turn.Text != "You " {
		t.Errorf("turn = %+v, want cancelled after one update %q", turn, "You ")
	}
	msgs := decode(t, tr)
	c := msgs[index(msgs, func(m wireMsg) bool { return m.Dir == "send" && m.Method == "session/cancel" })]
	if c.ID != nil || c.Params["sessionId"] != tr.SessionID {
		t.Errorf("session/cancel = %+v, want a notification for %s", c, tr.SessionID)
	}
}

func TestCancelAfterText(t *testing.T) {
	// A thought comes first and the agent pauses an hour after its first
	// message chunk: CancelAfterText does not count the thought, so the
	// editor sends the cancel once it has read the message chunk, not
	// after the thought.
	tr, _ := mustSession(t, testeditor.Options{CancelAfterText: 1}, nil, "--thought", "hmm", "--chunk-size", "4", "--chunk-delay", "1h")
	turn := tr.Turns[0]
	if turn.StopReason != "cancelled" || turn.Updates != 2 || turn.Chunks != 1 || turn.Text != "You " {
		t.Errorf("turn = %+v, want cancelled after the thought and one message chunk %q", turn, "You ")
	}
	msgs := decode(t, tr)
	update := func(kind string) func(wireMsg) bool {
		return func(m wireMsg) bool {
			u, _ := m.Params["update"].(map[string]any)
			return m.Dir == "recv" && m.Method == "session/update" && u["sessionUpdate"] == kind
		}
	}
	thought, chunk := index(msgs, update("agent_thought_chunk")), index(msgs, update("agent_message_chunk"))
	cancel := index(msgs, func(m wireMsg) bool { return m.Dir == "send" && m.Method == "session/cancel" })
	if thought < 0 || chunk < thought || cancel < chunk {
		t.Errorf("the thought, the message chunk and the cancel are messages %d, %d and %d; want them in that order", thought, chunk, cancel)
	}
}

func TestCancelDuringPermission(t *testing.T) {
	// The editor cancels on the tool_call, before it reads the permission
	// request, which it then answers "cancelled" as ACP asks.
	dir := workspace(t, "x\n")
	tr, _ := mustSession(t, testeditor.Options{Cwd: dir, CancelAfter: 1}, nil, "--read", "notes.txt")
	msgs := decode(t, tr)
	p := msgs[index(msgs, agentRequest("session/request_permission"))]
	answer := answerTo(t, msgs, p.ID)
	if got := get(answer.Result, "outcome", "outcome"); got != "cancelled" {
		t.Errorf("permission outcome = %v, want cancelled", got)
	}
	if i := index(msgs, agentRequest("fs/read_text_file")); i >= 0 {
		t.Errorf("the agent read the file in a cancelled turn: %v", msgs[i])
	}
	if got := tr.Turns[0].StopReason; got != "cancelled" {
		t.Errorf("stop reason = %q, want cancelled", got)
	}
}

func TestJunkLineSkipped(t *testing.T) {
	tr, _ := mustSession(t, testeditor.Options{}, nil, "--junk")
	msgs := decode(t, tr)
	if msgs[1].Dir != "recv" || msgs[1].Raw == "" {
		t.Errorf("second transcript line = %+v, want the agent's non-JSON line", msgs[1])
	}
	if got := tr.Turns[0].Text; got != "You said: hello" {
		t.Errorf("answer = %q, want %q", got, "You said: hello")
	}
}

func TestJunkLinesEachTurn(t *testing.T) {
	tr, _ := mustSession(t, testeditor.Options{Prompts: []string{"one", "two"}}, nil, "--junk-lines", "3")
	junk := 0
	for _, m := range decode(t, tr) {
		if m.Dir == "recv" && m.Raw != "" {
			junk++
		}
	}
	if junk != 6 {
		t.Errorf("%d non-JSON lines in two turns, want 3 each", junk)
	}
	if len(tr.Turns) != 2 || tr.Turns[1].Text != "You said: two" {
		t.Errorf("turns = %+v, want two answered", tr.Turns)
	}
}

func TestExitStatus(t *testing.T) {
	tr, stderr, err := session(t, testeditor.Options{}, nil, "--exit", "7")
	if err == nil || !strings.Contains(err.Error(), "exited with status 7") || !strings.Contains(err.Error(), "initialize") {
		t.Errorf("Run error = %v, want the agent exiting with status 7 before the initialize response", err)
	}
	if tr.ExitCode != 7 {
		t.Errorf("exit code = %d, want 7", tr.ExitCode)
	}
	if len(tr.Messages) != 1 {
		t.Errorf("transcript = %v, want only the initialize request", tr.Messages)
	}
	if !strings.Contains(stderr, "exiting with status 7") {
		t.Errorf("agent stderr = %q, want it to say why it exits", stderr)
	}
}

func TestIgnoreEOF(t *testing.T) {
	tests := []struct {
		args       []string
		wantSignal string
		wantCode   int
	}{
		{[]string{"--ignore-eof"}, "SIGTERM", 128 + 15},
		{[]string{"--ignore-eof", "--ignore-sigterm"}, "SIGKILL", 128 + 9},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			tr, stderr, err := session(t, testeditor.Options{ExitWait: 100 * time.Millisecond}, nil, tt.args...)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if tr.Signal != tt.wantSignal || tr.ExitCode != tt.wantCode {
				t.Errorf("agent stopped with %q, exit status %d; want %q, %d (stderr %q)", tr.Signal, tr.ExitCode, tt.wantSignal, tt.wantCode, stderr)
			}
			if got := tr.Turns[0].StopReason; got != "end_turn" {
				t.Errorf("stop reason = %q, want end_turn", got)
			}
		})
	}
}

func TestStringIDs(t *testing.T) {
	uuid := regexp.MustCompile(`^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$`)
	dir := workspace(t, "text\n")
	tr, _ := mustSession(t, testeditor.Options{Cwd: dir, StringIDs: true}, nil, "--read", "notes.txt", "--string-ids")
	seen := map[string]bool{}
	var requests int
	for _, m := range decode(t, tr) {
		if m.Method == "" || m.ID == nil {
			continue
		}
		requests++
		if !uuid.Match(m.ID) {
			t.Errorf("%s request %s has id %s, want a UUID string", m.Dir, m.Method, m.ID)
		}
		if seen[string(m.ID)] {
			t.Errorf("id %s used twice", m.ID)
		}
		seen[string(m.ID)] = true
	}
	if requests != 5 { // initialize, session/new, session/prompt, permission, fs read
		t.Errorf("got %d requests, want 5", requests)
	}
	if got := tr.Turns[0].StopReason; got != "end_turn" {
		t.Errorf("stop reason = %q, want end_turn", got)
	}
}

func TestStderrLog(t *testing.T) {
	_, stderr := mustSession(t, testeditor.Options{}, nil, "--stderr-log")
	for _, want := range []string{"testagent: recv initialize\n", "testagent: recv session/new\n", "testagent: recv session/prompt\n"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("agent stderr %q lacks %q", stderr, want)
		}
	}
}

// rawAgent is the agent on pipes the test writes and reads itself.
type rawAgent struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startRaw(t *testing.T, args ...string) *rawAgent {
	t.Helper()
	argv := testkit.SelfArgv(t, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = agentEnviron()
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &rawAgent{t: t, cmd: cmd, stdin: stdin, lines: make(chan string)}
	go func() {
		defer close(a.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			a.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		for range a.lines {
		}
		cmd.Wait()
	})
	return a
}

func (a *rawAgent) send(line string) {
	a.t.Helper()
	if _, err := io.WriteString(a.stdin, line+"\n"); err != nil {
		a.t.Fatalf("writing %s: %v", line, err)
	}
}

// recv returns the agent's next line, or "" at EOF.
func (a *rawAgent) recv() string {
	a.t.Helper()
	select {
	case line := <-a.lines:
		return line
	case <-time.After(30 * time.Second): // liveness guard
		a.t.Fatal("no line from the agent in 30s")
		return ""
	}
}

func TestProtocolErrors(t *testing.T) {
	a := startRaw(t)
	tests := []struct {
		send     string
		wantID   string // "" when no answer is due
		wantCode int
		wantMsg  string // a part of the error message
	}{
		{`this is not json`, `null`, -32700, "parse error"},
		{`{"jsonrpc":"2.0","id":"abc","method":"bogus/method"}`, `"abc"`, -32601, "method not found: bogus/method"},
		// A notification of an unknown method is ignored: the next answer
		// is the next request's.
		{`{"jsonrpc":"2.0","method":"bogus/notification","params":{}}`, "", 0, ""},
		{`{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":"relative/dir","mcpServers":[]}}`, `5`, -32602, `cwd "relative/dir" is not an absolute path`},
		{`{"jsonrpc":"2.0","id":6,"method":"session/new"}`, `6`, -32602, "params missing"},
		{`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"sess_nope","prompt":[]}}`, `7`, -32602, `unknown session "sess_nope"`},
		{`{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":1}}`, `8`, -32602, "invalid params for session/prompt"},
		{`{"jsonrpc":"1.0","id":9,"method":"initialize","params":{}}`, `9`, -32600, `"jsonrpc" must be "2.0"`},
		{`[1,2]`, `null`, -32600, "invalid request"},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"initialize"}`, `null`, -32600, "id must be a string, a number or null"},
		{`{"jsonrpc":"2.0","id":10}`, `10`, -32600, "no method, result or error"},
		// A response to nothing the agent asked is dropped.
		{`{"jsonrpc":"2.0","id":99,"result":{}}`, "", 0, ""},
		{`   `, "", 0, ""},
		{`{"jsonrpc":"2.0","id":11,"method":"initialize","params":{"protocolVersion":1}}`, `11`, 0, ""},
	}
	for _, tt := range tests {
		a.send(tt.send)
		if tt.wantID == "" {
			continue
		}
		line := a.recv()
		var got struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  map[string]any  `json:"result"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("sent %s, got non-JSON %q", tt.send, line)
		}
		if got.JSONRPC != "2.0" || string(got.ID) != tt.wantID || got.Error.Code != tt.wantCode || !strings.Contains(got.Error.Message, tt.wantMsg) {
			t.Errorf("sent %s\ngot %s\nwant id %s, error code %d with %q", tt.send, line, tt.wantID, tt.wantCode, tt.wantMsg)
		}
		if tt.wantCode == 0 && got.Result["protocolVersion"] != 1.0 {
			t.Errorf("sent %s\ngot %s\nwant the initialize result", tt.send, line)
		}
	}
	a.stdin.Close()
	if got := a.recv(); got != "" {
		t.Errorf("after EOF the agent wrote %q, want nothing", got)
	}
	if err := a.cmd.Wait(); err != nil {
		t.Errorf("agent after stdin EOF: %v, want exit status 0", err)
	}
}

func TestStdinClosedDuringPermission(t *testing.T) {
	// Once stdin is closed nobody can answer the agent: the turn waiting
	// for permission ends as cancelled and the agent exits.
	dir := workspace(t, "x\n")
	a := startRaw(t, "--read", "notes.txt")
	a.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	a.recv()
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, dir))
	var sess struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if line := a.recv(); json.Unmarshal([]byte(line), &sess) != nil || sess.Result.SessionID == "" {
		t.Fatalf("session/new answer %q has no sessionId", line)
	}
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"hi"}]}}`, sess.Result.SessionID))
	for line := a.recv(); !strings.Contains(line, `"session/request_permission"`); line = a.recv() {
		if line == "" {
			t.Fatal("agent output ended before its permission request")
		}
	}
	a.stdin.Close()
	if got, want := a.recv(), `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}`; got != want {
		t.Errorf("after EOF got %s, want %s", got, want)
	}
	if err := a.cmd.Wait(); err != nil {
		t.Errorf("agent: %v, want exit status 0", err)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--chunk-size", "0"}, "--chunk-size must be at least 1"},
		{[]string{"stray"}, `unexpected argument "stray"`},
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
		{[]string{"--llm", "ftp://example.com"}, "not an http(s) URL"},
		{[]string{"--llm", "http://127.0.0.1:9", "--ca", "/nonexistent/ca.pem"}, "reading --ca"},
		{[]string{"--retries", "-1"}, "--retries must not be negative"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := testagent.Main(tt.args, strings.NewReader(""), &stdout, &stderr, func(string) string { return "" })
		if code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("Main(%q) = %d with stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
		if stdout.Len() > 0 {
			t.Errorf("Main(%q) wrote %q to stdout, want nothing", tt.args, stdout.String())
		}
	}
}

func TestOneTurnAtATime(t *testing.T) {
	a := startRaw(t, "--chunk-delay", "1h")
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, t.TempDir()))
	var sess struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if line := a.recv(); json.Unmarshal([]byte(line), &sess) != nil || sess.Result.SessionID == "" {
		t.Fatalf("session/new answer %q has no sessionId", line)
	}
	prompt := fmt.Sprintf(`{"jsonrpc":"2.0","id":%%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"hi"}]}}`, sess.Result.SessionID)
	a.send(fmt.Sprintf(prompt, 2))
	if got := a.recv(); !strings.Contains(got, `"text":"You said"`) {
		t.Fatalf("got %s, want the first answer chunk", got)
	}
	a.send(fmt.Sprintf(prompt, 3))
	if got := a.recv(); !strings.Contains(got, `"id":3,"error":{"code":-32600,"message":"session `+sess.Result.SessionID+` is already running a prompt turn"}`) {
		t.Errorf("second prompt got %s, want an error", got)
	}
	// session/cancel sent as a request is answered, and cancels.
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"session/cancel","params":{"sessionId":%q}}`, sess.Result.SessionID))
	got := []string{a.recv(), a.recv()}
	slices.Sort(got)
	want := []string{`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}`, `{"jsonrpc":"2.0","id":4,"result":{}}`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after session/cancel got %q, want %q", got, want)
	}
}

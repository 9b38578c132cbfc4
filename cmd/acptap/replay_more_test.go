package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/store"
)

func TestReplayCancelAndRejectedPermission(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	// A turn cancelled mid-stream: the editor cancels after 3 updates of a
	// slowly streamed answer.
	cancelArgs := []string{"--prompt", "a long answer please", "--cancel-after", "3", "--",
		"acptap", "record", "--store", db, "--name", "cancel", "--",
		"testagent", "--chunk-size", "2", "--chunk-delay", "20ms"}
	if out, err := runEditor(dir, cancelArgs...); err != nil {
		t.Fatalf("recording the cancelled turn: %v\n%s", err, out)
	}
	// A permission request the user rejected.
	rejectArgs := []string{"--prompt", "read it", "--reject", "--",
		"acptap", "record", "--store", db, "--name", "reject", "--", "testagent", "--read", "notes.txt"}
	if out, err := runEditor(dir, rejectArgs...); err != nil {
		t.Fatalf("recording the rejected permission: %v\n%s", err, out)
	}
	// The same turn cancelled by $/cancel_request of its session/prompt,
	// which the agent answers with error -32800.
	requestArgs := []string{"--prompt", "a long answer please", "--cancel-after", "3", "--cancel-request", "--",
		"acptap", "record", "--store", db, "--name", "cancel-request", "--",
		"testagent", "--chunk-size", "2", "--chunk-delay", "20ms"}
	if out, err := runEditor(dir, requestArgs...); err != nil {
		t.Fatalf("recording the turn cancelled by request: %v\n%s", err, out)
	}
	out, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "cancel-request")
	if !strings.Contains(out, "$/cancel_request") || !strings.Contains(out, "-32800") {
		t.Fatalf("the recording lacks the $/cancel_request or the -32800 answer:\n%s", out)
	}
	for _, name := range []string{"cancel", "reject", "cancel-request"} {
		for i := range 3 {
			out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, name)
			if code != 0 {
				t.Fatalf("replay %s #%d: exit %d\n%s%s", name, i, code, out, errOut)
			}
		}
	}
}

func TestReplayFaultsReachTheAgent(t *testing.T) {
	upstream, _ := chatUpstream(t, false)
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "llm", agentEnv(), []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"}, "--retries", "1")

	// A 429 on the first try: the agent retries and gets the recorded
	// answer; its output is unchanged.
	out, errOut, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--fault", "1=status:429:retry-after=0", "llm")
	if code != 0 {
		t.Errorf("429 then retry: exit %d, want 0\n%s%s", code, out, errOut)
	}
	// Without retries the 429 is what the agent reports: a divergence.
	out, _, code = runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--fault", "1=status:429", "llm", "--", "testagent", "--retries", "0")
	if code != ExitDiverged || !strings.Contains(out, "429") {
		t.Errorf("429 without retry: exit %d, want %d and the agent's 429 error in the diff\n%s", code, ExitDiverged, out)
	}
	// A stream cut after one event and a malformed stream both change what
	// the agent says.
	for _, fault := range []string{"1=cut:1", "1=malformed", "1=reset"} {
		out, _, code = runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--fault", fault, "llm", "--", "testagent", "--retries", "0")
		if code != ExitDiverged {
			t.Errorf("--fault %s: exit %d, want %d\n%s", fault, code, ExitDiverged, out)
		}
	}
	// A hang trips the replay's timeout, which says what it waited for.
	out, _, code = runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--timeout", "500ms", "--fault", "1=hang", "llm")
	if code != ExitDiverged || !strings.Contains(out, "waited") {
		t.Errorf("--fault 1=hang: exit %d, want %d and a timeout naming what it waited for\n%s", code, ExitDiverged, out)
	}
}

// TestReplaySkippedRequestFailsFast checks that an agent that stops asking
// permission is reported at once, not after the wait times out.
func TestReplaySkippedRequestFailsFast(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "perm", agentEnv(), nil, "--read", "notes.txt")
	out, _, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--timeout", "60s", "perm", "--", "testagent", "--read", "notes.txt", "--no-permission")
	if code != ExitDiverged {
		t.Fatalf("exit %d, want %d\n%s", code, ExitDiverged, out)
	}
	if !strings.Contains(out, "did not send session/request_permission #1") || strings.Contains(out, "waited") {
		t.Errorf("want the skipped permission request named and no timeout:\n%s", out)
	}
	if !strings.Contains(out, `-  "method": "session/request_permission",`) {
		t.Errorf("the diff does not show the missing permission request:\n%s", out)
	}
}

func TestReplayRequestsModes(t *testing.T) {
	upstream, _ := chatUpstream(t, false)
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "llm", agentEnv(), []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"})
	changed := []string{"--", "testagent", "--system", " Answer in French."}

	// The agent's output is the same (the recorded answers), but its
	// requests changed: warn by default, fail with --requests fail.
	out, _, code := runAcptap(t, dir, agentEnv(), append([]string{"replay", "--store", db, "llm"}, changed...)...)
	if code != 0 || !strings.Contains(out, "warning: llm #1: the request differs from the recording at") {
		t.Errorf("--requests warn: exit %d, want 0 and a drift warning\n%s", code, out)
	}
	out, _, code = runAcptap(t, dir, agentEnv(), append([]string{"replay", "--store", db, "--requests", "fail", "llm"}, changed...)...)
	if code != ExitDiverged || !strings.Contains(out, "FAIL llm: llm #1: the request differs from the recording at") || !strings.Contains(out, "Answer in French.") {
		t.Errorf("--requests fail: exit %d, want %d naming the changed prompt\n%s", code, ExitDiverged, out)
	}
	out, _, code = runAcptap(t, dir, agentEnv(), append([]string{"replay", "--store", db, "--requests", "ignore", "llm"}, changed...)...)
	if code != 0 || strings.Contains(out, "warning") {
		t.Errorf("--requests ignore: exit %d, want 0 and no warning\n%s", code, out)
	}
	// Unchanged, no drift at all: the date and cwd in the system prompt
	// and the random ids are normalized away.
	out, _, code = runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "--requests", "fail", "llm")
	if code != 0 || strings.Contains(out, "warning") {
		t.Errorf("unchanged agent with --requests fail: exit %d\n%s", code, out)
	}
}

// TestReplayNoAgentCommand checks the one line a recording without an agent
// command gets: what is wrong, then how to fix it on the command line.
func TestReplayNoAgentCommand(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	st, err := store.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Create(store.Recording{Name: "bare"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "bare")
	want := `acptap: replay bare: no agent command: recording "bare" has no agent command; pass -- AGENT [ARGS...]` + "\n"
	if code != ExitUsage || out != "" || errOut != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d, nothing and %q", code, out, errOut, ExitUsage, want)
	}
}

// TestReplaySessions records two sessions whose turns are in flight
// together, each with a tool call behind a permission request, and
// replays them: green every time, whatever order the agent's frames of
// the two sessions come in; and a changed answer in the second session is
// reported in that session's turn.
func TestReplaySessions(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	args := []string{"--sessions", "2", "--prompt", "read it", "--prompt", "again", "--",
		"acptap", "record", "--store", db, "--name", "two", "--",
		"testagent", "--read", "notes.txt", "--chunk-size", "3", "--chunk-delay", "2ms"}
	if out, err := runEditor(dir, args...); err != nil {
		t.Fatalf("recording two sessions: %v\n%s", err, out)
	}
	for i := range 5 {
		out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "two")
		if code != 0 {
			t.Fatalf("replay #%d of two sessions: exit %d\n%s%s", i, code, out, errOut)
		}
	}
	out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "two", "--",
		"testagent", "--read", "notes.txt", "--chunk-size", "3", "--chunk-delay", "2ms", "--plant", "second-session")
	if code != ExitDiverged {
		t.Fatalf("replay with the second session's answer changed: exit %d, want %d\n%s%s", code, ExitDiverged, out, errOut)
	}
	if want := "in turn 1, agent message of <sessionId:2>"; !strings.Contains(out, want) {
		t.Errorf("the report does not say %q:\n%s", want, out)
	}
}

// TestReplayZedSession records what a Zed-like editor sends to an agent
// with every feature of a real editor session (two sessions at once,
// modes, models, session/list, terminals, elicitation, vendor methods
// both ways, session/close and session/load with history) 5 times (20 in
// scripts/test-full), each
// passed through byte for byte and replayed green; then each planted
// change is caught with its own report, and a permission option renamed
// still passes, by kind.
func TestReplayZedSession(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	agent := []string{"testagent", "--read", "notes.txt", "--features", "load,modes,models,terminal,elicit,vendor", "--chunk-size", "4", "--chunk-delay", "1ms"}
	transcript := filepath.Join(t.TempDir(), "transcript.ndjson")
	args := append([]string{"--zed", "--prompt", "read it", "--prompt", "again", "--transcript", transcript, "--",
		"acptap", "record", "--store", db, "--name", "zed", "--"}, agent...)
	if out, err := runEditor(dir, args...); err != nil {
		t.Fatalf("recording the Zed session: %v\n%s", err, out)
	}
	checkPassedThrough(t, db, "zed", transcript)
	out, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "zed")
	for _, method := range []string{"session/set_mode", "session/set_model", "session/list", "session/close", "session/load",
		"terminal/create", "elicitation/create", "_testagent/status", "_testagent/progress"} {
		if !strings.Contains(out, method) {
			t.Errorf("show does not list %s:\n%s", method, out)
		}
	}
	for i := range repeats(t) {
		name := fmt.Sprintf("zed-%d", i)
		transcript := filepath.Join(t.TempDir(), "transcript.ndjson")
		args := append([]string{"--zed", "--prompt", "read it", "--prompt", "again", "--transcript", transcript, "--",
			"acptap", "record", "--store", db, "--name", name, "--"}, agent...)
		if out, err := runEditor(dir, args...); err != nil {
			t.Fatalf("recording the Zed session %s: %v\n%s", name, err, out)
		}
		checkPassedThrough(t, db, name, transcript)
		out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, name)
		if code != 0 {
			t.Fatalf("replay of the Zed session %s: exit %d\n%s%s", name, code, out, errOut)
		}
	}
	replayWith := func(extra ...string) (string, int) {
		t.Helper()
		argv := append([]string{"replay", "--store", db, "zed", "--"}, append(slices.Clone(agent), extra...)...)
		out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), argv...)
		return out + errOut, code
	}
	if out, code := replayWith("--permission-options", "allow_once=proceed_once,reject_once=deny"); code != 0 {
		t.Errorf("permission options renamed: exit %d, want 0 (answered by kind)\n%s", code, out)
	}
	for _, tc := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"a turn of session 2 changed", []string{"--plant", "second-session"}, "agent message of <sessionId:2>"},
		{"a mode that no longer changes the answer", []string{"--plant", "mode-ignored"}, "[code mode]"},
		{"a history notification missing", []string{"--plant", "history-drop"}, "in turn 3, agent message"},
		{"the allow kind removed", []string{"--permission-options", "reject_once=reject"}, "allow_once"},
	} {
		out, code := replayWith(tc.extra...)
		t.Logf("%s: %s", tc.name, firstLine(out))
		if code != ExitDiverged || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want %d and a report saying %q\n%s", tc.name, code, ExitDiverged, tc.want, out)
		}
	}
}

// firstLine returns the first line of s that says something.
func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}

// echoUpstream is a Chat Completions upstream that answers each request
// with the last user message, echoed in a few chunks: two sessions'
// answers differ, so that a request answered with the other session's
// exchange shows in the agent's output.
func echoUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		text := "Echo: " + req.Messages[len(req.Messages)-1].Content
		for _, part := range []string{text[:len(text)/2], text[len(text)/2:]} {
			b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": part}}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestReplaySessionsLLM records two sessions whose turns call the same
// model at once, and replays them with the first session's calls delayed,
// so that the second session's request comes first: each request is
// answered from the exchange of the conversation it continues, and the
// replay is green under --requests fail; by position alone each session
// would get the other's answer.
func TestReplaySessionsLLM(t *testing.T) {
	upstream := echoUpstream(t)
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	args := []string{"--sessions", "2", "--prompt", "one", "--prompt", "two", "--",
		"acptap", "record", "--store", db, "--name", "llm2", "--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1", "--",
		"testagent"}
	if out, err := runEditor(dir, args...); err != nil {
		t.Fatalf("recording two sessions: %v\n%s", err, out)
	}
	for i := range 3 {
		out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "--requests", "fail", "llm2", "--",
			"testagent", "--llm-delay", "1=150ms")
		if code != 0 {
			t.Fatalf("replay #%d with session 1's calls delayed: exit %d\n%s%s", i, code, out, errOut)
		}
	}
}

// checkPassedThrough checks that what the editor sent and got (its
// transcript) is what the recording holds, byte for byte, in order: the
// editor's lines as the editor lane, the agent's as the agent lane.
func checkPassedThrough(t *testing.T, db, name, transcript string) {
	t.Helper()
	b, err := os.ReadFile(transcript)
	if err != nil {
		t.Fatal(err)
	}
	var sent, got []string
	for line := range strings.Lines(string(b)) {
		var m struct {
			Dir string          `json:"dir"`
			Msg json.RawMessage `json:"msg"`
			Raw string          `json:"raw"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || m.Dir == "" {
			continue
		}
		text := m.Raw
		if m.Msg != nil {
			text = string(m.Msg)
		}
		if m.Dir == "send" {
			sent = append(sent, text)
		} else {
			got = append(got, text)
		}
	}
	out, err := exec.Command("acptap", "show", "--store", db, "--json", name).Output()
	if err != nil {
		t.Fatalf("show --json %s: %v", name, err)
	}
	var editor, agent []string
	for line := range strings.Lines(string(out)) {
		var e struct {
			Lane string `json:"lane"`
			Raw  string `json:"raw"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		switch e.Lane {
		case "editor":
			editor = append(editor, e.Raw)
		case "agent":
			if strings.TrimSpace(e.Raw) != "" {
				agent = append(agent, e.Raw)
			}
		}
	}
	if len(sent) < 20 || !slices.Equal(sent, editor) {
		t.Errorf("the editor sent %d lines, the recording's editor lane holds %d, not the same bytes", len(sent), len(editor))
	}
	if len(got) < 20 || !slices.Equal(got, agent) {
		t.Errorf("the editor got %d lines, the recording's agent lane holds %d, not the same bytes", len(got), len(agent))
	}
}

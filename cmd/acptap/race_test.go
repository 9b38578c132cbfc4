package main

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/demollm"
)

// recordEditor records the test agent with agentArgs through acptap record
// with recordFlags, driven by the scripted editor with editorArgs, in dir.
func recordEditor(t *testing.T, dir, db, name string, env, editorArgs, recordFlags []string, agentArgs ...string) {
	t.Helper()
	args := append(append([]string{}, editorArgs...), "--", "acptap", "record", "--store", db, "--name", name)
	args = append(append(append(args, recordFlags...), "--", "testagent"), agentArgs...)
	cmd := exec.Command("testeditor", args...)
	cmd.Dir = dir
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("recording %s: %v\n%s", name, err, out)
	}
}

// repeatsEnv sets how many times the tests that replay a recording again
// and again, to catch a replay that passes only sometimes, replay it: 5
// by default, 20 in scripts/test-full.
const repeatsEnv = "ACPTAP_TEST_REPEATS"

// repeats returns how many times to replay (see repeatsEnv).
func repeats(t *testing.T) int {
	t.Helper()
	s := os.Getenv(repeatsEnv)
	if s == "" {
		return 5
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a count of 1 or more", repeatsEnv, s)
	}
	return n
}

// replayTimes replays a recording n times, each in a directory of its
// own, and fails at the first that does not pass.
func replayTimes(t *testing.T, n int, db, name string, args ...string) {
	t.Helper()
	for i := range n {
		out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), append([]string{"replay", "--store", db, name}, args...)...)
		if code != 0 || !strings.HasPrefix(out, "PASS "+name) {
			t.Fatalf("replay %d of %d: exit %d, want PASS and 0\n%s%s", i+1, n, code, out, errOut)
		}
	}
}

// TestReplayConcurrentUpdatesRepeatedly records the test agent sending a
// tool call's last update ~15 ms late, an available_commands_update racing
// the session/new answer and a usage_update racing each turn's answer,
// from concurrent tasks, scripted and calling an LLM by both routes; each
// replays equal every time of 5 (20 in scripts/test-full) with the
// defaults, whichever order scheduling gave the recording and each
// replay.
func TestReplayConcurrentUpdatesRepeatedly(t *testing.T) {
	for _, mode := range []string{"scripted", "base-url", "proxy-tls"} {
		t.Run(mode, func(t *testing.T) {
			dir := workspace(t)
			db := filepath.Join(dir, "s.db")
			editor := []string{"--prompt", "Fix the typo in notes.txt", "--prompt", "Thanks!"}
			agent := []string{"--concurrent-updates", "timed"}
			env := agentEnv("OPENAI_API_KEY=sk-live-key-0123456789")
			var flags []string
			switch mode {
			case "scripted":
				agent = append(agent, "--read", "notes.txt", "--chunk-size", "3")
			case "base-url":
				llm := httptest.NewServer(demollm.Handler())
				t.Cleanup(llm.Close)
				flags = []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + llm.URL + "/v1"}
			case "proxy-tls":
				llm := httptest.NewTLSServer(demollm.Handler())
				t.Cleanup(llm.Close)
				// The fake LLM is on loopback: only --proxy-loopback sends it
				// through the tap.
				flags = []string{"--proxy-loopback", "--upstream-ca", caFile(t, llm)}
				agent = append(agent, "--llm", llm.URL+"/v1")
			}
			recordEditor(t, dir, db, "race", env, editor, flags, agent...)
			agentLines, _ := showLines(t, db, "race")
			for _, want := range []string{`"update":"available_commands_update"`, `"update":"usage_update"`, `\"status\":\"completed\"`} {
				if !strings.Contains(strings.Join(agentLines, "\n"), want) {
					t.Fatalf("the recording lacks %s:\n%s", want, strings.Join(agentLines, "\n"))
				}
			}
			replayTimes(t, repeats(t), db, "race")
		})
	}
}

// TestReplayCancelWithConcurrentUpdates replays a turn cancelled mid-way
// by the editor, while an available_commands_update raced the session/new
// answer and the editor's prompt: the cancel waits for the turn's
// progress, not for the state notification.
func TestReplayCancelWithConcurrentUpdates(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordEditor(t, dir, db, "cancel", agentEnv(), []string{"--prompt", "a long answer please", "--cancel-after", "3"}, nil,
		"--concurrent-updates", "timed", "--chunk-size", "2", "--chunk-delay", "50ms")
	replayTimes(t, repeats(t), db, "cancel")
}

// TestReplayOrderStrict records the tool call's last update after the
// message chunks and replays an agent that sends it before them: equal
// per stream, a divergence under --order strict, which reports the update
// as moved; the same order is equal under both.
func TestReplayOrderStrict(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "late", agentEnv(), nil, "--read", "notes.txt", "--concurrent-updates", "late", "--racing", "tool")
	early := []string{"--", "testagent", "--read", "notes.txt", "--concurrent-updates", "early", "--racing", "tool"}

	replayTimes(t, 1, db, "late", early...)
	out, _, code := runAcptap(t, t.TempDir(), agentEnv(), append([]string{"replay", "--store", db, "--order", "strict", "late"}, early...)...)
	want := `expected agent_message_chunk "You said: fix the typo", got tool_call_update (completed); the recorded $[`
	if code != ExitDiverged || !strings.HasPrefix(out, "FAIL late: agent output differs at $[") || !strings.Contains(out, want) || !strings.Contains(out, "moved: it is $[") {
		t.Errorf("--order strict with the update moved: exit %d, want %d and the update reported moved (%q):\n%s", code, ExitDiverged, want, out)
	}
	for _, order := range []string{"strict", "stream"} {
		replayTimes(t, 1, db, "late", "--order", order)
	}
}

// TestReplayCatchesChangesWithinStreams checks that the comparison per
// stream still catches changes within a stream, and names each.
func TestReplayCatchesChangesWithinStreams(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	agent := []string{"--concurrent-updates", "late", "--chunk-size", "8"}
	recordSession(t, dir, db, "tool", agentEnv(), nil, append([]string{"--read", "notes.txt"}, agent...)...)
	recordSession(t, dir, db, "plain", agentEnv(), nil, agent...)
	for _, tc := range []struct {
		name, recording string
		args            []string // the replayed agent's, besides agent's
		want            string   // what FAIL's line says after "agent output differs "
	}{
		{"two message chunks swapped", "tool", []string{"--read", "notes.txt", "--plant", "swap-chunks"},
			`in turn 1, agent message, update 1: content.text: expected "You said: fix the typo", got ": fix thYou saide typo"`},
		{"in_progress after completed", "tool", []string{"--read", "notes.txt", "--plant", "progress-last"},
			`in turn 1, tool call <toolCallId:1>, update 2: status: expected "in_progress", got "completed"`},
		{"a changed tool status", "tool", []string{"--read", "notes.txt", "--plant", "status-failed"},
			`in turn 1, tool call <toolCallId:1>, update 3: status: expected "completed", got "failed"`},
		{"a tool call missing", "tool", nil,
			`in turn 1, tool call <toolCallId:1> is missing (3 updates recorded, the first tool_call "Read notes.txt" (pending))`},
		{"a tool call added", "plain", []string{"--read", "notes.txt"},
			`in turn 1, tool call <toolCallId:1> was added (`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"replay", "--store", db, tc.recording, "--", "testagent"}, append(append([]string{}, agent...), tc.args...)...)
			out, _, code := runAcptap(t, t.TempDir(), agentEnv(), args...)
			if prefix := "FAIL " + tc.recording + ": agent output differs " + tc.want; code != ExitDiverged || !strings.HasPrefix(out, prefix) {
				t.Errorf("exit %d, want %d and a report starting %q:\n%s", code, ExitDiverged, prefix, out)
			}
		})
	}
}

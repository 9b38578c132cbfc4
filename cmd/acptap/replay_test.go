package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// runAcptap runs acptap as a real process and returns its output and exit
// code.
func runAcptap(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command("acptap", args...)
	cmd.Dir = dir
	cmd.Env = env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("acptap %v: %v", args, err)
	}
	return o.String(), e.String(), 0
}

// recordSession records the test agent driven by the scripted editor in
// dir, a workspace with a notes.txt the agent reads.
func recordSession(t *testing.T, dir, db, name string, env []string, recordFlags []string, agentArgs ...string) {
	t.Helper()
	args := []string{"--prompt", "fix the typo", "--prompt", "thanks", "--", "acptap", "record", "--store", db, "--name", name}
	args = append(append(append(args, recordFlags...), "--", "testagent"), agentArgs...)
	cmd := exec.Command("testeditor", args...)
	cmd.Dir = dir
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("recording %s: %v\n%s", name, err, out)
	}
}

func workspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("Teh quick brown fox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReplayEqualRepeatedly records a session with string ids and replays
// it 5 times (20 in scripts/test-full) elsewhere: every replay passes.
func TestReplayEqualRepeatedly(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "typo", agentEnv(), nil, "--read", "notes.txt", "--string-ids", "--chunk-size", "3")
	// The replay runs elsewhere, in its own sandbox: a different directory
	// and no notes.txt but the recorded editor answers.
	other := t.TempDir()
	for i := range repeats(t) {
		out, errOut, code := runAcptap(t, other, agentEnv(), "replay", "--store", db, "typo")
		if code != 0 || !strings.HasPrefix(out, "PASS typo") {
			t.Fatalf("replay %d: exit %d, stdout %q, stderr %q; want PASS and exit 0", i, code, out, errOut)
		}
	}
}

func TestReplayCatchesAChangedAgent(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "typo", agentEnv(), nil, "--read", "notes.txt")
	out, _, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "typo", "--", "testagent", "--read", "notes.txt", "--message", "Something else entirely")
	if code != ExitDiverged {
		t.Fatalf("exit %d, want %d; stdout:\n%s", code, ExitDiverged, out)
	}
	for _, want := range []string{
		`FAIL typo: agent output differs in turn 1, agent message, update 1: content.text: expected "You said: fix the typo", got "Something else entirely"`,
		"--- recorded", "+++ replayed",
		`-        "text": "You said: fix the typo",`,
		`+        "text": "Something else entirely",`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("replay output lacks %q:\n%s", want, out)
		}
	}
}

// countingUpstream is an OpenAI-compatible upstream that counts every
// request; a replay must never reach it.
func countingUpstream(t *testing.T, useTLS bool) (*httptest.Server, *atomic.Int32) {
	srv, n := chatUpstream(t, useTLS)
	return srv, n
}

func TestReplayLLMOfflineByBothRoutes(t *testing.T) {
	for _, route := range []string{"base-url", "proxy-tls"} {
		t.Run(route, func(t *testing.T) {
			dir := workspace(t)
			db := filepath.Join(dir, "s.db")
			useTLS := route == "proxy-tls"
			upstream, hits := countingUpstream(t, useTLS)
			env := agentEnv("OPENAI_API_KEY=sk-live-key-0123456789")
			var flags, agentArgs []string
			if useTLS {
				// The upstream is on loopback: a local LLM reached by the
				// proxy.
				flags = []string{"--proxy-loopback", "--upstream-ca", caFile(t, upstream)}
				agentArgs = []string{"--llm", upstream.URL + "/v1", "--title-call"}
			} else {
				flags = []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"}
				agentArgs = []string{"--title-call"}
			}
			recordSession(t, dir, db, "llm", env, flags, agentArgs...)
			recorded := hits.Load()
			if recorded != 3 {
				t.Fatalf("upstream got %d requests while recording, want 3 (title + two turns)", recorded)
			}
			// The upstream stays up as a sentinel: the replay must not
			// reach it, nor need the key.
			for i := range 5 {
				out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), append([]string{"replay", "--store", db, "llm", "--"}, replayArgv(db, t)...)...)
				if code != 0 {
					t.Fatalf("replay %d: exit %d\n%s%s", i, code, out, errOut)
				}
			}
			if got := hits.Load(); got != recorded {
				t.Errorf("the upstream got %d requests during replay, want none", got-recorded)
			}
		})
	}
}

// replayArgv returns the recorded agent command, to replay it explicitly.
func replayArgv(db string, t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("acptap", "show", "--store", db, "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var line struct {
		Argv []string `json:"argv"`
	}
	if err := jsonUnmarshal(bytes.TrimSpace(out), &line); err != nil {
		t.Fatal(err)
	}
	return line.Argv
}

func TestReplayCatchesOneLLMCallMoreOrFewer(t *testing.T) {
	upstream, _ := chatUpstream(t, false)
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	flags := []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"}
	recordSession(t, dir, db, "plain", agentEnv(), flags)
	recordSession(t, dir, db, "titled", agentEnv(), flags, "--title-call")

	// One more: the title call has no recorded answer.
	out, _, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "plain", "--", "testagent", "--title-call")
	if code != ExitDiverged || !strings.Contains(out, "no recorded exchange for POST /v1/chat/completions model title-model") {
		t.Errorf("one call more: exit %d, want %d and the unanswered request named:\n%s", code, ExitDiverged, out)
	}
	// One fewer: the recorded title call is never requested.
	out, _, code = runAcptap(t, dir, agentEnv(), "replay", "--store", db, "titled", "--", "testagent")
	if code != ExitDiverged || !strings.Contains(out, "was recorded but never requested") {
		t.Errorf("one call fewer: exit %d, want %d and the unrequested exchange named:\n%s", code, ExitDiverged, out)
	}
}

func TestReplayAllSummary(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "a", agentEnv(), nil)
	recordSession(t, dir, db, "b", agentEnv(), nil, "--read", "notes.txt")
	out, _, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--all")
	if code != 0 || !strings.Contains(out, "PASS a") || !strings.Contains(out, "PASS b") || !strings.Contains(out, "2 passed, 0 failed") {
		t.Errorf("replay --all: exit %d\n%s", code, out)
	}
	out, _, code = runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--all", "--", "testagent", "--message", "x")
	if code != ExitDiverged || !strings.Contains(out, "0 passed, 2 failed") {
		t.Errorf("replay --all with a changed agent: exit %d, want %d\n%s", code, ExitDiverged, out)
	}
}

var _ = http.StatusOK

// runEditor runs the scripted editor in dir with the test environment.
func runEditor(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("testeditor", args...)
	cmd.Dir = dir
	cmd.Env = agentEnv()
	return cmd.CombinedOutput()
}

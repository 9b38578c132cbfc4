package main

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/demollm"
	"github.com/acptap/acptap/store"
)

// noiseSession records the test agent with --noise, which puts a fresh
// directory of its own, the workspace path with "/" as "-" and
// percent-encoded, a random token and its pid into its system prompt and
// tool output, in dir, a workspace with notes.txt and other.txt.
func noiseSession(t *testing.T, dir, db, name string, prompts []string, recordFlags []string, agentArgs ...string) {
	t.Helper()
	var args []string
	for _, p := range prompts {
		args = append(args, "--prompt", p)
	}
	args = append(append(append(args, "--", "acptap", "record", "--store", db, "--name", name), recordFlags...), "--", "testagent", "--noise")
	if out, err := runEditor(dir, append(args, agentArgs...)...); err != nil {
		t.Fatalf("recording %s: %v\n%s", name, err, out)
	}
}

func noiseWorkspace(t *testing.T) string {
	t.Helper()
	dir := workspace(t)
	if err := os.WriteFile(filepath.Join(dir, "other.txt"), []byte("Another file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mustContain fails t for each of wants that out lacks.
func mustContain(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// TestCalibrateLLMAgent records the LLM-backed test agent with --noise
// through both routes to the LLM: it replays red, with request drift,
// until calibrate has learned its noise; then it replays green 5 times
// (20 in scripts/test-full) with --requests fail, and a changed system
// prompt is still caught.
func TestCalibrateLLMAgent(t *testing.T) {
	for _, route := range []string{"base-url", "proxy-tls"} {
		t.Run(route, func(t *testing.T) {
			dir := noiseWorkspace(t)
			db := filepath.Join(dir, "s.db")
			var upstream *httptest.Server
			var flags, agentArgs []string
			if route == "proxy-tls" {
				upstream = httptest.NewTLSServer(demollm.Handler())
				// The upstream is on loopback, which the proxy leaves
				// alone unless told.
				flags = []string{"--proxy-loopback", "--upstream-ca", caFile(t, upstream)}
				agentArgs = []string{"--llm", upstream.URL + "/v1"}
			} else {
				upstream = httptest.NewServer(demollm.Handler())
				flags = []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"}
			}
			defer upstream.Close()
			noiseSession(t, dir, db, "noise", []string{"Fix the typo in notes.txt", "Thanks!"}, flags, agentArgs...)
			upstream.Close() // replays are offline

			// Uncalibrated: the run's directory differs in the tool's
			// output, and in the system prompt.
			out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "noise")
			if code != ExitDiverged {
				t.Fatalf("uncalibrated replay: exit %d, want %d\n%s%s", code, ExitDiverged, out, errOut)
			}
			mustContain(t, "the uncalibrated replay", out,
				"FAIL noise: agent output differs in turn 1, tool call <toolCallId:1>, update 2: content[0].content.text, character ", "cached as <tmp>/agent-home.",
				"warning: llm #1: the request differs from the recording at $.body.messages[0].content, character ", "scratch directory is <tmp>/agent-home.")

			out, errOut, code = runAcptap(t, t.TempDir(), agentEnv(), "calibrate", "--store", db, "noise")
			if code != 0 {
				t.Fatalf("calibrate: exit %d, want 0\n%s%s", code, out, errOut)
			}
			mustContain(t, "calibrate's output", out,
				"CALIBRATED noise (3 runs): 6 rules stored with the recording\n",
				`{"path":"$.params.update.content[*].content.text","regexp":"( as <tmp>/agent-home\\.)[0-9A-Za-z]{6}(/projects/<cwd>/notes\\.)","replace":"${1}<random>${2}"}`,
				`{"path":"$.params.update.content[*].content.text","regexp":"(\nshell job )[0-9]+$","replace":"${1}<number>"}`,
				`{"path":"$.params.update.rawOutput.run","regexp":"^[0-9a-f]{16}$","replace":"<hex>"}`,
				`{"path":"$.body.messages[*].content","regexp":"( is <tmp>/agent-home\\.)[0-9A-Za-z]{6}(; the project's notes )","replace":"${1}<random>${2}"}`,
				`{"path":"$.body.metadata.run","regexp":"^[0-9a-f]{16}$","replace":"<hex>"}`,
				`varies at llm #1 $.body.metadata.run: "`)
			show, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "noise")
			mustContain(t, "show", show, "\n  calibrated: 6 rules, applied by replay\n", `"path":"$.body.metadata.run"`)

			for i := range repeats(t) {
				out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "--requests", "fail", "noise")
				if code != 0 || !strings.HasPrefix(out, "PASS noise") || strings.Contains(out, "warning") {
					t.Fatalf("calibrated replay %d: exit %d; want PASS, no warning, exit 0\n%s%s", i+1, code, out, errOut)
				}
			}

			// A changed system prompt is still caught, and shown where
			// it changed.
			argv := append(replayArgv(db, t), "--system", " Answer in French.")
			out, _, code = runAcptap(t, t.TempDir(), agentEnv(), append([]string{"replay", "--store", db, "--requests", "fail", "noise", "--"}, argv...)...)
			if code != ExitDiverged {
				t.Fatalf("a changed system prompt: exit %d, want %d\n%s", code, ExitDiverged, out)
			}
			mustContain(t, "the report of a changed system prompt", out,
				`FAIL noise: llm #1: the request differs from the recording at $.body.messages[0].content, character `,
				`. Use the read_file tool to read files.", live …"`, `Use the read_file tool to read files. Answer in French."`)
		})
	}
}

// TestCalibrateScriptedAgent: the scripted test agent with --noise reads
// a file through a tool whose output names the run's directory, its pid
// and a token. After calibrate it replays green; a changed message, a
// changed tool argument, a missing and an extra tool call are caught;
// calibrating a changed agent learns nothing and keeps the rules;
// --update and rm keep working.
func TestCalibrateScriptedAgent(t *testing.T) {
	dir := noiseWorkspace(t)
	db := filepath.Join(dir, "s.db")
	noiseSession(t, dir, db, "tool", []string{"fix the typo", "thanks"}, nil, "--read", "notes.txt")
	if out, _, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "tool"); code != ExitDiverged {
		t.Fatalf("uncalibrated replay: exit %d, want %d\n%s", code, ExitDiverged, out)
	}
	out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "calibrate", "--store", db, "--runs", "4", "tool")
	if code != 0 || !strings.HasPrefix(out, "CALIBRATED tool (4 runs): 3 rules stored with the recording\n") {
		t.Fatalf("calibrate: exit %d, want 0 and 3 rules\n%s%s", code, out, errOut)
	}
	rules := regexp.MustCompile(`(?m)^      \{.*$`).FindAllString(showOf(t, db, "tool"), -1)
	if len(rules) != 3 {
		t.Fatalf("show lists %d rules, want 3", len(rules))
	}
	for i := range 5 {
		if out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "tool"); code != 0 {
			t.Fatalf("calibrated replay %d: exit %d\n%s%s", i+1, code, out, errOut)
		}
	}

	agent := []string{"testagent", "--noise"}
	for _, tc := range []struct {
		name  string
		args  []string
		wants []string
	}{
		{"a changed message", []string{"--read", "notes.txt", "--message", "Something else"},
			[]string{`agent message, update 1: content.text: expected "You said: fix the typo", got "Something else"`}},
		{"a changed tool argument", []string{"--read", "other.txt"},
			[]string{`tool call <toolCallId:1>, update 1: title: expected "Read notes.txt", got "Read other.txt"`}},
		{"a missing tool call", nil,
			[]string{"the agent did not send session/request_permission #1"}},
		{"an extra tool call", []string{"--read", "notes.txt", "--read", "notes.txt"},
			[]string{`FAIL tool: agent output differs in turn 1, `}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"replay", "--store", db, "--timeout", "5s", "tool", "--"}, append(agent, tc.args...)...)
			out, _, code := runAcptap(t, t.TempDir(), agentEnv(), args...)
			if code != ExitDiverged {
				t.Fatalf("exit %d, want %d\n%s", code, ExitDiverged, out)
			}
			mustContain(t, "the report", out, tc.wants...)
		})
	}

	// Calibrating a changed agent learns nothing, and leaves the rules
	// as they were: a message that changed the same way in every run, or
	// a request every run lacks, is a change (or a rare behaviour the
	// recording caught); a stream more is more than a value.
	before := showOf(t, db, "tool")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--read", "notes.txt", "--message", "Something else"},
			`FAIL tool: every run differs from the recording the same way, which is no noise: the recording caught a rare behaviour, or the agent changed since; at agent output $[6].params.update.content.text: recorded "You said: fix the typo", live "Something else"; nothing learned`},
		{[]string{"--read", "notes.txt", "--thought", "Let me see."},
			`FAIL tool: run 1 differs from the recording in more than values at agent output turn 1, agent thought, value 1: recorded nothing, live {`},
		{[]string{"--no-permission", "--read", "notes.txt"},
			`FAIL tool: every run differs from the recording the same way, which is no noise: the recording caught a rare behaviour, or the agent changed since; at agent output turn 1, requests and responses, value 3: recorded {"id":"<agentRpc:1>","jsonrpc":"2.0","method":"session/request_permission"`},
	} {
		out, _, code := runAcptap(t, t.TempDir(), agentEnv(), append([]string{"calibrate", "--store", db, "tool", "--"}, append(agent, tc.args...)...)...)
		if code != ExitDiverged || !strings.Contains(out, tc.want) {
			t.Errorf("calibrate -- %v: exit %d, want %d and\n%s\ngot\n%s", tc.args, code, ExitDiverged, tc.want, out)
		}
	}
	if after := showOf(t, db, "tool"); after != before {
		t.Errorf("a failed calibration changed the recording:\n%s\nwas\n%s", after, before)
	}

	// --update rewrites the expected output and keeps the rules.
	changed := append([]string{"replay", "--store", db, "--update", "tool", "--"}, append(agent, "--read", "notes.txt", "--message", "Something else")...)
	if out, _, code := runAcptap(t, t.TempDir(), agentEnv(), changed...); code != 0 || !strings.HasPrefix(out, "UPDATED tool") {
		t.Fatalf("replay --update: exit %d\n%s", code, out)
	}
	if got := regexp.MustCompile(`(?m)^      \{.*$`).FindAllString(showOf(t, db, "tool"), -1); strings.Join(got, "\n") != strings.Join(rules, "\n") {
		t.Errorf("after --update, show lists the rules\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(rules, "\n"))
	}
	for range 3 {
		args := append([]string{"replay", "--store", db, "tool", "--"}, append(agent, "--read", "notes.txt", "--message", "Something else")...)
		if out, _, code := runAcptap(t, t.TempDir(), agentEnv(), args...); code != 0 {
			t.Fatalf("replay of the updated recording: exit %d\n%s", code, out)
		}
	}

	if out, errOut, code := runAcptap(t, dir, agentEnv(), "rm", "--store", db, "tool"); code != 0 {
		t.Fatalf("rm: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := runAcptap(t, dir, agentEnv(), "calibrate", "--store", db, "tool"); code != ExitUsage || !strings.Contains(errOut, `"tool"`) {
		t.Errorf("calibrate of a removed recording: exit %d, %q; want %d naming it", code, errOut, ExitUsage)
	}
}

func showOf(t *testing.T, db, name string) string {
	t.Helper()
	out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "show", "--store", db, name)
	if code != 0 {
		t.Fatalf("show %s: exit %d\n%s", name, code, errOut)
	}
	return out
}

// recordedToolDone reports whether recording name of db holds a tool
// call's completed update from the agent.
func recordedToolDone(t *testing.T, db, name string) bool {
	t.Helper()
	st, err := store.Open(db, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	found := false
	err = st.Events(name, func(e store.Event) error {
		found = found || e.Kind == store.KindFrame && e.Lane == store.LaneAgent &&
			bytes.Contains(e.Data, []byte(`"sessionUpdate":"tool_call_update"`)) && bytes.Contains(e.Data, []byte(`"status":"completed"`))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestCalibratePresence records the test agent with --flaky tool-done,
// which sends a tool call's final update in about half the runs, as
// codex-acp does, until a recording lacks it. Such a recording fails the
// replays whose agent sends it, with a hint to calibrate; calibrate
// refuses an agent that always sends it (the recording caught a rare
// behaviour) and learns a presence rule from the flaky one, which show
// lists; then 20 replays pass, and a changed message or a tool call
// missing whole still fail.
func TestCalibratePresence(t *testing.T) {
	dir := workspace(t)
	// Runs alternate, sending and not: no chance in it.
	seq := filepath.Join(t.TempDir(), "seq")
	var db string
	for i := range 30 {
		db = filepath.Join(dir, fmt.Sprintf("s%d.db", i))
		recordSession(t, dir, db, "flaky", agentEnv(), nil, "--read", "notes.txt", "--flaky", "tool-done", "--flaky-seq", seq)
		if !recordedToolDone(t, db, "flaky") {
			break
		}
	}
	if recordedToolDone(t, db, "flaky") {
		t.Fatal("30 recordings all have the tool call's final update")
	}
	replay := func(agent ...string) (string, int) {
		args := []string{"replay", "--store", db, "flaky"}
		if agent != nil {
			args = append(append(args, "--", "testagent"), agent...)
		}
		out, errOut, code := runAcptap(t, dir, agentEnv(), args...)
		return out + errOut, code
	}
	failed := false
	for range 20 {
		out, code := replay()
		if code == ExitDiverged {
			mustContain(t, "the uncalibrated replay", out,
				"FAIL flaky: agent output differs in turn 1, tool call <toolCallId:1>, update 2: expected nothing, got tool_call_update (completed)",
				"hint: if this varies from run to run, `acptap calibrate flaky` learns it as a rule")
			failed = true
			break
		}
	}
	if !failed {
		t.Fatal("20 uncalibrated replays passed; want those whose agent sends the update to fail")
	}

	// An agent that always sends it: every run differs from the recording
	// alike, which is no noise.
	out, errOut, code := runAcptap(t, dir, agentEnv(), "calibrate", "--store", db, "flaky", "--", "testagent", "--read", "notes.txt")
	if code != ExitDiverged {
		t.Fatalf("calibrate of an agent always sending the update: exit %d, want %d\n%s%s", code, ExitDiverged, out, errOut)
	}
	mustContain(t, "calibrate of an agent always sending the update", out,
		"FAIL flaky: every run differs from the recording the same way, which is no noise: the recording caught a rare behaviour, or the agent changed since; at agent output turn 1, tool call <toolCallId:1>, value 2: recorded nothing, live {",
		"fix: acptap replay --update flaky takes the runs' behaviour as the expected one; or record the session again")

	out, errOut, code = runAcptap(t, dir, agentEnv(), "calibrate", "--store", db, "--runs", "10", "flaky")
	if code != 0 {
		t.Fatalf("calibrate: exit %d\n%s%s", code, out, errOut)
	}
	rule := `{"at":"last","optional":"update tool_call_update completed"}`
	mustContain(t, "calibrate", out,
		"CALIBRATED flaky (20 runs): 1 rule stored with the recording",
		"sent in some runs only at agent output turn 1, tool call <toolCallId:1>: tool_call_update (completed); recorded 0, runs ",
		"    "+rule+"\n")
	out, errOut, code = runAcptap(t, dir, agentEnv(), "show", "--store", db, "flaky")
	if code != 0 {
		t.Fatalf("show: exit %d\n%s%s", code, out, errOut)
	}
	mustContain(t, "show", out, "calibrated: 1 rules, applied by replay", "sent in some runs only at agent output turn 1", "      "+rule+"\n")

	for i := range repeats(t) {
		if out, code := replay(); code != 0 {
			t.Fatalf("calibrated replay %d: exit %d\n%s", i+1, code, out)
		}
	}
	for _, change := range [][]string{
		{"--read", "notes.txt", "--flaky", "tool-done", "--flaky-seq", seq, "--message", "Something else"},
		{"--flaky", "tool-done", "--flaky-seq", seq},
	} {
		if out, code := replay(change...); code != ExitDiverged {
			t.Errorf("calibrated replay of testagent %q: exit %d, want %d\n%s", change, code, ExitDiverged, out)
		}
	}
}

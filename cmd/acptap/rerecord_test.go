package main

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/demollm"
)

// TestRerecord re-records, against the scripted LLM, an editor-made
// recording and a scenario's of the LLM-backed test agent, after its
// system prompt changed: without the key it refuses naming it; with it,
// the report names what changed, the previous version stays (replayed
// green as it was) until accepted; once accepted, the new version replays
// green with the changed agent, and red with the old one.
func TestRerecord(t *testing.T) {
	upstream := httptest.NewServer(demollm.Handler())
	defer upstream.Close()
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	env := agentEnv("OPENAI_API_KEY=sk-rerecord-test-0123456789abcdefghijklmnop")
	route := []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"}

	// An editor-made recording, and a scenario's.
	args := append([]string{"--prompt", "Fix the typo in notes.txt", "--", "acptap", "record", "--store", db, "--name", "editor"}, route...)
	if out, err := runEditorEnv(dir, env, append(args, "--", "testagent")...); err != nil {
		t.Fatalf("recording: %v\n%s", err, out)
	}
	scenarioFile := filepath.Join(dir, "scripted.json")
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "ws", "notes.txt"), "Teh quick brown fox jumps over the lazy dog.\n")
	writeFile(t, scenarioFile, `{"workspace": "ws", "prompts": ["Fix the typo in notes.txt"], "permissions": ["allow_once"]}`)
	out, errOut, code := runAcptap(t, dir, env, append(append([]string{"record", "--store", db, "--scenario", scenarioFile}, route...), "--", "testagent")...)
	if code != 0 || !strings.HasPrefix(out, "RECORDED scripted (1 turn: end_turn)") {
		t.Fatalf("record --scenario: exit %d\n%s%s", code, out, errOut)
	}

	// Without the key: refused, naming it, before anything runs.
	noKey := agentEnv()
	out, errOut, code = runAcptap(t, dir, noKey, "rerecord", "--store", db, "editor")
	if code != ExitUsage || errOut != "acptap: rerecord editor: the agent had OPENAI_API_KEY when recorded, which is not set here; rerecord calls the live LLM: set it\n" || out != "" {
		t.Errorf("rerecord without the key: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	if _, err := os.Stat(db + ".pending"); err == nil {
		t.Errorf("a refused rerecord left %s.pending", db)
	}

	// The agent's system prompt changed.
	changed := []string{"--", "testagent", "--system", "Answer in French."}
	out, errOut, code = runAcptap(t, dir, env, append([]string{"rerecord", "--store", db, "editor", "scripted"}, changed...)...)
	if code != 0 {
		t.Fatalf("rerecord: exit %d\n%s%s", code, out, errOut)
	}
	mustContain(t, "rerecord's report", out,
		"RERECORDED editor in ", ": changed against the previous version\n",
		`DIFFERENT previous new: llm request 1 differs at $.body.messages[0].content, character 143: previous …">. Use the read_file tool to read files.", new …">. Use the read_file tool to read files.Answer in French."`,
		"RERECORDED scripted in ",
		"the new versions are kept in "+db+".pending; accept them with: acptap rerecord --store "+db+" --review\n")
	// The previous versions stay: they replay green with the old agent.
	for _, name := range []string{"editor", "scripted"} {
		if out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, name); code != 0 {
			t.Errorf("replay of the previous %s: exit %d\n%s%s", name, code, out, errOut)
		}
	}

	// Review: accept the first, skip the second.
	cmd := exec.Command("acptap", "rerecord", "--store", db, "--review")
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = strings.NewReader("a\ns\n")
	review, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rerecord --review: %v\n%s", err, review)
	}
	mustContain(t, "the review", string(review),
		"[1/2] RERECORDED editor", "accept the new version of editor? [a]ccept, [s]kip, [q]uit: accepted editor\n",
		"[2/2] RERECORDED scripted", "skipped scripted: its new version stays in "+db+".pending\n",
		"1 accepted, 1 skipped, 0 left to review\n")
	// The accepted version replays green with the changed agent only.
	out, errOut, code = runAcptap(t, t.TempDir(), agentEnv(), append([]string{"replay", "--store", db, "--requests", "fail", "editor"}, changed...)...)
	if code != 0 || !strings.HasPrefix(out, "PASS editor") {
		t.Errorf("replay of the accepted version with the changed agent: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "--requests", "fail", "editor", "--", "testagent")
	if code != ExitDiverged || !strings.Contains(out, "Answer in French.") {
		t.Errorf("replay of the accepted version with the old agent: exit %d, want %d naming the change\n%s", code, ExitDiverged, out)
	}

	// --accept at once: the scenario's, after its prompt changed too.
	writeFile(t, scenarioFile, `{"workspace": "ws", "prompts": ["Fix the typos in notes.txt, all of them"], "permissions": ["allow_once"]}`)
	out, errOut, code = runAcptap(t, dir, env, append([]string{"rerecord", "--store", db, "--accept", "scripted"}, changed...)...)
	if code != 0 {
		t.Fatalf("rerecord --accept: exit %d\n%s%s", code, out, errOut)
	}
	mustContain(t, "rerecord --accept", out, "RERECORDED scripted", "(and 1 more difference)", "  accepted: scripted is the new version\n")
	if _, err := os.Stat(db + ".pending"); err == nil {
		t.Errorf("%s.pending is left once every new version is accepted", db)
	}
	show, _, _ := runAcptap(t, dir, env, "show", "--store", db, "scripted")
	mustContain(t, "show of the accepted scenario", show, `"Fix the typos in notes.txt, all of them"`, "driven by the scenario "+scenarioFile)
	out, errOut, code = runAcptap(t, t.TempDir(), agentEnv(), append([]string{"replay", "--store", db, "--requests", "fail", "scripted"}, changed...)...)
	if code != 0 {
		t.Errorf("replay of the accepted scenario: exit %d\n%s%s", code, out, errOut)
	}
}

func runEditorEnv(dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.Command("testeditor", args...)
	cmd.Dir, cmd.Env = dir, env
	return cmd.CombinedOutput()
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExportReviewDiff records a scenario with the test agent, exports it
// into a git repository and commits it, then records it again with one
// sentence of the agent's answer changed and exports it over the first:
// git diff touches only the files that must change (the events, the
// metadata's times and command line, machine.json, which the export's
// .gitattributes keeps out of the diff, and the transcript), and the
// transcript's diff is the changed sentence and nothing else. Exporting
// again under another machine's environment changes nothing, and the
// directory replays green.
func TestExportReviewDiff(t *testing.T) {
	root := t.TempDir()
	db, repo := filepath.Join(root, "s.db"), filepath.Join(root, "repo")
	for path, data := range map[string]string{
		"ws/notes.txt": "Teh quick brown fox\n",
		"fix-typo.json": `{"workspace": "ws", "permissions": ["allow_once", "allow_once"],
			"prompts": ["fix the typo in notes.txt", {"text": "check the notes again", "attach": ["notes.txt"]}]}`,
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := agentEnv()
	record := func(answer string) {
		t.Helper()
		out := acptapOK(t, root, env, "record", "--store", db, "--force", "--scenario", "fix-typo.json", "--",
			"testagent", "--read", "notes.txt", "--thought", "Read the notes first. Then fix them.", "--message", answer)
		if !strings.HasPrefix(out, "RECORDED fix-typo ") {
			t.Fatalf("record: %s", out)
		}
	}
	export := func(env []string) {
		t.Helper()
		acptapOK(t, root, env, "export", "--store", db, "--dir", filepath.Join(repo, "acptap"), "--force", "fix-typo")
	}
	gitEnv := append(agentEnv(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = repo, gitEnv
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	record("I fixed the typo in notes.txt. The word Teh is now The. Anything else?")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	export(env)
	git("init", "-q")
	git("config", "user.name", "acptap test")
	git("config", "user.email", "test@acptap.invalid")
	git("add", "-A")
	git("commit", "-q", "-m", "acptap: fix-typo")

	// Exported again, from a process with another HOME, TMPDIR, time
	// zone and more variables: not a byte changes.
	other := t.TempDir()
	export(agentEnv("HOME="+other, "TMPDIR="+other, "TZ=America/Anchorage", "LANG=de_DE.UTF-8", "ACPTAP_REVIEW_EXTRA=1"))
	if status := git("status", "--porcelain"); status != "" {
		t.Fatalf("a second export under another environment changed files:\n%s", status)
	}

	record("I fixed the typo in notes.txt. The word Teh became The. Anything else?")
	export(env)
	changed := strings.Fields(git("diff", "--name-only"))
	want := []string{"acptap/fix-typo/events.ndjson", "acptap/fix-typo/machine.json", "acptap/fix-typo/meta.json", "acptap/fix-typo/transcript.md"}
	if !slices.Equal(changed, want) {
		t.Errorf("git diff touches %q, want %q\n%s", changed, want, git("diff", "--stat"))
	}
	var lines []string
	for _, l := range strings.Split(git("diff", "-U0", "--", "acptap/fix-typo/transcript.md"), "\n") {
		if (strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+")) && !strings.HasPrefix(l, "---") && !strings.HasPrefix(l, "+++") {
			lines = append(lines, l)
		}
	}
	// The agent says it in both turns.
	if want := slices.Repeat([]string{"-The word Teh is now The.", "+The word Teh became The."}, 2); !slices.Equal(lines, want) {
		t.Errorf("the transcript's diff is %q, want %q", lines, want)
	}
	// meta.json: the times and the command line, which holds the answer.
	for _, l := range strings.Split(git("diff", "-U0", "--", "acptap/fix-typo/meta.json"), "\n") {
		if strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++") && !strings.Contains(l, `"created"`) && !strings.Contains(l, `"duration_ms"`) && !strings.Contains(l, "became") {
			t.Errorf("meta.json changes in %q", l)
		}
	}
	// machine.json is out of the diff: one line, "Binary files differ".
	if d := git("diff", "--", "acptap/fix-typo/machine.json"); !strings.Contains(d, "Binary files") || strings.Contains(d, "+  ") {
		t.Errorf("machine.json is diffed:\n%s", d)
	}
	if attrs := git("check-attr", "linguist-generated", "diff", "--", "acptap/fix-typo/machine.json", "acptap/fix-typo/transcript.md"); !strings.Contains(attrs, "machine.json: linguist-generated: set") ||
		!strings.Contains(attrs, "machine.json: diff: unset") || !strings.Contains(attrs, "transcript.md: linguist-generated: unspecified") {
		t.Errorf("attributes:\n%s", attrs)
	}
	if out := acptapOK(t, t.TempDir(), env, "replay", "--store", filepath.Join(repo, "acptap"), "fix-typo"); !strings.HasPrefix(out, "PASS fix-typo") {
		t.Errorf("replay of the export: %s", out)
	}
}

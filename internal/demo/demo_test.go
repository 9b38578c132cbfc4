package demo

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/demollm"
)

// TestMain runs this test binary as the demo agent when asked, so that
// Drive starts a real process.
func TestMain(m *testing.M) {
	if os.Getenv("DEMO_AGENT_TEST") == "1" {
		os.Exit(Agent(strings.Fields(os.Getenv("DEMO_AGENT_ARGS")), os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

// drive runs a session of the demo agent with args against the demo LLM.
func drive(t *testing.T, args string, prompts ...string) ([]Turn, string, error) {
	t.Helper()
	llm := httptest.NewServer(demollm.Handler())
	t.Cleanup(llm.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("Teh quick brown fox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	turns, err := Drive(ctx, EditorOptions{
		Argv:    []string{os.Args[0]},
		Dir:     dir,
		Env:     append(os.Environ(), "DEMO_AGENT_TEST=1", "DEMO_AGENT_ARGS="+args, "OPENAI_BASE_URL="+llm.URL+"/v1"),
		Cwd:     dir,
		Prompts: prompts,
		Stderr:  &stderr,
	})
	return turns, stderr.String(), err
}

// TestSession: the agent fixes the typo in two turns, asking for
// permission and reading the file through the editor, and races a title
// call with --title-call; without permission it reads all the same.
func TestSession(t *testing.T) {
	for _, args := range []string{"--title-call", "--no-permission"} {
		t.Run(args, func(t *testing.T) {
			turns, stderr, err := drive(t, args, "Fix the typo in notes.txt", "Thanks!")
			if err != nil {
				t.Fatalf("Drive: %v\nstderr: %s", err, stderr)
			}
			want := []Turn{
				{Prompt: "Fix the typo in notes.txt", Text: demollm.Answer, StopReason: "end_turn"},
				{Prompt: "Thanks!", Text: "You're welcome!", StopReason: "end_turn"},
			}
			if len(turns) != len(want) {
				t.Fatalf("got %d turns %+v, want %d", len(turns), turns, len(want))
			}
			for i := range want {
				if turns[i] != want[i] {
					t.Errorf("turn %d = %+v, want %+v", i+1, turns[i], want[i])
				}
			}
			if titled := strings.Contains(stderr, `demo-agent: title: "Fixing a typo in notes"`); titled != (args == "--title-call") {
				t.Errorf("stderr %q: title logged %v, want %v", stderr, titled, args == "--title-call")
			}
		})
	}
}

// TestAgentArguments: a bad argument, or no LLM, is exit 2 with a line on
// stderr, before anything is read.
func TestAgentArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--bogus"}, "http://127.0.0.1:1/v1", "flag provided but not defined: -bogus"},
		{[]string{"extra"}, "http://127.0.0.1:1/v1", `unexpected argument "extra"`},
		{nil, "", "OPENAI_BASE_URL is not set"},
	} {
		var stderr bytes.Buffer
		getenv := func(k string) string {
			if k == "OPENAI_BASE_URL" {
				return tc.env
			}
			return ""
		}
		if code := Agent(tc.args, strings.NewReader(""), &bytes.Buffer{}, &stderr, getenv); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("Agent(%q): exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestDriveNoAgent: an agent that cannot start is an error, not a hang.
func TestDriveNoAgent(t *testing.T) {
	_, err := Drive(context.Background(), EditorOptions{Argv: []string{filepath.Join(t.TempDir(), "missing")}})
	if err == nil || !strings.Contains(err.Error(), "starting") {
		t.Errorf("Drive of a missing agent: %v, want a starting error", err)
	}
}

package replay

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/store"
)

// runOptions are the Options of the tests' replays of the test agent.
func runOptions(t *testing.T) Options {
	return Options{Env: replayEnv(), CA: testCA(t), Timeout: 20 * time.Second, Grace: 10 * time.Second}
}

func replayIt(t *testing.T, st *store.Store, name string, opts Options) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	res, err := Run(ctx, st, name, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func kinds(ds []Divergence) []Kind {
	var out []Kind
	for _, d := range ds {
		out = append(out, d.Kind)
	}
	return out
}

func TestRunEqual(t *testing.T) {
	st := openStore(t)
	recordSession(t, st, "typo", session{args: []string{"--read", "notes.txt", "--string-ids", "--chunk-size", "3"}, prompts: []string{"fix the typo", "thanks"}})
	rec, err := load(st, "typo")
	if err != nil {
		t.Fatal(err)
	}
	defer rec.close()
	res := replayIt(t, st, "typo", runOptions(t))
	if !res.Equal() {
		t.Fatalf("replay diverged: %v\n%s", res.Divergences, res.Diff)
	}
	if res.Name != "typo" || res.Frames != rec.frames.Len() || res.Exit.Code != 0 || res.Diff != "" || len(res.Warnings) != 0 {
		t.Errorf("Result: name %q, %d frames, %v, diff %q, warnings %v; want typo, %d frames, exit status 0, no diff, no warning",
			res.Name, res.Frames, res.Exit, res.Diff, res.Warnings, rec.frames.Len())
	}
	if len(res.Live) != agentCount(t, rec) || len(res.Expected) != len(res.Actual) {
		t.Errorf("%d live lines for %d recorded; %d normalized expected, %d actual", len(res.Live), agentCount(t, rec), len(res.Expected), len(res.Actual))
	}
	lines := 0
	for _, s := range res.Timeline {
		if s.Lane == lane.Agent {
			lines++
		}
	}
	if lines != len(res.Live) {
		t.Errorf("the timeline has %d agent lines, want %d", lines, len(res.Live))
	}
	if err := res.Updatable(); err != nil {
		t.Errorf("Updatable of an equal replay: %v", err)
	}
}

func TestRunChangedAgent(t *testing.T) {
	st := openStore(t)
	argv := recordSession(t, st, "typo", session{args: []string{"--read", "notes.txt"}})
	opts := runOptions(t)
	opts.Argv = append(argv, "--message", "Something else")
	res := replayIt(t, st, "typo", opts)
	if got := kinds(res.Divergences); len(got) != 1 || got[0] != OutputDiffers {
		t.Fatalf("divergences %v, want only the agent's output", res.Divergences)
	}
	d := res.Divergences[0]
	if !strings.HasSuffix(d.Path, ".params.update.content.text") || d.Recorded != "You said: hello" || d.Live != "Something else" || d.Lane != store.LaneAgent {
		t.Errorf("divergence %+v, want the message text, recorded %q and live %q", d, "You said: hello", "Something else")
	}
	if !strings.HasPrefix(res.Diff, "--- recorded\n+++ replayed\n@@ ") || !strings.Contains(res.Diff, "\n+        \"text\": \"Something else\",\n") {
		t.Errorf("diff:\n%s", res.Diff)
	}
	if err := res.Updatable(); err != nil {
		t.Errorf("Updatable: %v, want nil: the agent's output is the only divergence", err)
	}
}

func TestRunLLM(t *testing.T) {
	st := openStore(t)
	argv := recordSession(t, st, "llm", session{llm: true, prompts: []string{"hello", "again"}})
	res := replayIt(t, st, "llm", runOptions(t))
	if !res.Equal() || len(res.Warnings) != 0 {
		t.Fatalf("replay: divergences %v, warnings %v; want none\n%s", res.Divergences, res.Warnings, res.Diff)
	}
	if res.LLM.Served != 2 {
		t.Errorf("%d LLM exchanges served, want 2", res.LLM.Served)
	}

	// One call more, which the recording cannot answer; a changed
	// system prompt, which fails under RequestsFail.
	opts := runOptions(t)
	opts.Argv = append(argv, "--title-call", "--system", "Answer in French.")
	opts.Requests = RequestsFail
	res = replayIt(t, st, "llm", opts)
	var unanswered, drift int
	for _, d := range res.Divergences {
		switch d.Kind {
		case RequestUnanswered:
			unanswered++
			if !strings.Contains(d.Message, "no recorded exchange for POST /v1/chat/completions model title-model") {
				t.Errorf("unanswered request: %q", d.Message)
			}
		case RequestDrift:
			drift++
			if d.Exchange < 1 || !strings.Contains(d.Message, "Answer in French.") {
				t.Errorf("drift %+v, want an exchange number and the changed prompt", d)
			}
		}
	}
	if unanswered != 1 || drift != 2 {
		t.Errorf("%d unanswered, %d drifted; want 1 and 2: %v", unanswered, drift, res.Divergences)
	}
	if err := res.Updatable(); !errors.Is(err, ErrNotUpdatable) {
		t.Errorf("Updatable = %v, want ErrNotUpdatable", err)
	}
}

func TestRunErrors(t *testing.T) {
	st := openStore(t)
	recordSession(t, st, "r", session{})
	if w, err := st.Create(store.Recording{Name: "bare"}, false); err != nil {
		t.Fatal(err)
	} else if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		rec     string
		change  func(*Options)
		want    error
		message string
	}{
		{"missing recording", "nope", nil, store.ErrNotFound, `"nope"`},
		{"no command", "bare", nil, ErrNoCommand, `recording "bare" has no agent command`},
		{"workspace", "r", func(o *Options) { o.Workspace = notDir }, ErrWorkspace, notDir},
		{"env", "r", func(o *Options) { o.Env = append(o.Env, "NOEQUALS") }, ErrEnv, "NOEQUALS"},
		{"start", "r", func(o *Options) { o.Argv = []string{"/nonexistent/agent-xyz"} }, ErrStart, "agent-xyz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := runOptions(t)
			if tc.change != nil {
				tc.change(&opts)
			}
			res, err := Run(context.Background(), st, tc.rec, opts)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("Run = %v, %v; want an error wrapping %v that names %q", res, err, tc.want, tc.message)
			}
			var nf *AgentNotFoundError
			if tc.want == ErrStart && (!errors.As(err, &nf) || nf.Program != "/nonexistent/agent-xyz" || nf.Recorded != "") {
				t.Errorf("Run = %v; want an *AgentNotFoundError for the override /nonexistent/agent-xyz", err)
			}
			// Library errors say what is wrong, not how to type the fix.
			if strings.Contains(err.Error(), "--") {
				t.Errorf("error %q speaks command-line syntax", err)
			}
		})
	}
}

package replay

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/replay/driver"
	"github.com/acptap/acptap/store"
)

// faultRecording records the test agent reading notes.txt, behind a
// permission request, in each of two turns, and returns its command and
// the number (as acptap show numbers it) of the editor's first answer,
// to the first permission request: a frame sent mid-turn.
func faultRecording(t *testing.T, st *store.Store) ([]string, uint64) {
	t.Helper()
	argv := recordSession(t, st, "faults", session{args: []string{"--read", "notes.txt"}, prompts: []string{"hi", "again"}})
	var answer uint64
	err := st.Events("faults", func(e store.Event) error {
		if k := acp.Parse(e.Data).Kind; answer == 0 && e.Lane == store.LaneEditor && k == acp.Response {
			answer = e.Seq
		}
		return nil
	})
	if err != nil || answer == 0 {
		t.Fatalf("the editor's first answer: seq %d, %v", answer, err)
	}
	return argv, answer
}

// liveReplies returns the agent's responses to the editor request of
// JSON-RPC id id ("null" for none) in a replay's output, "result" or the
// error's code.
func liveReplies(res *Result, id string) []string {
	var out []string
	for _, l := range res.Live {
		m := acp.Parse(l)
		key := acp.IDKey(m.ID)
		if m.ID == nil {
			key = "null"
		}
		switch {
		case m.Kind == acp.Response && key == id:
			out = append(out, "result")
		case m.Kind == acp.Error && key == id:
			out = append(out, strconv.Itoa(m.ErrorCode))
		}
	}
	return out
}

// waitErrors returns the editor side's *driver.WaitErrors of a replay.
func waitErrors(res *Result) []*driver.WaitError {
	var out []*driver.WaitError
	for _, d := range res.Divergences {
		var we *driver.WaitError
		if errors.As(d.Err, &we) {
			out = append(out, we)
		}
	}
	return out
}

// TestStdioFaults breaks an editor frame of the test agent's recording
// each way, replays the agent as a real process, and checks its
// reaction, which each case documents, and the report of the faults.
func TestStdioFaults(t *testing.T) {
	st := openStore(t)
	argv, answer := faultRecording(t, st)
	permission := strconv.FormatUint(answer, 10)
	// The editor's requests keep their recorded ids: initialize 0,
	// session/new 1, the prompts 2 and 3.
	const prompt1, prompt2 = "2", "3"
	tests := []struct {
		name   string
		faults []string
		// agentArgs are added to the recorded command.
		agentArgs      []string
		timeout, grace time.Duration
		equal          bool
		kinds          []Kind
		applied        []bool
		check          func(t *testing.T, res *Result)
	}{{
		// The agent never gets the first prompt: the editor side waits
		// for its answer until the timeout, and the close of the second
		// prompt, which it never comes to, is not applied.
		name:    "drop",
		faults:  []string{"session/prompt#1=drop", "session/prompt#2=close"},
		timeout: 2 * time.Second,
		kinds:   []Kind{OutputDiffers, EditorFailed},
		applied: []bool{true, false},
		check: func(t *testing.T, res *Result) {
			we := waitErrors(res)
			if len(we) != 1 || we[0].Err != driver.ErrTimeout || !strings.Contains(strings.Join(we[0].Missing, "; "), "the response to editor request id=2 (session/prompt)") {
				t.Errorf("the editor side's errors %v, want one timeout waiting for the first prompt's answer", res.Divergences[1:])
			}
			if got := liveReplies(res, prompt1); len(got) != 0 {
				t.Errorf("the agent answered the dropped prompt: %q", got)
			}
		},
	}, {
		// The agent reads both copies at once and refuses the second
		// (-32600, a turn is running), under the same id: the prompt
		// has two answers, the refusal first. The editor side takes the
		// first for the prompt's and goes on: the turn's requests seem
		// skipped (*driver.MissingError), and the second prompt comes
		// while the first turn runs.
		name:    "dup",
		faults:  []string{"session/prompt#1=dup"},
		applied: []bool{true},
		check: func(t *testing.T, res *Result) {
			if got := liveReplies(res, prompt1); len(got) != 2 || got[0] != strconv.Itoa(acp.CodeInvalidRequest) || got[1] != "result" {
				t.Errorf("the answers to the duplicated prompt %q, want the refusal then the turn's answer", got)
			}
			if len(res.Divergences) < 2 || res.Divergences[0].Kind != OutputDiffers {
				t.Fatalf("divergences %v, want the output's, then the requests the editor side missed", kinds(res.Divergences))
			}
			for _, d := range res.Divergences[1:] {
				var missing *driver.MissingError
				if !errors.As(d.Err, &missing) {
					t.Errorf("divergence %v, want the requests the editor side missed", d)
				}
			}
		},
	}, {
		// The agent waits as an agent should: the replay is equal, and
		// the wait is the editor's.
		name:    "delay",
		faults:  []string{"session/prompt#2=delay:300ms"},
		equal:   true,
		applied: []bool{true},
		check: func(t *testing.T, res *Result) {
			if res.Duration < 300*time.Millisecond {
				t.Errorf("the replay took %v, less than the delay", res.Duration)
			}
		},
	}, {
		// The agent reads the line whole across the two writes: equal.
		name:    "split",
		faults:  []string{"session/prompt#1=split:10", "session/new#1=split:1", permission + "=split:30"},
		equal:   true,
		applied: []bool{true, true, true},
	}, {
		// The agent answers the line that is not JSON with a parse error
		// of id null, then plays the session out.
		name:    "garbage",
		faults:  []string{"session/prompt#1=garbage"},
		kinds:   []Kind{OutputDiffers},
		applied: []bool{true},
		check: func(t *testing.T, res *Result) {
			if got := liveReplies(res, "null"); len(got) != 1 || got[0] != strconv.Itoa(acp.CodeParseError) {
				t.Errorf("the answers of id null %q, want one parse error", got)
			}
			if got := liveReplies(res, prompt2); len(got) != 1 || got[0] != "result" {
				t.Errorf("the answers to the second prompt %q, want its turn's", got)
			}
		},
	}, {
		// The agent gets half of the second prompt, then the end of its
		// input: it answers the piece with a parse error and exits, the
		// second turn never played.
		name:    "sever",
		faults:  []string{"session/prompt#2=sever"},
		kinds:   []Kind{OutputDiffers},
		applied: []bool{true},
		check: func(t *testing.T, res *Result) {
			if got := liveReplies(res, "null"); len(got) != 1 || got[0] != strconv.Itoa(acp.CodeParseError) {
				t.Errorf("the answers of id null %q, want one parse error", got)
			}
			if got := liveReplies(res, prompt2); len(got) != 0 || res.Exit.Code != 0 {
				t.Errorf("the second prompt answered %q, the agent %v; want no answer and exit 0", got, res.Exit)
			}
		},
	}, {
		// Between turns: the agent exits at the end of its input, its
		// second turn never played.
		name:    "close between turns",
		faults:  []string{"session/prompt#2=close"},
		kinds:   []Kind{OutputDiffers},
		applied: []bool{true},
		check: func(t *testing.T, res *Result) {
			if got := liveReplies(res, prompt2); len(got) != 0 || res.Exit.Code != 0 {
				t.Errorf("the second prompt answered %q, the agent %v; want no answer and exit 0", got, res.Exit)
			}
		},
	}, {
		// Mid-turn, in place of the permission answer: the agent's
		// permission request fails, it ends the turn without reading
		// the file and answers the prompt.
		name:    "close mid-turn",
		faults:  []string{permission + "=close"},
		kinds:   []Kind{OutputDiffers, EditorFailed},
		applied: []bool{true},
		check: func(t *testing.T, res *Result) {
			var missing *driver.MissingError
			if !errors.As(res.Divergences[1].Err, &missing) || missing.Method != "fs/read_text_file" {
				t.Errorf("the editor side's error %v, want the file read the agent skipped", res.Divergences[1])
			}
			if got := liveReplies(res, prompt1); len(got) != 1 || got[0] != "result" {
				t.Errorf("the answers to the first prompt %q, want one", got)
			}
		},
	}, {
		// An agent that goes silent once its input ends never answers
		// the prompt: acptap stops it after the grace, and the replay
		// says the agent did not answer.
		name:      "close mid-turn, silent agent stopped",
		faults:    []string{permission + "=close"},
		agentArgs: []string{"--mute-on-eof"},
		timeout:   20 * time.Second,
		grace:     time.Second,
		kinds:     []Kind{OutputDiffers, EditorFailed},
		applied:   []bool{true},
		check: func(t *testing.T, res *Result) {
			we := waitErrors(res)
			if len(we) != 1 || we[0].ClosedBy != driver.FaultClose || we[0].Err != driver.ErrOutputClosed ||
				!strings.HasPrefix(res.Divergences[1].Message, "editor side: the agent did not answer after its stdin was closed in place of response id=0") ||
				!strings.Contains(res.Divergences[1].Message, "for: the response to editor request id=2 (session/prompt); then the agent's output ended") {
				t.Errorf("the editor side's errors %v, want the agent that did not answer the prompt and ended", res.Divergences[1:])
			}
			if res.Duration > 10*time.Second {
				t.Errorf("the replay took %v, want about the grace, 1s", res.Duration)
			}
		},
	}, {
		// The same agent with a grace longer than the timeout: the
		// replay fails at the timeout.
		name:      "close mid-turn, silent agent timed out",
		faults:    []string{permission + "=sever"},
		agentArgs: []string{"--mute-on-eof"},
		timeout:   time.Second,
		grace:     4 * time.Second,
		kinds:     []Kind{OutputDiffers, EditorFailed},
		applied:   []bool{true},
		check: func(t *testing.T, res *Result) {
			we := waitErrors(res)
			if len(we) != 1 || we[0].ClosedBy != driver.FaultSever || we[0].Err != driver.ErrTimeout || we[0].Silent != time.Second ||
				!strings.HasPrefix(res.Divergences[1].Message, "editor side: the agent did not answer after its stdin was closed in the middle of response id=0") {
				t.Errorf("the editor side's errors %v, want the timeout of the agent that did not answer the prompt", res.Divergences[1:])
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := runOptions(t)
			if tt.timeout > 0 {
				opts.Timeout = tt.timeout
			}
			if tt.grace > 0 {
				opts.Grace = tt.grace
			}
			if tt.agentArgs != nil {
				opts.Argv = append(append([]string(nil), argv...), tt.agentArgs...)
			}
			for _, spec := range tt.faults {
				f, err := ParseStdioFault(spec)
				if err != nil {
					t.Fatal(err)
				}
				opts.StdioFaults = append(opts.StdioFaults, f)
			}
			res := replayIt(t, st, "faults", opts)
			if res.Equal() != tt.equal || tt.kinds != nil && !slices.Equal(kinds(res.Divergences), tt.kinds) {
				t.Errorf("divergences %v, want %v", kinds(res.Divergences), tt.kinds)
				for _, d := range res.Divergences {
					t.Logf("  %s", d)
				}
			}
			var applied []bool
			for i, o := range res.StdioFaults {
				applied = append(applied, o.Applied)
				if o.String() == "" || o.StdioFault != opts.StdioFaults[i] {
					t.Errorf("outcome %d is of %s, want %s", i, o.StdioFault, opts.StdioFaults[i])
				}
			}
			if !slices.Equal(applied, tt.applied) {
				t.Errorf("faults applied %v, want %v", applied, tt.applied)
			}
			if err := res.Updatable(); !errors.Is(err, ErrNotUpdatable) {
				t.Errorf("Updatable of a faulted replay: %v, want ErrNotUpdatable", err)
			}
			if tt.check != nil {
				tt.check(t, res)
			}
		})
	}
}

// TestStdioFaultReport checks the lines that say which faults were
// applied, which the text report prints after its first.
func TestStdioFaultReport(t *testing.T) {
	st := openStore(t)
	faultRecording(t, st)
	opts := runOptions(t)
	for _, spec := range []string{"session/prompt#1=split:5", "3=delay:1ms"} {
		f, err := ParseStdioFault(spec)
		if err != nil {
			t.Fatal(err)
		}
		opts.StdioFaults = append(opts.StdioFaults, f)
	}
	res := replayIt(t, st, "faults", opts)
	var b strings.Builder
	if err := WriteReport(&b, res, ReportOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	want := []string{
		"  stdio fault session/prompt#1=split:5 (frame 5, session/prompt id=2): applied",
		"  stdio fault 3=delay:1ms (session/new id=1): applied",
	}
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "PASS faults (") || !slices.Equal(lines[1:3], want) {
		t.Errorf("report:\n%s\nwant PASS, then\n%s", b.String(), strings.Join(want, "\n"))
	}
}

// TestStdioFaultRefused checks that a fault naming no editor frame, or
// splitting its frame after its end, or a second fault of a frame, fails
// the replay before the agent starts: the replay of an agent that does
// not exist fails with ErrStdioFault, not ErrStart.
func TestStdioFaultRefused(t *testing.T) {
	st := openStore(t)
	faultRecording(t, st)
	for _, tc := range []struct {
		specs []string
		want  string
	}{
		{[]string{"2=drop"}, "bad stdio fault 2=drop: the recording has no editor frame 2; name one of its editor frames, 1, 3, 5, "},
		{[]string{"99999=dup"}, "no editor frame 99999"},
		{[]string{"session/prompt#3=close"}, "the recording has 2 editor frames of method session/prompt, not 3; name one from session/prompt#1 to session/prompt#2"},
		{[]string{"session/promt#1=close"}, "no editor frame of method session/promt; name one of its editor's methods, initialize, session/new, session/prompt, or"},
		{[]string{"initialize#1=split:100000"}, "bad stdio fault initialize#1=split:100000: frame 1 is "},
		{[]string{"5=dup", "session/prompt#1=drop"}, "bad stdio fault session/prompt#1=drop: frame 5 has a fault already, 5=dup; give one fault per frame"},
	} {
		opts := runOptions(t)
		opts.Argv = []string{"/nonexistent/acptap-agent"}
		for _, spec := range tc.specs {
			f, err := ParseStdioFault(spec)
			if err != nil {
				t.Fatal(err)
			}
			opts.StdioFaults = append(opts.StdioFaults, f)
		}
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		_, err := Run(ctx, st, "faults", opts)
		cancel()
		if !errors.Is(err, ErrStdioFault) || errors.Is(err, ErrStart) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("faults %q: %v, want ErrStdioFault: ...%s...", tc.specs, err, tc.want)
		}
	}
}

func TestParseStdioFault(t *testing.T) {
	for _, spec := range []string{"12=drop", "session/prompt#2=dup", "_vendor/x#1=delay:1.5s", "3=split:10", "4=sever", "5=garbage", "6=close"} {
		f, err := ParseStdioFault(spec)
		if err != nil || f.String() != spec {
			t.Errorf("ParseStdioFault(%q) = %v, %v; want it back", spec, f, err)
		}
	}
	for _, tc := range []struct {
		spec string
		err  error
	}{
		{"12", ErrStdioFault},
		{"0=drop", ErrStdioFault},
		{"x=drop", ErrStdioFault},
		{"#1=drop", ErrStdioFault},
		{"session/prompt#0=drop", ErrStdioFault},
		{"session/prompt=drop", ErrStdioFault},
		{"-1=drop", ErrStdioFault},
		{"12=explode", driver.ErrInvalidFault},
		{"12=", driver.ErrInvalidFault},
		{"12=delay", driver.ErrInvalidFault},
		{"12=delay:-1s", driver.ErrInvalidFault},
		{"12=split:0", driver.ErrInvalidFault},
		{"12=split:9999999999", driver.ErrInvalidFault},
		{"12=drop:1", driver.ErrInvalidFault},
	} {
		if _, err := ParseStdioFault(tc.spec); !errors.Is(err, tc.err) {
			t.Errorf("ParseStdioFault(%q): %v, want %v", tc.spec, err, tc.err)
		}
	}
}

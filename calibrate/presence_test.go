package calibrate

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acptap/acptap/lane"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/store"
)

// recordedHas reports whether the agent's frames of recording r of st
// hold a line with each of wants.
func recordedHas(t *testing.T, st *store.Store, wants ...string) bool {
	t.Helper()
	found := false
	err := st.Events("r", func(e store.Event) error {
		if e.Kind != store.KindFrame || e.Lane != store.LaneAgent {
			return nil
		}
		all := true
		for _, w := range wants {
			all = all && bytes.Contains(e.Data, []byte(w))
		}
		found = found || all
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestPresence records the test agent with --flaky, which sends a frame
// in about half the runs, until a recording lacks it; then each of its
// replays fails or passes as the agent sends it; calibrate learns a
// presence rule of it, after which 20 replays pass, and a real change
// (the message, the tool call missing whole) still fails.
func TestPresence(t *testing.T) {
	for _, tc := range []struct {
		flaky string
		frame []string // what a line of the frame holds
		rule  string
	}{
		{"tool-done", []string{`"sessionUpdate":"tool_call_update"`, `"status":"completed"`},
			`{"at":"last","optional":"update tool_call_update completed"}`},
		{"drain", []string{`"method":"_testagent/drainQueue"`},
			`{"after":"update tool_call_update completed","optional":"request _testagent/drainQueue"}`},
	} {
		t.Run(tc.flaky, func(t *testing.T) {
			// Runs alternate, sending and not: no chance in it.
			seq := filepath.Join(t.TempDir(), "seq")
			args := []string{"--read", "notes.txt", "--flaky", tc.flaky, "--flaky-seq", seq}
			var st *store.Store
			var argv []string
			for range 30 {
				if st, argv = record(t, args...); !recordedHas(t, st, tc.frame...) {
					break
				}
			}
			if recordedHas(t, st, tc.frame...) {
				t.Fatalf("30 recordings all have %q", tc.frame)
			}
			ctx := t.Context()
			opts := options(t, 10)
			// Uncalibrated, a replay whose agent sends the frame fails.
			failed := false
			for range 20 {
				res, err := replay.Run(ctx, st, "r", opts.Replay)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Equal() {
					failed = true
					break
				}
			}
			if !failed {
				t.Fatal("20 uncalibrated replays all passed; want one with the frame to fail")
			}

			res, err := Run(ctx, st, "r", opts)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Calibrated() {
				t.Fatalf("Run: %v, want calibrated", res.Conflicts)
			}
			var rules []string
			for _, l := range res.Rules {
				rules = append(rules, l.Rule.WithComment("").String())
			}
			if len(rules) != 1 || rules[0] != tc.rule {
				t.Fatalf("rules\n%s\nwant\n%s", strings.Join(rules, "\n"), tc.rule)
			}
			if c := res.Rules[0].Rule.Comment(); !strings.HasPrefix(c, "calibrate: sent in some runs only at agent output turn 1, ") || !strings.Contains(c, "recorded 0, runs ") {
				t.Errorf("comment %q, want where and how often it was sent", c)
			}
			if err := Save(st, res); err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				res, err := replay.Run(ctx, st, "r", opts.Replay)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Equal() {
					t.Fatalf("calibrated replay %d: %v\n%s", i+1, res.Divergences, res.Diff)
				}
			}
			for _, change := range [][]string{
				{"--read", "notes.txt", "--flaky", tc.flaky, "--flaky-seq", seq, "--message", "Something else"},
				{"--flaky", tc.flaky, "--flaky-seq", seq},
			} {
				o := opts.Replay
				o.Argv = append([]string{argv[0]}, change...)
				res, err := replay.Run(ctx, st, "r", o)
				if err != nil {
					t.Fatal(err)
				}
				if res.Equal() {
					t.Errorf("a calibrated replay of an agent run with %q passed; want a divergence", change)
				}
			}
		})
	}
}

// TestLearnPresenceConflicts checks what learnPresence learns from
// transcripts, and what it refuses: a frame every run lacks and the
// recording has (a rare behaviour, or a change), and a tool call missing
// whole.
func TestLearnPresenceConflicts(t *testing.T) {
	call := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"c","title":"Read","kind":"read","status":"pending"}}}`
	done := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"c","status":"completed"}}}`
	answer := `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`
	transcript := func(lines ...string) *normalize.Transcript {
		var frames []lane.Line
		for _, l := range lines {
			frames = append(frames, lane.Line{Lane: lane.Agent, Data: []byte(l)})
		}
		return normalize.New(normalize.Options{}).Transcript(frames)
	}
	results := func(recorded *normalize.Transcript, runs ...*normalize.Transcript) []*replay.Result {
		var out []*replay.Result
		for _, r := range runs {
			out = append(out, &replay.Result{Transcripts: [2]*normalize.Transcript{recorded, r}})
		}
		return out
	}
	with, without, none := transcript(call, done, answer), transcript(call, answer), transcript(answer)

	if l, c := learnPresence(results(without, with, without)); len(c) != 0 || len(l) != 1 {
		t.Errorf("some runs with: learned %v, conflicts %v; want a rule", l, c)
	}
	// With one run, whatever differs is learned, as values are.
	if l, c := learnPresence(results(with, without)); len(c) != 0 || len(l) != 1 {
		t.Errorf("one run: learned %v, conflicts %v; want a rule", l, c)
	}
	// A notification of its own method, in some runs only.
	note := `{"jsonrpc":"2.0","method":"_x/progress","params":{"sessionId":"s"}}`
	l, c := learnPresence(results(with, transcript(call, done, note, answer), with))
	if len(c) != 0 || len(l) != 1 || l[0].Rule.WithComment("").String() != `{"optional":"notification _x/progress"}` {
		t.Errorf("a notification in one run: learned %v, conflicts %v; want it optional", l, c)
	}
	_, c = learnPresence(results(with, without, without))
	if len(c) != 1 || c[0].Kind != Steady || !strings.HasPrefix(c[0].String(), "every run differs from the recording the same way, which is no noise: the recording caught a rare behaviour") ||
		!strings.Contains(c[0].Path, "agent output turn 1, tool call <toolCallId:1>, value 2") {
		t.Errorf("every run without: conflicts %v; want Steady at the update", c)
	}
	_, c = learnPresence(results(with, none, with))
	if len(c) != 1 || c[0].Kind != Structure || c[0].Path != "agent output turn 1, tool call <toolCallId:1>, value 1" {
		t.Errorf("the tool call missing whole: conflicts %+v; want Structure at its first value", c)
	}
}

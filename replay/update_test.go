package replay

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/mismatch"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay/llmserver"
	"github.com/acptap/acptap/store"
)

// writeRecording stores events of the given lanes ("e" editor, "a" agent,
// "s" stderr, "l" an LLM exchange; a trailing "+" marks a piece that the
// next frame of its lane continues) with Offsets 1ms, 2ms, ...
func writeRecording(t *testing.T, st *store.Store, name string, lanes ...string) {
	t.Helper()
	w, err := st.Create(store.Recording{Name: name}, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lanes {
		e := store.Event{Kind: store.KindFrame, Offset: time.Duration(i+1) * time.Millisecond, Data: fmt.Appendf(nil, "%s%d", l, i+1)}
		if strings.HasSuffix(l, "+") {
			e.Flags = store.FlagContinued
		}
		switch strings.TrimSuffix(l, "+") {
		case "e":
			e.Lane = store.LaneEditor
		case "a":
			e.Lane = store.LaneAgent
		case "s":
			e.Lane = store.LaneStderr
		case "l":
			e.Kind, e.Lane = store.KindExchange, store.LaneLLM
		default:
			t.Fatalf("lane %q", l)
		}
		w.Append(e)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// layout returns the recording's events as "lane:data@ms".
func layout(t *testing.T, st *store.Store, name string) []string {
	t.Helper()
	var out []string
	err := st.Events(name, func(e store.Event) error {
		out = append(out, fmt.Sprintf("%v:%s@%d", e.Lane, e.Data, e.Offset.Milliseconds()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diverged is a Result whose agent output differed: editors editor frames
// were played, the timeline is steps ("e0" editor frame 0, "a" the next
// agent line), the agent lines are named a1, a2...
func diverged(name string, editors int, steps ...string) *Result {
	res := &Result{Name: name, Divergences: []Divergence{outputDiffers(&normalize.Difference{Mismatch: mismatch.Mismatch{Path: "$", Recorded: "x", Live: "y"}, Flat: "$[0]"})}, Diff: "-x\n+y\n", editors: editors}
	for _, s := range steps {
		if s == "a" {
			res.Timeline = append(res.Timeline, Step{lane.Agent, len(res.Live)})
			res.Live = append(res.Live, fmt.Appendf(nil, "new%d", len(res.Live)+1))
			continue
		}
		var n int
		fmt.Sscanf(s, "e%d", &n)
		res.Timeline = append(res.Timeline, Step{lane.Editor, n})
	}
	res.restore = func(i int, l []byte) []byte { return l }
	return res
}

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestUpdatePlacement(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lanes []string // the recording
		steps []string // the replay's timeline
		want  []string
	}{
		{
			name:  "same shape",
			lanes: []string{"e", "a", "e", "l", "a", "a"},
			steps: []string{"e0", "a", "e1", "a", "a"},
			want:  []string{"editor:e1@1", "agent:new1@2", "editor:e3@3", "llm:l4@4", "agent:new2@5", "agent:new3@6"},
		},
		{
			// More lines than slots: the others go after the gap's last
			// event, the stderr line; fewer: the later slots stay empty.
			name:  "more and fewer",
			lanes: []string{"e", "l", "a", "s", "e", "a", "a", "s"},
			steps: []string{"e0", "a", "a", "a", "e1", "a"},
			want: []string{"editor:e1@1", "llm:l2@2", "agent:new1@3", "stderr:s4@4", "agent:new2@4", "agent:new3@4",
				"editor:e5@5", "agent:new4@6", "stderr:s8@8"},
		},
		{
			// A gap without agent lines: the new ones go before the next
			// editor frame, after the exchange; a line before the first
			// editor frame goes first.
			name:  "empty gaps",
			lanes: []string{"e", "l", "e", "a"},
			steps: []string{"a", "e0", "a", "e1", "a"},
			want:  []string{"agent:new1@0", "editor:e1@1", "llm:l2@2", "agent:new2@2", "editor:e3@3", "agent:new3@4"},
		},
		{
			// Editor frames sent out of their recorded order: a line goes
			// after every frame sent before it.
			name:  "out of order",
			lanes: []string{"e", "a", "e", "e", "a"},
			steps: []string{"e0", "e2", "a", "e1", "a"},
			want:  []string{"editor:e1@1", "editor:e3@3", "editor:e4@4", "agent:new1@5", "agent:new2@5"},
		},
		{
			// Lines in pieces: an editor line ends at its last piece, an
			// agent line in pieces is one slot.
			name:  "pieces",
			lanes: []string{"e+", "a+", "e", "a", "s", "a"},
			steps: []string{"e0", "a", "a"},
			want:  []string{"editor:e+1@1", "editor:e3@3", "stderr:s5@5", "agent:new1@6", "agent:new2@6"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			writeRecording(t, st, "r", tc.lanes...)
			editors := 0
			for _, l := range tc.lanes {
				if l == "e" {
					editors++
				}
			}
			res := diverged("r", editors, tc.steps...)
			n, err := Update(st, res)
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if n != len(res.Live) {
				t.Errorf("Update wrote %d frames, want %d", n, len(res.Live))
			}
			if got := layout(t, st, "r"); !slices.Equal(got, tc.want) {
				t.Errorf("recording after Update:\ngot  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestUpdateRefuses(t *testing.T) {
	st := openStore(t)
	writeRecording(t, st, "r", "e", "a")
	before := layout(t, st, "r")
	for _, tc := range []struct {
		name string
		res  *Result
	}{
		{"other divergence", func() *Result {
			r := diverged("r", 1, "e0", "a")
			r.Divergences = append(r.Divergences, requestUnanswered(llmserver.Request{Method: "POST", URL: "http://x/v1/chat/completions", Queue: "POST /v1/chat/completions model m", Reason: "not recorded"}))
			return r
		}()},
		{"only another divergence", func() *Result {
			r := diverged("r", 1, "e0", "a")
			r.Diff = ""
			r.Divergences = []Divergence{editorFailed(errors.New("timed out"))}
			return r
		}()},
		{"not from Run", &Result{Name: "r"}},
		{"other editor count", diverged("r", 2, "e0", "a")},
		{"timeline without a line", func() *Result {
			r := diverged("r", 1, "e0", "a")
			r.Live = append(r.Live, []byte("unplaced"))
			return r
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Update(st, tc.res); !errors.Is(err, ErrNotUpdatable) {
				t.Errorf("Update = %v, want ErrNotUpdatable", err)
			}
			if got := layout(t, st, "r"); !slices.Equal(got, before) {
				t.Errorf("the recording changed: %q", got)
			}
		})
	}
}

// TestUpdatableByKind checks that Updatable goes by what diverged, not by
// where in Divergences it is or whether there is a diff.
func TestUpdatableByKind(t *testing.T) {
	timeout := editorFailed(errors.New("frame 3 waited 30s for: 1 more session/update"))
	drift := requestDrift(llmserver.Drift{Number: 1, Mismatch: mismatch.Mismatch{Path: "$.body.model", Recorded: "a", Live: "b"}})
	for _, tc := range []struct {
		name        string
		divergences []Divergence
		warnings    []Divergence
		refused     *Divergence // the divergence the error names; nil for updatable
	}{
		{"the output alone, without a diff", []Divergence{outputDiffers(&normalize.Difference{Mismatch: mismatch.Mismatch{Path: "$", Recorded: "x", Live: "y"}, Flat: "$[0]"})}, nil, nil},
		{"the output, with a warning", []Divergence{outputDiffers(&normalize.Difference{Mismatch: mismatch.Mismatch{Path: "$", Recorded: "x", Live: "y"}, Flat: "$[0]"})}, []Divergence{drift}, nil},
		{"another divergence first", []Divergence{timeout, outputDiffers(&normalize.Difference{Mismatch: mismatch.Mismatch{Path: "$", Recorded: "x", Live: "y"}, Flat: "$[0]"})}, nil, &timeout},
		{"drift as a divergence", []Divergence{outputDiffers(&normalize.Difference{Mismatch: mismatch.Mismatch{Path: "$", Recorded: "x", Live: "y"}, Flat: "$[0]"}), drift}, nil, &drift},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := diverged("r", 1, "e0", "a")
			res.Divergences, res.Warnings, res.Diff = tc.divergences, tc.warnings, ""
			err := res.Updatable()
			switch {
			case tc.refused == nil && err != nil:
				t.Errorf("Updatable = %v, want nil", err)
			case tc.refused != nil && (!errors.Is(err, ErrNotUpdatable) || !strings.HasSuffix(err.Error(), "cannot fix "+tc.refused.Message+"; record it again against the live LLM instead: acptap rerecord r")):
				t.Errorf("Updatable = %v, want ErrNotUpdatable naming %q", err, tc.refused.Message)
			}
		})
	}
}

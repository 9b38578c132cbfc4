package timeline

import (
	"reflect"
	"testing"

	"github.com/acptap/acptap/lane"
	"github.com/acptap/acptap/replay"
)

// TestUnwritten: the row of an editor frame a stdio fault kept from the
// agent (drop, close) goes after the editor frames before it and the
// agent's lines the recording has before it, and before the next editor
// frame written.
func TestUnwritten(t *testing.T) {
	// Recorded: e1 a2 e3 a4 e5 a6 a7 a8 e9 a10 (editor ordinals 0 to 3).
	var events, editor []Event
	for seq, l := range []string{"editor", "agent", "editor", "agent", "editor", "agent", "agent", "agent", "editor", "agent"} {
		e := Event{Seq: uint64(seq + 1), Lane: l}
		events = append(events, e)
		if l == "editor" {
			editor = append(editor, e)
		}
	}
	ed := func(k int) replay.Step { return replay.Step{Lane: lane.Editor, Index: k} }
	ag := func(i int) replay.Step { return replay.Step{Lane: lane.Agent, Index: i} }
	for _, tc := range []struct {
		name     string
		timeline []replay.Step
		faults   map[int]string
		want     map[int][]int
	}{{
		name:     "a prompt dropped, the replay ended waiting for its answer",
		timeline: []replay.Step{ed(0), ag(0), ed(1), ag(1), ag(2)},
		faults:   map[int]string{2: "drop"},
		want:     map[int][]int{4: {2}},
	}, {
		name:     "stdin closed in place of the last prompt, the agent's goodbye after",
		timeline: []replay.Step{ed(0), ag(0), ed(1), ag(1), ed(2), ag(2), ag(3), ag(4), ag(5)},
		faults:   map[int]string{3: "close"},
		want:     map[int][]int{8: {3}},
	}, {
		name:     "a notification dropped, the next frame written before the agent's lines came",
		timeline: []replay.Step{ed(0), ag(0), ed(1), ed(3), ag(1), ag(2)},
		faults:   map[int]string{2: "drop"},
		want:     map[int][]int{3: {2}},
	}, {
		name:     "two dropped in a row, and a frame written with its fault",
		timeline: []replay.Step{ed(0), ag(0), ag(1), ag(2), ag(3), ag(4)},
		faults:   map[int]string{0: "dup", 1: "drop", 2: "drop"},
		want:     map[int][]int{2: {1}, 3: {2}},
	}} {
		if got := unwritten(tc.timeline, tc.faults, editor, events); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

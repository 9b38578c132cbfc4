package store_test

import (
	"fmt"
	"testing"

	"github.com/acptap/acptap/store"
)

// TestJoinLines: the pieces of a line come out as one event with the
// first piece's Seq and Offset and the last piece's flags, interleaved
// lanes each joined on their own, other events passed as they come, and a
// line never finished left out.
func TestJoinLines(t *testing.T) {
	frame := func(seq uint64, lane store.Lane, flags store.Flag, data string) store.Event {
		return store.Event{Seq: seq, Kind: store.KindFrame, Lane: lane, Offset: 0, Flags: flags, Data: []byte(data)}
	}
	in := []store.Event{
		frame(1, store.LaneEditor, store.FlagContinued, "ab"),
		frame(2, store.LaneAgent, 0, "whole"),
		frame(3, store.LaneAgent, store.FlagContinued, "12"),
		{Seq: 4, Kind: store.KindExchange, Lane: store.LaneLLM, Data: []byte("{}")},
		frame(5, store.LaneEditor, store.FlagContinued, "cd"),
		frame(6, store.LaneEditor, store.FlagNoNewline, "ef"),
		frame(7, store.LaneAgent, 0, "34"),
		frame(8, store.LaneStderr, store.FlagContinued, "never ends"),
	}
	var got []string
	join := store.JoinLines(func(e store.Event) error {
		got = append(got, fmt.Sprintf("%d %s %q %d", e.Seq, e.Lane, e.Data, e.Flags))
		return nil
	})
	for _, e := range in {
		if err := join(e); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		fmt.Sprintf("2 agent %q 0", "whole"),
		fmt.Sprintf("4 llm %q 0", "{}"),
		fmt.Sprintf("1 editor %q %d", "abcdef", store.FlagNoNewline),
		fmt.Sprintf("3 agent %q 0", "1234"),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

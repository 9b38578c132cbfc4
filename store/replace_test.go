package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// rawValues returns the stored values of the named recording's events by
// Seq.
func rawValues(t *testing.T, s *Store, name string) map[uint64][]byte {
	t.Helper()
	vals := map[uint64][]byte{}
	err := testDB{s}.View(func(tx *bolt.Tx) error {
		b, err := recording(tx, name)
		if err != nil {
			return err
		}
		return b.Bucket(eventsBucket).ForEach(func(k, v []byte) error {
			vals[binary.BigEndian.Uint64(k)] = bytes.Clone(v)
			return nil
		})
	})
	if err != nil {
		t.Fatalf("values of %q: %v", name, err)
	}
	return vals
}

// replaceFixture records, with the Writer, a session of every lane: an
// agent line in two pieces, an exchange reserved at its request's start
// and finished later, a frame too big for a block. It returns its events.
func replaceFixture(t *testing.T, s *Store, name string) []Event {
	t.Helper()
	w := mustCreate(t, s, Recording{Name: name, Argv: []string{"agent", "--acp"}, Cwd: "/work"})
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	at := func(e Event, n int) Event { e.Offset = ms(n); return e }
	w.Append(at(frame(LaneEditor, `{"id":1,"method":"initialize"}`), 1))     // 1
	w.Append(at(frame(LaneAgent, `{"id":1,"result":{}}`), 2))                // 2
	w.Append(at(frame(LaneEditor, `{"id":2,"method":"session/prompt"}`), 3)) // 3
	ex := w.Reserve()                                                        // 4
	w.Append(Event{Seq: ex, Kind: KindExchange, Lane: LaneLLM, Flags: FlagIncomplete, Offset: ms(4), Data: []byte("in flight")})
	piece := at(frame(LaneAgent, `{"method":"session/update","params":`), 5) // 5
	piece.Flags = FlagContinued
	w.Append(piece)
	w.Append(at(frame(LaneStderr, "thinking"), 6))                     // 6
	w.Append(at(frame(LaneAgent, `{"chunk":"hi"}}`), 7))               // 7
	big := at(frame(LaneStderr, strings.Repeat("x", maxBlockBody)), 8) // 8
	w.Append(big)
	w.Append(Event{Seq: ex, Kind: KindExchange, Lane: LaneLLM, Offset: ms(4), Data: []byte(`{"method":"POST","response_body":"hi"}`)})
	w.Append(at(frame(LaneAgent, `{"id":2,"result":{"stopReason":"end_turn"}}`), 9)) // 9
	nl := at(frame(LaneStderr, "bye"), 10)                                           // 10
	nl.Flags = FlagNoNewline
	w.Append(nl)
	w.Update(func(r *Recording) { r.Done, r.ExitCode, r.Duration = true, 3, ms(11) })
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return readEvents(t, s, name)
}

func TestReplaceLane(t *testing.T) {
	s := openTestStore(t)
	old := replaceFixture(t, s, "r")
	before := mustGet(t, s, "r")
	oldExchange := rawValues(t, s, "r")[4]

	frames := []Placed{
		{After: 0, Offset: 1, Data: []byte("first")},
		{After: 1, Offset: 2, Data: []byte(`{"id":1,"result":{"v":2}}`)},
		{After: 4, Offset: 5, Data: []byte("a")},
		{After: 4, Offset: 5, Data: []byte("b")},
		{After: 8, Offset: 9, Data: []byte("c")},
		{After: 10, Offset: 11, Data: []byte("last")},
	}
	if err := s.ReplaceLane("r", LaneAgent, frames); err != nil {
		t.Fatalf("ReplaceLane: %v", err)
	}
	agent := func(seq uint64, off time.Duration, data string) Event {
		return Event{Seq: seq, Kind: KindFrame, Lane: LaneAgent, Offset: off, Data: []byte(data)}
	}
	renumber := func(e Event, seq uint64) Event { e.Seq = seq; return e }
	want := []Event{
		agent(1, 1, "first"),
		renumber(old[0], 2), // editor initialize
		agent(3, 2, `{"id":1,"result":{"v":2}}`),
		renumber(old[2], 4), // editor prompt
		renumber(old[3], 5), // the exchange
		agent(6, 5, "a"),
		agent(7, 5, "b"),
		renumber(old[5], 8), // stderr
		renumber(old[7], 9), // big stderr
		agent(10, 9, "c"),
		renumber(old[9], 11), // stderr without newline
		agent(12, 11, "last"),
	}
	compareEvents(t, readEvents(t, s, "r"), want)

	after := mustGet(t, s, "r")
	if after.Frames != 11 || after.Exchanges != 1 {
		t.Errorf("counters = %d frames, %d exchanges; want 11, 1", after.Frames, after.Exchanges)
	}
	if after.Updated.IsZero() || after.Updated.Before(before.Created) {
		t.Errorf("Updated = %v, want a time after Created %v", after.Updated, before.Created)
	}
	kept := before
	kept.Frames, kept.Exchanges, kept.Updated = after.Frames, after.Exchanges, after.Updated
	if !recordingsEqual(after, kept) {
		t.Errorf("metadata changed beyond the counters and Updated:\ngot  %+v\nwant %+v", after, kept)
	}
	if got := rawValues(t, s, "r")[5]; !bytes.Equal(got, oldExchange) {
		t.Errorf("the exchange's stored value changed:\ngot  %x\nwant %x", got, oldExchange)
	}
	// Frames are packed in blocks again, around the exchange and the big
	// frame.
	checkLayout(t, s, "r", []storedValue{
		{1, blockEncoding, 4}, {5, eventEncoding, 1}, {6, blockEncoding, 3}, {9, eventEncoding, 1}, {10, blockEncoding, 3},
	})
}

// recordingsEqual compares metadata as it round-trips through JSON.
func recordingsEqual(a, b Recording) bool {
	return a.Name == b.Name && a.Format == b.Format && a.Created.Equal(b.Created) && a.Version == b.Version &&
		slices.Equal(a.Argv, b.Argv) && a.Cwd == b.Cwd && a.Done == b.Done && a.ExitCode == b.ExitCode &&
		a.Duration == b.Duration && a.Frames == b.Frames && a.Exchanges == b.Exchanges && a.Updated.Equal(b.Updated)
}

func TestReplaceLaneTwiceAndEmpty(t *testing.T) {
	s := openTestStore(t)
	replaceFixture(t, s, "r")
	// The editor lane this time, then again on the renumbered recording.
	if err := s.ReplaceLane("r", LaneEditor, []Placed{{After: 2, Data: []byte("e1")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.ReplaceLane("r", LaneEditor, []Placed{{After: 1, Data: []byte("e2")}, {After: 1, Data: []byte("e3")}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range readEvents(t, s, "r") {
		if e.Lane == LaneEditor {
			got = append(got, string(e.Data))
		}
	}
	if want := []string{"e2", "e3"}; !slices.Equal(got, want) {
		t.Errorf("editor frames = %q, want %q", got, want)
	}
	// No frames: the lane is gone.
	if err := s.ReplaceLane("r", LaneStderr, nil); err != nil {
		t.Fatal(err)
	}
	for _, e := range readEvents(t, s, "r") {
		if e.Lane == LaneStderr {
			t.Errorf("stderr event %s left", describe(e))
		}
	}
	checkCounters(t, s, "r", 6, 1) // two editor frames, four agent ones
}

func TestReplaceLaneFormat1(t *testing.T) {
	s := openTestStore(t)
	events := []Event{
		{Seq: 1, Kind: KindFrame, Lane: LaneEditor, Offset: 1, Data: []byte("editor")},
		{Seq: 2, Kind: KindFrame, Lane: LaneAgent, Offset: 2, Data: []byte("agent")},
		{Seq: 3, Kind: KindExchange, Lane: LaneLLM, Offset: 3, Data: []byte(`{"method":"POST"}`)},
		{Seq: 4, Kind: KindFrame, Lane: LaneStderr, Offset: 4, Data: []byte("stderr")},
	}
	vals := map[uint64][]byte{}
	for _, e := range events {
		vals[e.Seq] = v1Value(t, e)
	}
	putRecording(t, s, Recording{Name: "old", Format: 1, Frames: 3, Exchanges: 1}, vals)
	if err := s.ReplaceLane("old", LaneAgent, []Placed{{After: 3, Offset: 5, Data: []byte("new")}}); err != nil {
		t.Fatal(err)
	}
	compareEvents(t, readEvents(t, s, "old"), []Event{
		events[0],
		{Seq: 2, Kind: KindExchange, Lane: LaneLLM, Offset: 3, Data: []byte(`{"method":"POST"}`)},
		{Seq: 3, Kind: KindFrame, Lane: LaneAgent, Offset: 5, Data: []byte("new")},
		{Seq: 4, Kind: KindFrame, Lane: LaneStderr, Offset: 4, Data: []byte("stderr")},
	})
	if rec := mustGet(t, s, "old"); rec.Format != FormatVersion {
		t.Errorf("Format = %d, want %d", rec.Format, FormatVersion)
	}
}

func TestReplaceLaneErrors(t *testing.T) {
	s := openTestStore(t)
	replaceFixture(t, s, "r")
	before := readEvents(t, s, "r")
	for _, tc := range []struct {
		name   string
		lane   Lane
		frames []Placed
		want   error
	}{
		{"llm lane", LaneLLM, nil, ErrNotFrameLane},
		{"after a replaced frame", LaneAgent, []Placed{{After: 2}}, ErrPlacement},
		{"after no event", LaneAgent, []Placed{{After: 99}}, ErrPlacement},
		{"out of order", LaneAgent, []Placed{{After: 3}, {After: 1}}, ErrPlacement},
		{"stuck behind a bad one", LaneAgent, []Placed{{After: 1}, {After: 2}, {After: 3}}, ErrPlacement},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.ReplaceLane("r", tc.lane, tc.frames)
			if !errors.Is(err, tc.want) {
				t.Fatalf("ReplaceLane = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), `recording "r"`) {
				t.Errorf("error %q does not name the recording", err)
			}
			compareEvents(t, readEvents(t, s, "r"), before)
		})
	}
	if err := s.ReplaceLane("nope", LaneAgent, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing recording: %v, want ErrNotFound", err)
	}

	w := mustCreate(t, s, Recording{Name: "busy"})
	if err := s.ReplaceLane("busy", LaneAgent, nil); !errors.Is(err, ErrBusy) {
		t.Errorf("recording being written: %v, want ErrBusy", err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "ro.db")
	rw, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	replaceFixture(t, rw, "r")
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.ReplaceLane("r", LaneAgent, nil); !errors.Is(err, berrors.ErrDatabaseReadOnly) {
		t.Errorf("read-only store: %v, want ErrDatabaseReadOnly", err)
	}
}

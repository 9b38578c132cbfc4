package store

import (
	"testing"
)

func TestDropSuperseded(t *testing.T) {
	ev := func(seq uint64, k Kind, data string) Event {
		return Event{Seq: seq, Kind: k, Lane: LaneLLM, Data: []byte(data)}
	}
	in := []Event{
		ev(1, KindFrame, "a"), ev(2, KindExchange, "incomplete"), ev(3, KindFrame, "b"),
		ev(4, KindExchange, "other"), ev(2, KindExchange, "final"),
	}
	got := dropSuperseded(in)
	want := []string{"a", "b", "other", "final"}
	if len(got) != len(want) {
		t.Fatalf("dropSuperseded kept %d events, want %d", len(got), len(want))
	}
	for i, e := range got {
		if string(e.Data) != want[i] {
			t.Errorf("event %d = %q, want %q", i, e.Data, want[i])
		}
	}
	if out := dropSuperseded(in[:3]); len(out) != 3 {
		t.Errorf("nothing superseded: kept %d of 3", len(out))
	}
}

// TestIncompleteAndFinalInOneBatch: an exchange appended as incomplete and
// then finished before the writer commits is stored once, finished, and
// counted once.
func TestIncompleteAndFinalInOneBatch(t *testing.T) {
	s := openTestStore(t)
	w, err := s.Create(Recording{Name: "batch"}, false)
	if err != nil {
		t.Fatal(err)
	}
	seq := w.Reserve()
	w.Append(Event{Seq: seq, Kind: KindExchange, Lane: LaneLLM, Flags: FlagIncomplete, Data: []byte(`{"status":0}`)})
	w.Append(Event{Seq: seq, Kind: KindExchange, Lane: LaneLLM, Data: []byte(`{"status":200}`)})
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	var got []Event
	if err := s.Events("batch", func(e Event) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got[0].Data) != `{"status":200}` || got[0].Flags&FlagIncomplete != 0 {
		t.Errorf("events = %+v, want the finished exchange only", got)
	}
	rec, _ := s.Get("batch")
	if rec.Exchanges != 1 {
		t.Errorf("Exchanges = %d, want 1", rec.Exchanges)
	}
}

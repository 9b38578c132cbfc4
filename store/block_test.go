package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	bolt "go.etcd.io/bbolt"
)

// storedValue describes a value of a recording's events bucket.
type storedValue struct {
	Seq uint64 // its key
	Enc byte   // its encoding
	N   uint64 // how many events it holds
}

// layout returns the values of the named recording's events bucket.
func layout(t *testing.T, s *Store, name string) []storedValue {
	t.Helper()
	var vals []storedValue
	err := testDB{s}.View(func(tx *bolt.Tx) error {
		b, err := recording(tx, name)
		if err != nil {
			return err
		}
		return b.Bucket(eventsBucket).ForEach(func(k, v []byte) error {
			seq := binary.BigEndian.Uint64(k)
			_, n, err := valueSpan(seq, v)
			if err != nil {
				return fmt.Errorf("event %d: %w", seq, err)
			}
			vals = append(vals, storedValue{seq, v[0], n})
			return nil
		})
	})
	if err != nil {
		t.Fatalf("layout of %q: %v", name, err)
	}
	return vals
}

func checkLayout(t *testing.T, s *Store, name string, want []storedValue) {
	t.Helper()
	if got := layout(t, s, name); !slices.Equal(got, want) {
		t.Errorf("values of %q:\ngot  %v\nwant %v", name, got, want)
	}
}

// appendBatch appends events and waits until they are committed. The
// first is committed on its own, the others in one batch (within the
// limits of a transaction): appendBatch holds bbolt's writer lock until
// the Writer has taken the first from its queue, so that the others queue
// up behind it. It returns the events with their Seqs.
func appendBatch(t *testing.T, s *Store, w *Writer, events ...Event) []Event {
	t.Helper()
	events = slices.Clone(events)
	release := holdLock(t, s.path)
	events[0].Seq = w.Append(events[0])
	for {
		w.mu.Lock()
		taken := len(w.queue) == 0
		w.mu.Unlock()
		if taken {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for i := range events[1:] {
		events[i+1].Seq = w.Append(events[i+1])
	}
	release()
	if err := w.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	return events
}

func checkCounters(t *testing.T, s *Store, name string, frames, exchanges int) {
	t.Helper()
	if rec := mustGet(t, s, name); rec.Frames != frames || rec.Exchanges != exchanges {
		t.Errorf("counters of %q = %d frames, %d exchanges; want %d, %d", name, rec.Frames, rec.Exchanges, frames, exchanges)
	}
}

func frame(lane Lane, data string) Event {
	return Event{Kind: KindFrame, Lane: lane, Data: []byte(data)}
}

func TestFrameBlocks(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "blocks"})

	big := make([]byte, 32<<20)
	rand.NewChaCha8([32]byte{2}).Read(big)
	events := []Event{frame(LaneEditor, "committed alone")}
	for f := Flag(0); f <= FlagNoNewline|FlagContinued|FlagIncomplete; f++ {
		events = append(events, Event{Kind: KindFrame, Lane: Lane(f%3 + 1), Flags: f, Offset: time.Duration(f) * time.Millisecond,
			Data: fmt.Appendf(nil, `{"jsonrpc":"2.0","flags":%d}`, f)})
	}
	events = append(events,
		Event{Kind: KindFrame, Lane: LaneAgent, Offset: -time.Second},                                                   // empty, going back in time
		Event{Kind: KindFrame, Lane: LaneStderr, Offset: 1<<63 - 1, Data: []byte("\xff\xfe\x00not utf-8 \xc3\x28\n\r")}, // a long way forward
		Event{Kind: KindFrame, Lane: LaneAgent, Flags: FlagContinued, Offset: 3 * time.Hour, Data: big},
		Event{Kind: KindFrame, Lane: LaneAgent, Offset: math.MinInt64, Data: []byte("after the big one")},
		frame(LaneEditor, ""),
		Event{Kind: KindExchange, Lane: LaneLLM, Data: []byte(`{"method":"POST"}`)},
		frame(LaneEditor, "after the exchange"),
		Event{Kind: KindFrame, Lane: Lane(200), Flags: Flag(255), Data: []byte{0}},
	)
	events = appendBatch(t, s, w, events...)
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	for i, e := range events {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event #%d has Seq %d", i, e.Seq)
		}
	}
	compareEvents(t, readEvents(t, s, "blocks"), events)
	checkLayout(t, s, "blocks", []storedValue{
		{1, blockEncoding, 1},
		{2, blockEncoding, 10}, // the frames up to the one too big for a block
		{12, eventEncoding, 1}, // the big one
		{13, blockEncoding, 2},
		{15, eventEncoding, 1}, // the exchange
		{16, blockEncoding, 2},
	})
	checkCounters(t, s, "blocks", len(events)-1, 1)
}

func TestBlockLimits(t *testing.T) {
	// A record of data L at the offset of the previous event is lane,
	// flags, a one-byte offset delta, the length of L and L.
	const fits = maxBlockBody - 6 // with a 3-byte length
	for _, tc := range []struct {
		name   string
		sizes  []int
		layout []uint64 // events per value; 0 for an event value
	}{
		{"events", slices.Repeat([]int{1}, maxBlockEvents+10), []uint64{maxBlockEvents, 10}},
		{"bytes", slices.Repeat([]int{1024}, 300), []uint64{254, 46}}, // 1029 bytes a record
		{"one that fits", []int{10, fits, 10}, []uint64{1, 1, 1}},
		{"one too big", []int{10, fits + 1, 10}, []uint64{1, 0, 1}},
		{"to the byte", []int{fits - 10, 1, 1}, []uint64{3}}, // 5 bytes a record
		{"a byte over", []int{fits - 9, 1, 1}, []uint64{2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t)
			w := mustCreate(t, s, Recording{Name: "limits"})
			events := []Event{frame(LaneAgent, "head")}
			for i, size := range tc.sizes {
				events = append(events, Event{Kind: KindFrame, Lane: LaneAgent, Data: bytes.Repeat([]byte{byte(i)}, size)})
			}
			events = appendBatch(t, s, w, events...)
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			compareEvents(t, readEvents(t, s, "limits"), events)
			want := []storedValue{{1, blockEncoding, 1}}
			seq := uint64(2)
			for _, n := range tc.layout {
				if n == 0 {
					want = append(want, storedValue{seq, eventEncoding, 1})
					seq++
					continue
				}
				want = append(want, storedValue{seq, blockEncoding, n})
				seq += n
			}
			checkLayout(t, s, "limits", want)
		})
	}
}

func TestBlockRun(t *testing.T) {
	f := func(seq uint64) Event { return Event{Seq: seq, Kind: KindFrame} }
	x := func(seq uint64) Event { return Event{Seq: seq, Kind: KindExchange} }
	for _, tc := range []struct {
		name   string
		events []Event
		want   int
	}{
		{"none", nil, 0},
		{"run", []Event{f(1), f(2), f(3)}, 3},
		{"gap", []Event{f(1), f(2), f(4), f(5)}, 2},
		{"backwards", []Event{f(5), f(6), f(2)}, 2},
		{"again", []Event{f(5), f(6), f(6)}, 2},
		{"exchange first", []Event{x(1), f(2)}, 0},
		{"exchange after", []Event{f(1), x(2), f(3)}, 1},
		{"unknown kind", []Event{f(1), {Seq: 2, Kind: Kind(9)}}, 1},
		{"past the last Seq", []Event{f(math.MaxUint64 - 1), f(math.MaxUint64), f(0)}, 2},
		{"too big", []Event{{Seq: 1, Kind: KindFrame, Data: make([]byte, maxBlockBody)}}, 0},
	} {
		if got := blockRun(tc.events); got != tc.want {
			t.Errorf("%s: blockRun = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestReserveSplitsBlocks(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "gap"})
	w.Append(frame(LaneEditor, "1"))
	w.Append(frame(LaneAgent, "2"))
	w.Append(frame(LaneAgent, "3"))
	ex := w.Reserve()
	w.Append(frame(LaneAgent, "5"))
	w.Append(frame(LaneAgent, "6"))
	// The request is still in flight.
	partial := Event{Seq: ex, Kind: KindExchange, Lane: LaneLLM, Flags: FlagIncomplete, Data: []byte("partial")}
	w.Append(partial)
	w.Append(frame(LaneAgent, "7"))
	gap := w.Reserve() // never written
	w.Append(frame(LaneAgent, "9"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if ex != 4 || gap != 8 {
		t.Fatalf("Reserve = %d, %d; want 4, 8", ex, gap)
	}
	want := []Event{
		{Seq: 1, Kind: KindFrame, Lane: LaneEditor, Data: []byte("1")},
		{Seq: 2, Kind: KindFrame, Lane: LaneAgent, Data: []byte("2")},
		{Seq: 3, Kind: KindFrame, Lane: LaneAgent, Data: []byte("3")},
		partial,
		{Seq: 5, Kind: KindFrame, Lane: LaneAgent, Data: []byte("5")},
		{Seq: 6, Kind: KindFrame, Lane: LaneAgent, Data: []byte("6")},
		{Seq: 7, Kind: KindFrame, Lane: LaneAgent, Data: []byte("7")},
		{Seq: 9, Kind: KindFrame, Lane: LaneAgent, Data: []byte("9")},
	}
	compareEvents(t, readEvents(t, s, "gap"), want)
	checkCounters(t, s, "gap", 7, 1)
	// However the Writer batched them, no value holds Seqs on both sides
	// of a gap.
	for _, v := range layout(t, s, "gap") {
		if v.Seq <= ex && ex < v.Seq+v.N && v.N > 1 || v.Seq <= gap && gap < v.Seq+v.N {
			t.Errorf("value %+v spans a reserved Seq (%d or %d)", v, ex, gap)
		}
	}

	// The finished exchange replaces the incomplete one between blocks.
	finished := Event{Seq: ex, Kind: KindExchange, Lane: LaneLLM, Data: []byte("finished")}
	w.Append(finished)
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	want[3] = finished
	compareEvents(t, readEvents(t, s, "gap"), want)
	checkCounters(t, s, "gap", 7, 1)
}

func TestReplaceInsideBlocks(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "replace"})
	var want []Event
	for i := range 9 {
		want = append(want, frame(LaneAgent, fmt.Sprint("frame ", i+1)))
	}
	want = appendBatch(t, s, w, want...)
	checkLayout(t, s, "replace", []storedValue{{1, blockEncoding, 1}, {2, blockEncoding, 8}})

	// An exchange at the Seq of a frame in the middle of a block.
	ex := Event{Seq: 5, Kind: KindExchange, Lane: LaneLLM, Flags: FlagIncomplete, Data: []byte("partial")}
	w.Append(ex)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want[4] = ex
	compareEvents(t, readEvents(t, s, "replace"), want)
	checkLayout(t, s, "replace", []storedValue{{1, blockEncoding, 1}, {2, blockEncoding, 3}, {5, eventEncoding, 1}, {6, blockEncoding, 4}})
	checkCounters(t, s, "replace", 8, 1)

	// Frames over the end of one block, the exchange and the start of
	// the next: what sticks out of them stays.
	var again []Event
	for seq := uint64(3); seq <= 7; seq++ {
		again = append(again, Event{Seq: seq, Kind: KindFrame, Lane: LaneEditor, Offset: time.Duration(seq), Data: fmt.Append(nil, "again ", seq)})
	}
	again = appendBatch(t, s, w, again...)
	copy(want[2:], again)
	compareEvents(t, readEvents(t, s, "replace"), want)
	checkLayout(t, s, "replace", []storedValue{
		{1, blockEncoding, 1}, {2, blockEncoding, 1}, {3, blockEncoding, 1}, {4, blockEncoding, 4}, {8, blockEncoding, 2},
	})
	checkCounters(t, s, "replace", 9, 0)

	// In one batch (after 10, committed alone): a block 11-13, an
	// exchange at 12 inside it, a frame at 9 inside the block 8-9 of an
	// earlier commit, and the finished exchange at 12.
	batch := appendBatch(t, s, w,
		frame(LaneAgent, "10"),
		frame(LaneAgent, "11"),
		frame(LaneAgent, "12"),
		frame(LaneAgent, "13"),
		Event{Seq: 12, Kind: KindExchange, Lane: LaneLLM, Flags: FlagIncomplete, Data: []byte("partial 12")},
		Event{Seq: 9, Kind: KindFrame, Lane: LaneStderr, Data: []byte("9 again")},
		Event{Seq: 12, Kind: KindExchange, Lane: LaneLLM, Data: []byte("finished 12")},
	)
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	want[8] = batch[5]
	want = append(want, batch[0], batch[1], batch[6], batch[3])
	compareEvents(t, readEvents(t, s, "replace"), want)
	checkLayout(t, s, "replace", []storedValue{
		{1, blockEncoding, 1}, {2, blockEncoding, 1}, {3, blockEncoding, 1}, {4, blockEncoding, 4}, {8, blockEncoding, 1},
		{9, blockEncoding, 1}, {10, blockEncoding, 1}, {11, blockEncoding, 1}, {12, eventEncoding, 1}, {13, blockEncoding, 1},
	})
	checkCounters(t, s, "replace", 12, 1)
}

func TestRandomWrites(t *testing.T) {
	// Whatever is appended in whatever order, Events returns the last
	// event written at each Seq, and the counters count them.
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "random"})
	r := rand.New(rand.NewPCG(5, 6))
	model := make(map[uint64]Event)
	var reserved []uint64
	var last uint64
	for i := range 3000 {
		e := Event{Kind: KindFrame, Lane: Lane(r.IntN(3) + 1), Offset: time.Duration(r.Int64N(1e12)), Data: fmt.Append(nil, i)}
		switch x := r.IntN(20); {
		case x < 2:
			last = w.Reserve()
			reserved = append(reserved, last)
			continue
		case x < 4 && len(reserved) > 0:
			// The exchange, often more than once.
			e.Seq, e.Kind, e.Lane = reserved[r.IntN(len(reserved))], KindExchange, LaneLLM
		case x < 5 && last > 0:
			// Anything anywhere.
			e.Seq, e.Kind = 1+r.Uint64N(last), Kind(r.IntN(3)+1)
		}
		e.Seq = w.Append(e)
		last = max(last, e.Seq)
		model[e.Seq] = e
		if r.IntN(200) == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	var want []Event
	var frames, exchanges int
	for _, seq := range slices.Sorted(maps.Keys(model)) {
		e := model[seq]
		want = append(want, e)
		switch e.Kind {
		case KindFrame:
			frames++
		case KindExchange:
			exchanges++
		}
	}
	compareEvents(t, readEvents(t, s, "random"), want)
	checkCounters(t, s, "random", frames, exchanges)
	if vals := layout(t, s, "random"); len(vals) > len(want)/2 {
		t.Errorf("%d events in %d values: frames are not stored in blocks", len(want), len(vals))
	}
}

func TestCommitsOnItsOwn(t *testing.T) {
	// Without Flush or Finish, the Writer commits a lone event and the
	// end of a burst: lingering for more ends when no more come.
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "own"})
	waitFrames := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			rec := mustGet(t, s, "own")
			if rec.Frames == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d frames committed after 10s, want %d", rec.Frames, n)
			}
		}
	}
	w.Append(frame(LaneEditor, "alone"))
	waitFrames(1)
	for i := range 5000 {
		w.Append(frame(LaneAgent, fmt.Sprint(i)))
	}
	waitFrames(5001)
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// v1Value encodes e as an event value of format 1, independently of
// encodeEvent, with zstd's default level, as any acptap may have.
func v1Value(t *testing.T, e Event) []byte {
	t.Helper()
	v := []byte{1, byte(e.Kind), byte(e.Lane), byte(e.Flags)}
	v = binary.AppendVarint(v, int64(e.Offset))
	if len(e.Data) == 0 {
		return v
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(e.Data, v)
}

// putRecording writes a recording with bbolt directly: its metadata, as
// JSON compressed at zstd's default level, and the values of its events.
func putRecording(t *testing.T, s *Store, rec Recording, vals map[uint64][]byte) {
	t.Helper()
	js, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	err = testDB{s}.Update(func(tx *bolt.Tx) error {
		b, err := tx.Bucket(recordingsBucket).CreateBucket([]byte(rec.Name))
		if err != nil {
			return err
		}
		if err := b.Put(metaKey, enc.EncodeAll(js, nil)); err != nil {
			return err
		}
		eb, err := b.CreateBucket(eventsBucket)
		if err != nil {
			return err
		}
		for seq, v := range vals {
			if err := eb.Put(binary.BigEndian.AppendUint64(nil, seq), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadFormat1(t *testing.T) {
	s := openTestStore(t)
	events := []Event{
		{Seq: 1, Kind: KindFrame, Lane: LaneEditor, Offset: time.Millisecond, Data: []byte(`{"jsonrpc":"2.0","id":1}`)},
		{Seq: 2, Kind: KindFrame, Lane: LaneAgent, Flags: FlagNoNewline, Offset: 2 * time.Millisecond},
		{Seq: 3, Kind: KindExchange, Lane: LaneLLM, Flags: FlagIncomplete, Offset: -1, Data: []byte(`{"method":"POST"}`)},
		{Seq: 5, Kind: KindFrame, Lane: LaneStderr, Flags: FlagContinued, Offset: 1<<63 - 1, Data: []byte("\xff\xfe not utf-8")},
		{Seq: 6, Kind: KindFrame, Lane: LaneAgent, Data: []byte("6")},
		{Seq: 7, Kind: KindFrame, Lane: LaneAgent, Data: []byte("7")},
		{Seq: 8, Kind: KindFrame, Lane: LaneEditor, Data: []byte("8")},
		{Seq: 9, Kind: KindExchange, Lane: LaneLLM, Data: []byte("9")},
		{Seq: 10, Kind: KindFrame, Lane: LaneAgent, Data: []byte("10")},
	}
	created := time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)

	// As acptap wrote recordings before frame blocks.
	old := make(map[uint64][]byte)
	for _, e := range events {
		old[e.Seq] = v1Value(t, e)
	}
	putRecording(t, s, Recording{Name: "format-1", Format: 1, Created: created, Done: true, Frames: 7, Exchanges: 2}, old)

	// Event values of format 1 among blocks.
	mixed := maps.Clone(old)
	for _, run := range [][2]int{{3, 6}, {8, 9}} { // 5-7, 10
		v, err := encodeBlock(events[run[0]:run[1]])
		if err != nil {
			t.Fatal(err)
		}
		mixed[events[run[0]].Seq] = v
		for _, e := range events[run[0]+1 : run[1]] {
			delete(mixed, e.Seq)
		}
	}
	putRecording(t, s, Recording{Name: "mixed", Format: FormatVersion, Created: created.Add(time.Second), Frames: 7, Exchanges: 2}, mixed)

	for _, name := range []string{"format-1", "mixed"} {
		compareEvents(t, readEvents(t, s, name), events)
		checkCounters(t, s, name, 7, 2)
	}
	checkLayout(t, s, "mixed", []storedValue{
		{1, eventEncoding, 1}, {2, eventEncoding, 1}, {3, eventEncoding, 1},
		{5, blockEncoding, 3}, {8, eventEncoding, 1}, {9, eventEncoding, 1}, {10, blockEncoding, 1},
	})
	recs, err := s.List()
	if err != nil || len(recs) != 2 || recs[0].Name != "format-1" || recs[0].Format != 1 || !recs[0].Done {
		t.Errorf("List = %+v, %v; want format-1 and mixed", recs, err)
	}

	// Both go away as a whole.
	if err := s.Delete("mixed"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	w, err := s.Create(Recording{Name: "format-1"}, true)
	if err != nil {
		t.Fatalf("Create with force over a recording of format 1: %v", err)
	}
	w.Append(frame(LaneAgent, "new"))
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	compareEvents(t, readEvents(t, s, "format-1"), []Event{{Seq: 1, Kind: KindFrame, Lane: LaneAgent, Data: []byte("new")}})
	if rec := mustGet(t, s, "format-1"); rec.Format != FormatVersion || rec.Done {
		t.Errorf("after Create with force: Format %d, Done %v; want %d, false", rec.Format, rec.Done, FormatVersion)
	}
}

func TestOverlappingValues(t *testing.T) {
	// A block that holds the Seq of the next key would make Events go
	// back in Seq order: it refuses to.
	s := openTestStore(t)
	events := []Event{frame(LaneAgent, "1"), frame(LaneAgent, "2"), frame(LaneAgent, "3")}
	for i := range events {
		events[i].Seq = uint64(i + 1)
	}
	block, err := encodeBlock(events)
	if err != nil {
		t.Fatal(err)
	}
	putRecording(t, s, Recording{Name: "overlap", Format: FormatVersion}, map[uint64][]byte{1: block, 2: v1Value(t, events[1])})
	var seen []uint64
	err = s.Events("overlap", func(e Event) error {
		seen = append(seen, e.Seq)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "event 2") {
		t.Errorf("Events over overlapping values = %v, want an error naming event 2", err)
	}
	if !slices.Equal(seen, []uint64{1, 2, 3}) {
		t.Errorf("fn saw %v, want the block's 1, 2, 3", seen)
	}
	// The invariants of openTestStore would fail too.
	if err := s.Delete("overlap"); err != nil {
		t.Fatal(err)
	}
}

func mustEncodeBlock(t testing.TB, events ...Event) []byte {
	t.Helper()
	for i := range events {
		events[i].Seq = uint64(i + 1)
		events[i].Kind = KindFrame
	}
	v, err := encodeBlock(events)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func FuzzDecodeBlock(f *testing.F) {
	enc, err := encoder()
	if err != nil {
		f.Fatal(err)
	}
	add := func(raw []byte) {
		f.Add(raw, uint64(1), []byte{1, 2, 3}, []byte(`{"jsonrpc":"2.0"}`), int64(time.Millisecond))
	}
	add(mustEncodeBlock(f, Event{Lane: LaneEditor, Data: []byte(`{"jsonrpc":"2.0"}`)}, Event{Lane: LaneAgent, Offset: -5}))
	add(mustEncodeBlock(f, Event{Lane: 255, Flags: 255, Offset: math.MinInt64, Data: []byte("\xff")}, Event{Offset: math.MaxInt64}))
	add([]byte{blockEncoding})
	add([]byte{blockEncoding, 0})
	add([]byte{blockEncoding, 0x80})
	add(binary.AppendUvarint([]byte{blockEncoding}, maxBlockEvents+1))
	add(append([]byte{blockEncoding, 2}, enc.EncodeAll([]byte{1, 0, 0, 1, 'x'}, nil)...))           // one event short
	add(append([]byte{blockEncoding, 1}, enc.EncodeAll([]byte{1, 0, 0, 1, 'x', 0}, nil)...))        // a byte too many
	add(append([]byte{blockEncoding, 1}, enc.EncodeAll([]byte{1, 0, 0, 5, 'x'}, nil)...))           // data truncated
	add(append([]byte{blockEncoding, 1}, enc.EncodeAll([]byte{1, 0, 0x80, 0x80, 0x80}, nil)...))    // offset truncated
	add(append([]byte{blockEncoding, 1}, enc.EncodeAll([]byte{1, 0, 0x80, 0x00, 0x81, 0}, nil)...)) // not minimal, but valid
	add(append([]byte{blockEncoding, 1}, 0x28, 0xb5, 0x2f, 0xfd))
	add([]byte{blockEncoding + 1, 1})
	f.Add([]byte{}, uint64(math.MaxUint64), []byte{}, []byte{}, int64(0))
	f.Add([]byte{}, uint64(math.MaxUint64-1), bytes.Repeat([]byte{7}, 300), bytes.Repeat([]byte("abc"), 1000), int64(-1))

	f.Fuzz(func(t *testing.T, raw []byte, first uint64, lanes, data []byte, step int64) {
		// Any value decodes or fails; what decodes re-encodes to the same
		// events.
		if events, err := decodeBlock(nil, first, raw); err == nil {
			if len(events) == 0 || len(events) > maxBlockEvents {
				t.Fatalf("decoded %d events", len(events))
			}
			for i, e := range events {
				if e.Seq != first+uint64(i) || e.Kind != KindFrame {
					t.Fatalf("event #%d = %s, want a frame with Seq %d", i, describe(e), first+uint64(i))
				}
			}
			v, err := encodeBlock(events)
			if err != nil {
				t.Fatalf("re-encoding %d decoded events: %v", len(events), err)
			}
			again, err := decodeBlock(nil, first, v)
			if err != nil {
				t.Fatalf("decoding re-encoded events: %v", err)
			}
			compareEvents(t, again, events)
		} else if len(raw) > 0 && raw[0] != blockEncoding {
			if _, err := decodeValue(nil, first, raw); len(raw) > 0 && raw[0] > blockEncoding && (err == nil || errors.Is(err, ErrUnknownFormat)) {
				t.Fatalf("decodeValue of encoding %d: %v, want an error, not ErrUnknownFormat", raw[0], err)
			}
		}

		// Events made of the input round trip.
		n := min(max(len(lanes), 1), maxBlockEvents)
		first = min(max(first, 1), math.MaxUint64-uint64(n-1))
		want := make([]Event, n)
		for i := range want {
			e := &want[i]
			e.Seq, e.Kind = first+uint64(i), KindFrame
			if i < len(lanes) {
				e.Lane, e.Flags = Lane(lanes[i]), Flag(lanes[i]*37)
			}
			e.Offset = time.Duration(step * int64(i*i))
			if d := data[i*len(data)/n : (i+1)*len(data)/n]; len(d) > 0 {
				e.Data = d
			}
		}
		v, err := encodeBlock(want)
		if blockRun(want) != n {
			if err == nil {
				t.Fatalf("encodeBlock of %d events that are not a block succeeded", n)
			}
			return
		}
		if err != nil {
			t.Fatalf("encodeBlock of %d events: %v", n, err)
		}
		if kind, m, err := valueSpan(first, v); err != nil || kind != KindFrame || m != uint64(n) {
			t.Fatalf("valueSpan = %d, %d, %v; want %d frames", kind, m, err, n)
		}
		got, err := decodeValue(nil, first, v)
		if err != nil {
			t.Fatalf("decodeValue(encodeBlock(%d events)): %v", n, err)
		}
		compareEvents(t, got, want)
		// The Data are their own: not the stored value's (bbolt reuses
		// it), nor each other's.
		for i := range v {
			v[i] = ^v[i]
		}
		for i := range got {
			got[i].Data = append(got[i].Data, "more"...)
			got[i].Data = got[i].Data[:len(got[i].Data)-4]
		}
		compareEvents(t, got, want)
	})
}

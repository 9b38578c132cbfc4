package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// TestMain runs the helper processes of the tests that need a second
// process: the test binary re-executes itself with childEnv set.
func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode, os.Getenv(childPathEnv)))
	}
	os.Exit(m.Run())
}

// openTestStore opens a store in a temporary directory. On cleanup it
// closes the store and checks the file's invariants.
func openTestStore(t *testing.T) *Store {
	t.Helper()
	return openTestStoreOptions(t, nil)
}

func openTestStoreOptions(t *testing.T, opts *Options) *Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acptap.db")
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		checkStoreFile(t, path)
	})
	return s
}

// checkStoreFile opens the store at path read-only and checks that bbolt
// finds it consistent, that every recording has readable metadata naming
// it, and that its events decode, come in strictly increasing Seq order
// and agree with the counters.
func checkStoreFile(t *testing.T, path string) {
	t.Helper()
	s, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Errorf("invariants: Open(%q): %v", path, err)
		return
	}
	defer s.Close()
	err = testDB{s}.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("invariants: bbolt check: %v", err)
		}
		if kept := tx.Bucket(replacedBucket); kept != nil {
			// Every Writer has ended: Finish drops what it replaced and
			// Discard puts it back.
			t.Errorf("invariants: recordings are kept aside after every Writer ended")
		}
		rs := tx.Bucket(recordingsBucket)
		if rs == nil {
			return errors.New("no recordings bucket")
		}
		return rs.ForEachBucket(func(k []byte) error {
			v := rs.Bucket(k).Get(metaKey)
			rec, err := decodeMeta(v)
			if err != nil {
				return fmt.Errorf("recording %q: %w", k, err)
			}
			if rec.Name != string(k) {
				t.Errorf("invariants: recording %q: metadata names %q", k, rec.Name)
			}
			return nil
		})
	})
	if err != nil {
		t.Errorf("invariants: %v", err)
	}
	recs, err := s.List()
	if err != nil {
		t.Errorf("invariants: List: %v", err)
		return
	}
	for _, rec := range recs {
		if rec.Format > FormatVersion {
			continue
		}
		var frames, exchanges int
		var last uint64
		err := s.Events(rec.Name, func(e Event) error {
			if e.Seq <= last {
				return fmt.Errorf("event %d after event %d", e.Seq, last)
			}
			last = e.Seq
			switch e.Kind {
			case KindFrame:
				frames++
			case KindExchange:
				exchanges++
			}
			return nil
		})
		if err != nil {
			t.Errorf("invariants: recording %q: %v", rec.Name, err)
		}
		if rec.Frames != frames || rec.Exchanges != exchanges {
			t.Errorf("invariants: recording %q: counters say %d frames, %d exchanges; events have %d, %d",
				rec.Name, rec.Frames, rec.Exchanges, frames, exchanges)
		}
		checkBlobs(t, s, rec.Name) // see blob_test.go
	}
}

// readEvents returns all events of a recording.
func readEvents(t *testing.T, s *Store, name string) []Event {
	t.Helper()
	var events []Event
	if err := s.Events(name, func(e Event) error {
		events = append(events, e)
		return nil
	}); err != nil {
		t.Fatalf("Events(%q): %v", name, err)
	}
	return events
}

func mustCreate(t *testing.T, s *Store, rec Recording) *Writer {
	t.Helper()
	w, err := s.Create(rec, false)
	if err != nil {
		t.Fatalf("Create(%q): %v", rec.Name, err)
	}
	return w
}

func mustGet(t *testing.T, s *Store, name string) Recording {
	t.Helper()
	rec, err := s.Get(name)
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	return rec
}

func eventEqual(a, b Event) bool {
	return a.Seq == b.Seq && a.Kind == b.Kind && a.Lane == b.Lane && a.Offset == b.Offset &&
		a.Flags == b.Flags && bytes.Equal(a.Data, b.Data)
}

func describe(e Event) string {
	d := e.Data
	if len(d) > 40 {
		d = d[:40]
	}
	return fmt.Sprintf("{Seq:%d Kind:%d Lane:%v Offset:%v Flags:%b Data(%d):%q}", e.Seq, e.Kind, e.Lane, e.Offset, e.Flags, len(e.Data), d)
}

func compareEvents(t *testing.T, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d events, want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if !eventEqual(got[i], want[i]) {
			t.Errorf("event %d:\ngot  %s\nwant %s", i, describe(got[i]), describe(want[i]))
		}
	}
}

func TestRoundTrip(t *testing.T) {
	s := openTestStore(t)
	created := time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)
	w := mustCreate(t, s, Recording{
		Name:     "round-trip",
		Created:  created,
		Version:  "v1.2.3",
		Argv:     []string{"agent", "--acp"},
		Cwd:      "/work",
		EnvNames: []string{"HOME", "PATH"},
	})

	big := make([]byte, 32<<20)
	r := rand.NewChaCha8([32]byte{1})
	r.Read(big)

	var want []Event
	for f := Flag(0); f <= FlagNoNewline|FlagContinued|FlagIncomplete; f++ {
		want = append(want, Event{Kind: KindFrame, Lane: LaneAgent, Flags: f, Offset: time.Duration(f) * time.Millisecond,
			Data: fmt.Appendf(nil, `{"jsonrpc":"2.0","flags":%d}`, f)})
	}
	want = append(want,
		Event{Kind: KindFrame, Lane: LaneEditor, Offset: time.Second},
		Event{Kind: KindFrame, Lane: LaneStderr, Offset: 2 * time.Second, Data: []byte("\xff\xfe\x00not utf-8 \xc3\x28\n\r")},
		Event{Kind: KindExchange, Lane: LaneLLM, Offset: time.Hour, Data: []byte(`{"method":"POST","url":"http://llm/v1"}`)},
		Event{Kind: KindFrame, Lane: LaneAgent, Offset: 3 * time.Hour, Flags: FlagContinued, Data: big},
		Event{Kind: KindFrame, Lane: LaneAgent, Offset: 1<<63 - 1, Data: []byte{0}},
	)
	for i := range want {
		want[i].Seq = w.Append(want[i])
		if want[i].Seq != uint64(i+1) {
			t.Fatalf("Append #%d returned Seq %d, want %d", i, want[i].Seq, i+1)
		}
	}
	w.Update(func(r *Recording) {
		r.Done = true
		r.ExitCode = 130
		r.Signal = "interrupt"
		r.Duration = 3 * time.Second
	})
	if err := w.Finish(); err != nil {
		t.Fatalf("Finish: %v", err)
	}

	compareEvents(t, readEvents(t, s, "round-trip"), want)

	got := mustGet(t, s, "round-trip")
	wantRec := Recording{
		Name: "round-trip", Format: FormatVersion, Created: created, Version: "v1.2.3",
		Argv: []string{"agent", "--acp"}, Cwd: "/work", EnvNames: []string{"HOME", "PATH"},
		Done: true, ExitCode: 130, Signal: "interrupt", Duration: 3 * time.Second,
		Frames: len(want) - 1, Exchanges: 1,
	}
	if !got.Created.Equal(wantRec.Created) {
		t.Errorf("Created = %v, want %v", got.Created, wantRec.Created)
	}
	got.Created = wantRec.Created
	if !reflect.DeepEqual(got, wantRec) {
		t.Errorf("Get:\ngot  %+v\nwant %+v", got, wantRec)
	}
}

func TestEventsSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acptap.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := mustCreate(t, s, Recording{Name: "r"})
	want := []Event{
		{Kind: KindFrame, Lane: LaneEditor, Data: []byte("one")},
		{Kind: KindFrame, Lane: LaneAgent, Data: []byte("two")},
	}
	for i := range want {
		want[i].Seq = w.Append(want[i])
	}
	// Close finishes the unfinished Writer.
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s, err = Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	compareEvents(t, readEvents(t, s, "r"), want)
	if rec := mustGet(t, s, "r"); rec.Frames != 2 {
		t.Errorf("Frames = %d, want 2", rec.Frames)
	}
}

func TestConcurrentAppend(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "concurrent"})
	const goroutines, perGoroutine = 16, 300
	seqs := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				kind, lane := KindFrame, Lane(g%3+1)
				if i%50 == 0 {
					kind, lane = KindExchange, LaneLLM
				}
				seqs[g] = append(seqs[g], w.Append(Event{Kind: kind, Lane: lane, Data: fmt.Appendf(nil, "%d/%d", g, i)}))
				if i%100 == 99 {
					if err := w.Flush(); err != nil {
						t.Errorf("Flush: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := w.Finish(); err != nil {
		t.Fatalf("Finish: %v", err)
	}

	wantData := make(map[uint64]string)
	var all []uint64
	for g, ss := range seqs {
		for i, seq := range ss {
			wantData[seq] = fmt.Sprintf("%d/%d", g, i)
			all = append(all, seq)
		}
	}
	slices.Sort(all)
	for i, seq := range all {
		if seq != uint64(i+1) {
			t.Fatalf("sorted Seqs[%d] = %d, want %d: Seqs are not unique and contiguous from 1", i, seq, i+1)
		}
	}
	events := readEvents(t, s, "concurrent")
	if len(events) != goroutines*perGoroutine {
		t.Fatalf("got %d events, want %d", len(events), goroutines*perGoroutine)
	}
	for _, e := range events {
		if string(e.Data) != wantData[e.Seq] {
			t.Errorf("event %d: Data = %q, want %q", e.Seq, e.Data, wantData[e.Seq])
		}
	}
	rec := mustGet(t, s, "concurrent")
	wantExchanges := goroutines * perGoroutine / 50
	if rec.Frames != goroutines*perGoroutine-wantExchanges || rec.Exchanges != wantExchanges {
		t.Errorf("counters = %d frames, %d exchanges; want %d, %d", rec.Frames, rec.Exchanges, goroutines*perGoroutine-wantExchanges, wantExchanges)
	}
}

func TestReserveAndReplace(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "reserve"})
	frame := func(d string) Event { return Event{Kind: KindFrame, Lane: LaneAgent, Data: []byte(d)} }

	if seq := w.Append(frame("a")); seq != 1 {
		t.Fatalf("first Append = %d, want 1", seq)
	}
	ex := w.Reserve()
	if ex != 2 {
		t.Fatalf("Reserve = %d, want 2", ex)
	}
	if seq := w.Append(frame("b")); seq != 3 {
		t.Fatalf("Append after Reserve = %d, want 3", seq)
	}
	partial := Event{Seq: ex, Kind: KindExchange, Lane: LaneLLM, Flags: FlagIncomplete, Offset: time.Millisecond, Data: []byte("partial")}
	if seq := w.Append(partial); seq != ex {
		t.Fatalf("Append of reserved %d returned %d", ex, seq)
	}
	if err := w.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	compareEvents(t, readEvents(t, s, "reserve"), []Event{
		{Seq: 1, Kind: KindFrame, Lane: LaneAgent, Data: []byte("a")},
		partial,
		{Seq: 3, Kind: KindFrame, Lane: LaneAgent, Data: []byte("b")},
	})
	if rec := mustGet(t, s, "reserve"); rec.Frames != 2 || rec.Exchanges != 1 {
		t.Errorf("after the incomplete exchange: %d frames, %d exchanges; want 2, 1", rec.Frames, rec.Exchanges)
	}

	// The finished exchange replaces the incomplete one, in a later commit.
	finished := Event{Seq: ex, Kind: KindExchange, Lane: LaneLLM, Offset: time.Millisecond, Data: []byte("finished")}
	w.Append(finished)
	if err := w.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if rec := mustGet(t, s, "reserve"); rec.Frames != 2 || rec.Exchanges != 1 {
		t.Errorf("after the replacement: %d frames, %d exchanges; want 2, 1", rec.Frames, rec.Exchanges)
	}

	// And when both are appended without a Flush between them, probably in
	// the same commit.
	ex2 := w.Reserve()
	w.Append(Event{Seq: ex2, Kind: KindExchange, Lane: LaneLLM, Flags: FlagIncomplete, Data: []byte("partial 2")})
	finished2 := Event{Seq: ex2, Kind: KindExchange, Lane: LaneLLM, Data: []byte("finished 2")}
	w.Append(finished2)
	if err := w.Finish(); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	compareEvents(t, readEvents(t, s, "reserve"), []Event{
		{Seq: 1, Kind: KindFrame, Lane: LaneAgent, Data: []byte("a")},
		finished,
		{Seq: 3, Kind: KindFrame, Lane: LaneAgent, Data: []byte("b")},
		finished2,
	})
	if rec := mustGet(t, s, "reserve"); rec.Frames != 2 || rec.Exchanges != 2 {
		t.Errorf("at the end: %d frames, %d exchanges; want 2, 2", rec.Frames, rec.Exchanges)
	}
}

func TestReplaceChangesKind(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "kinds"})
	seq := w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Data: []byte("frame")})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Append(Event{Seq: seq, Kind: KindExchange, Lane: LaneLLM, Data: []byte("exchange")})
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if rec := mustGet(t, s, "kinds"); rec.Frames != 0 || rec.Exchanges != 1 {
		t.Errorf("counters = %d frames, %d exchanges; want 0, 1", rec.Frames, rec.Exchanges)
	}
}

func TestAppendSeqAhead(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "ahead"})
	defer w.Finish()
	if seq := w.Append(Event{Seq: 10, Kind: KindFrame}); seq != 10 {
		t.Errorf("Append(Seq 10) = %d, want 10", seq)
	}
	if seq := w.Append(Event{Kind: KindFrame}); seq != 11 {
		t.Errorf("Append after Seq 10 = %d, want 11", seq)
	}
	if seq := w.Reserve(); seq != 12 {
		t.Errorf("Reserve = %d, want 12", seq)
	}
}

func TestCreateExisting(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "dup", Argv: []string{"old"}})
	w.Append(Event{Kind: KindFrame, Data: []byte("old 1")})
	w.Append(Event{Kind: KindFrame, Data: []byte("old 2")})
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}

	_, err := s.Create(Recording{Name: "dup"}, false)
	if !errors.Is(err, ErrExists) {
		t.Fatalf("Create of an existing name: err = %v, want ErrExists", err)
	}
	if !strings.Contains(err.Error(), `"dup"`) || !strings.Contains(err.Error(), s.Path()) {
		t.Errorf("error %q does not name the recording and the store", err)
	}

	w, err = s.Create(Recording{Name: "dup", Argv: []string{"new"}}, true)
	if err != nil {
		t.Fatalf("Create with force: %v", err)
	}
	w.Append(Event{Kind: KindFrame, Data: []byte("new")})
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	rec := mustGet(t, s, "dup")
	if !slices.Equal(rec.Argv, []string{"new"}) || rec.Frames != 1 {
		t.Errorf("after force: Argv %q, %d frames; want [new], 1", rec.Argv, rec.Frames)
	}
	compareEvents(t, readEvents(t, s, "dup"), []Event{{Seq: 1, Kind: KindFrame, Data: []byte("new")}})
}

func TestBusy(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "busy"})
	if _, err := s.Create(Recording{Name: "busy"}, true); !errors.Is(err, ErrBusy) {
		t.Errorf("Create with force of a recording being written: err = %v, want ErrBusy", err)
	}
	if err := s.Delete("busy"); !errors.Is(err, ErrBusy) {
		t.Errorf("Delete of a recording being written: err = %v, want ErrBusy", err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("busy"); err != nil {
		t.Errorf("Delete after Finish: %v", err)
	}
}

func TestListGetDelete(t *testing.T) {
	s := openTestStore(t)
	if recs, err := s.List(); err != nil || len(recs) != 0 {
		t.Fatalf("List of a new store = %v, %v; want none", recs, err)
	}
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, r := range []Recording{
		{Name: "b", Created: t0},
		{Name: "a", Created: t0},
		{Name: "c", Created: t0.Add(-time.Hour)},
	} {
		if err := mustCreate(t, s, r).Finish(); err != nil {
			t.Fatal(err)
		}
	}
	names := func() []string {
		t.Helper()
		recs, err := s.List()
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var names []string
		for _, r := range recs {
			names = append(names, r.Name)
		}
		return names
	}
	if got, want := names(), []string{"c", "a", "b"}; !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
	if rec := mustGet(t, s, "a"); !rec.Created.Equal(t0) || rec.Format != FormatVersion {
		t.Errorf("Get(a) = Created %v Format %d, want %v %d", rec.Created, rec.Format, t0, FormatVersion)
	}

	if err := s.Delete("a"); err != nil {
		t.Fatalf("Delete(a): %v", err)
	}
	if got, want := names(), []string{"c", "b"}; !slices.Equal(got, want) {
		t.Errorf("List after Delete = %q, want %q", got, want)
	}
	for op, err := range map[string]error{
		"Get":    func() error { _, err := s.Get("a"); return err }(),
		"Delete": s.Delete("a"),
		"Events": s.Events("a", func(Event) error { return nil }),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s of a deleted recording: err = %v, want ErrNotFound", op, err)
			continue
		}
		if !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), s.Path()) {
			t.Errorf("%s: error %q does not name the recording and the store", op, err)
		}
	}
}

func TestCreateDefaults(t *testing.T) {
	s := openTestStore(t)
	before := time.Now()
	w, err := s.Create(Recording{Name: "d", Format: 99, Frames: 5, Exchanges: 6}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	rec := mustGet(t, s, "d")
	if rec.Format != FormatVersion || rec.Frames != 0 || rec.Exchanges != 0 {
		t.Errorf("Format, Frames, Exchanges = %d, %d, %d; want %d, 0, 0", rec.Format, rec.Frames, rec.Exchanges, FormatVersion)
	}
	if rec.Created.Before(before.Truncate(time.Second)) {
		t.Errorf("Created = %v, want the time of Create (after %v)", rec.Created, before)
	}
}

func TestInvalidNames(t *testing.T) {
	for _, name := range []string{"a", "Z", "0", "fix-typo", "a.b_c-D.9", "a.", "a-", strings.Repeat("x", 128)} {
		if err := ValidName(name); err != nil {
			t.Errorf("ValidName(%q) = %v, want nil", name, err)
		}
	}
	s := openTestStore(t)
	for _, name := range []string{"", ".", ".a", "-a", "a b", "a/b", "../a", "é", "a\x00", strings.Repeat("x", 129)} {
		err := ValidName(name)
		if err == nil {
			t.Errorf("ValidName(%q) = nil, want an error", name)
			continue
		}
		if !strings.Contains(err.Error(), QuoteName(name)) || !strings.Contains(err.Error(), "letters, digits") {
			t.Errorf("ValidName(%q) = %q, want the name and the rule", name, err)
		}
		if _, err := s.Create(Recording{Name: name}, false); err == nil {
			t.Errorf("Create(%q) succeeded", name)
		}
		if _, err := s.Get(name); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q) = %v, want the invalid name error", name, err)
		}
	}
}

func TestEventsStopsAtFnError(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "stop"})
	for range 5 {
		w.Append(Event{Kind: KindFrame})
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	errStop := errors.New("stop here")
	calls := 0
	err := s.Events("stop", func(e Event) error {
		calls++
		if e.Seq == 2 {
			return errStop
		}
		return nil
	})
	if err != errStop {
		t.Errorf("Events = %v, want fn's error itself", err)
	}
	if calls != 2 {
		t.Errorf("fn called %d times, want 2", calls)
	}
}

func TestUpdateMetadata(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "meta", Argv: []string{"agent"}})
	w.Append(Event{Kind: KindFrame})
	w.Update(func(r *Recording) {
		r.Name = "renamed"
		r.Format = 7
		r.Frames = 99
		r.Exchanges = 99
		r.Done = true
		r.ExitCode = 2
		r.Error = "exec: not found"
	})
	// A metadata change alone is committed by Flush too.
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	rec := mustGet(t, s, "meta")
	if rec.Name != "meta" || rec.Format != FormatVersion || rec.Frames != 1 || rec.Exchanges != 0 {
		t.Errorf("Writer-kept fields = %q, %d, %d, %d; want meta, %d, 1, 0", rec.Name, rec.Format, rec.Frames, rec.Exchanges, FormatVersion)
	}
	if !rec.Done || rec.ExitCode != 2 || rec.Error != "exec: not found" || !slices.Equal(rec.Argv, []string{"agent"}) {
		t.Errorf("updated fields = %v, %d, %q, %q; want true, 2, exec: not found, [agent]", rec.Done, rec.ExitCode, rec.Error, rec.Argv)
	}
	w.Update(func(r *Recording) { r.Duration = time.Minute })
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if rec := mustGet(t, s, "meta"); rec.Duration != time.Minute || !rec.Done {
		t.Errorf("after Finish: Duration %v Done %v, want 1m0s true", rec.Duration, rec.Done)
	}
}

// errorLog collects the errors given to Options.OnError.
type errorLog struct {
	mu   sync.Mutex // guards errs
	errs []error
}

func (l *errorLog) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *errorLog) get() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

func TestCommitError(t *testing.T) {
	var log errorLog
	s := openTestStoreOptions(t, &Options{OnError: log.add})
	w := mustCreate(t, s, Recording{Name: "doomed"})
	w.Append(Event{Kind: KindFrame})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// Pull the recording from under the Writer.
	if err := (testDB{s}).Update(func(tx *bolt.Tx) error {
		return tx.Bucket(recordingsBucket).DeleteBucket([]byte("doomed"))
	}); err != nil {
		t.Fatal(err)
	}
	w.Append(Event{Kind: KindFrame})
	err := w.Flush()
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"doomed"`) {
		t.Fatalf("Flush after the recording vanished = %v, want ErrNotFound naming the recording", err)
	}
	w.Append(Event{Kind: KindFrame})
	w.Update(func(r *Recording) { r.Done = true })
	if err2 := w.Flush(); err2 != err {
		t.Errorf("second Flush = %v, want the first error %v", err2, err)
	}
	if err2 := w.Finish(); err2 != err {
		t.Errorf("Finish = %v, want the first error %v", err2, err)
	}
	if err2 := w.Finish(); err2 != err {
		t.Errorf("second Finish = %v, want the first error %v", err2, err)
	}
	if got := log.get(); len(got) != 1 || got[0] != err {
		t.Errorf("OnError got %v, want once %v", got, err)
	}
}

func TestAppendAfterFinish(t *testing.T) {
	var log errorLog
	s := openTestStoreOptions(t, &Options{OnError: log.add})
	w := mustCreate(t, s, Recording{Name: "late"})
	w.Append(Event{Kind: KindFrame, Data: []byte("in time")})
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if seq := w.Append(Event{Kind: KindFrame, Data: []byte("late")}); seq != 2 {
		t.Errorf("late Append = %d, want 2", seq)
	}
	w.Append(Event{Kind: KindFrame, Data: []byte("later")})
	w.Update(func(r *Recording) { r.Done = true })
	if err := w.Flush(); err != nil {
		t.Errorf("Flush after Finish = %v, want nil", err)
	}
	got := log.get()
	if len(got) != 1 || !errors.Is(got[0], ErrClosed) || !strings.Contains(got[0].Error(), "append event 2 after Finish") {
		t.Errorf("OnError got %v, want once ErrClosed for event 2", got)
	}
	compareEvents(t, readEvents(t, s, "late"), []Event{{Seq: 1, Kind: KindFrame, Data: []byte("in time")}})
	if mustGet(t, s, "late").Done {
		t.Errorf("Update after Finish was committed")
	}
}

func TestClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acptap.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Path() != path {
		t.Errorf("Path = %q, want %q", s.Path(), path)
	}
	w := mustCreate(t, s, Recording{Name: "open"})
	w.Append(Event{Kind: KindFrame})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.Finish(); err != nil {
		t.Errorf("Finish after Close: %v", err)
	}
	checks := map[string]error{
		"List":   func() error { _, err := s.List(); return err }(),
		"Get":    func() error { _, err := s.Get("open"); return err }(),
		"Events": s.Events("open", func(Event) error { return nil }),
		"Delete": s.Delete("open"),
		"Create": func() error { _, err := s.Create(Recording{Name: "new"}, false); return err }(),
	}
	for op, err := range checks {
		if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s after Close = %v, want ErrClosed naming the store", op, err)
		}
	}
	checkStoreFile(t, path)
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acptap.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := mustCreate(t, s, Recording{Name: "r"}).Finish(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Create(Recording{Name: "new"}, false); !errors.Is(err, berrors.ErrDatabaseReadOnly) {
		t.Errorf("Create on a read-only store = %v, want bbolt's ErrDatabaseReadOnly", err)
	}
	if err := s.Delete("r"); !errors.Is(err, berrors.ErrDatabaseReadOnly) {
		t.Errorf("Delete on a read-only store = %v, want bbolt's ErrDatabaseReadOnly", err)
	}
	mustGet(t, s, "r")
}

func BenchmarkAppend1KiB(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "acptap.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w, err := s.Create(Recording{Name: "bench"}, false)
	if err != nil {
		b.Fatal(err)
	}
	// A JSON-RPC notification, like most frames.
	line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`)
	r := rand.New(rand.NewPCG(1, 2))
	for len(line) < 1024-4 {
		line = append(line, "abcdefghijklmnopqrstuvwxyz     .,"[r.IntN(33)])
	}
	line = append(line, `"}}}`...)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	b.ResetTimer()
	// The timing includes Finish, so it measures sustained throughput to
	// disk, not just the queue.
	for i := 0; i < b.N; i++ {
		w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Offset: time.Duration(i), Data: line})
	}
	if err := w.Finish(); err != nil {
		b.Fatal(err)
	}
}

func TestUpdateInPlace(t *testing.T) {
	s := openTestStore(t)
	argv := []string{"agent", "--acp"}
	w := mustCreate(t, s, Recording{Name: "in-place", Argv: argv})
	// The caller's slice is not the Writer's.
	argv[0] = "changed by the caller"
	for i := range 200 {
		w.Append(Event{Kind: KindFrame})
		// Under -race, this would race with the commit's encoding if the
		// Writer shared the slice with it.
		w.Update(func(r *Recording) { r.Argv[1] = fmt.Sprint(i) })
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if got, want := mustGet(t, s, "in-place").Argv, []string{"agent", "199"}; !slices.Equal(got, want) {
		t.Errorf("Argv = %q, want %q", got, want)
	}
}

// BenchmarkAppendFrames1KiB is what `acptap record` asks of the store: 1 KiB
// lines of JSON-RPC, alternating between the editor and agent lanes, each a
// line of its own (a pool of 4096 distinct ones, so that no compressor
// window sees a line twice in a row of blocks).
func BenchmarkAppendFrames1KiB(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "acptap.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w, err := s.Create(Recording{Name: "bench"}, false)
	if err != nil {
		b.Fatal(err)
	}
	const size, pool = 1024, 4096
	r := rand.New(rand.NewPCG(3, 4))
	lines := make([][]byte, pool)
	for i := range lines {
		line := fmt.Appendf(make([]byte, 0, size), `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"sessionUpdate":"agent_message_chunk","messageId":"msg_%d","content":{"type":"text","text":"`, i)
		for len(line) < size-4 {
			line = append(line, "abcdefghijklmnopqrstuvwxyz     .,"[r.IntN(33)])
		}
		lines[i] = append(line, `"}}}`...)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	// The timing includes Finish: sustained throughput to disk.
	for i := 0; i < b.N; i++ {
		w.Append(Event{Kind: KindFrame, Lane: LaneEditor + Lane(i%2), Offset: time.Duration(i) * time.Microsecond, Data: lines[i%pool]})
	}
	if err := w.Finish(); err != nil {
		b.Fatal(err)
	}
}

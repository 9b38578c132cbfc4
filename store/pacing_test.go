package store

import (
	"bytes"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestCommitSpacing checks that a steady stream of events is committed in
// batches spaced by the commits' cost (commitSpacing), not an event or a
// commitInterval at a time: with each commit taken to last 10 ms, commits
// start at least maxCommitInterval (50 ms) apart, so 100 events appended
// a millisecond apart take a handful of commits where the interval alone
// would make about 20. A slow machine only makes fewer. Flush and Finish
// do not wait for the spacing, and every event is committed.
func TestCommitSpacing(t *testing.T) {
	minCommitTook = 10 * time.Millisecond
	t.Cleanup(func() { minCommitTook = 0 })
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "spaced"})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	before := lastTxID(t, s)
	const n = 100
	start := time.Now()
	for i := range n {
		w.Append(Event{Kind: KindFrame, Data: []byte("line")})
		if i < n-1 {
			time.Sleep(time.Millisecond)
		}
	}
	took := time.Since(start)
	flushed := time.Now()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	commits := lastTxID(t, s) - before
	// The most commits the spacing allows: one at the start, one per
	// spacing the appends lasted, one for Flush.
	if most := 2 + int(took/maxCommitInterval); commits > most {
		t.Errorf("%d events over %v took %d commits, want at most %d (spaced %v apart)", n, took, commits, most, maxCommitInterval)
	}
	t.Logf("%d events over %v: %d commits; Flush took %v", n, took, commits, time.Since(flushed))
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, "spaced").Frames; got != n {
		t.Errorf("Frames = %d, want %d", got, n)
	}
}

// TestUrgentDespiteSpacing checks that Flush, Throttle and Finish do not
// wait for the spacing of commits: with the last commit taken to have
// lasted a minute, the next would start 20 minutes later.
func TestUrgentDespiteSpacing(t *testing.T) {
	minCommitTook, maxSpacing = time.Minute, time.Hour
	t.Cleanup(func() { minCommitTook, maxSpacing = 0, maxCommitInterval })
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "urgent"})
	waitFor := func(what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() {
			defer close(done)
			f()
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("%s still waits a minute later: it waits for the commits' spacing", what)
		}
	}
	data := bytes.Repeat([]byte("x"), 1024)
	waitFor("Flush", func() {
		w.Append(Event{Kind: KindFrame, Data: data})
		if err := w.Flush(); err != nil {
			t.Error(err)
		}
	})
	waitFor("Throttle", func() {
		for range 3 {
			w.Append(Event{Kind: KindFrame, Data: data})
		}
		w.Throttle(len(data))
	})
	waitFor("Finish", func() {
		w.Append(Event{Kind: KindFrame, Data: data})
		if err := w.Finish(); err != nil {
			t.Error(err)
		}
	})
	if got := mustGet(t, s, "urgent").Frames; got != 5 {
		t.Errorf("Frames = %d, want 5", got)
	}
}

// lastTxID returns the id of the store's last commit.
func lastTxID(t *testing.T, s *Store) int {
	t.Helper()
	var id int
	if err := (testDB{s}).View(func(tx *bolt.Tx) error {
		id = tx.ID()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

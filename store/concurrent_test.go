package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// seqs returns the Seqs EventsFrom(name, from) yields.
func seqs(t *testing.T, s *Store, name string, from uint64) []uint64 {
	t.Helper()
	var got []uint64
	if _, err := s.EventsFrom(name, from, func(e Event) error {
		got = append(got, e.Seq)
		return nil
	}); err != nil {
		t.Fatalf("EventsFrom(%q, %d): %v", name, from, err)
	}
	return got
}

func TestEventsFrom(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "r"})
	// More than a page, in frame blocks (one commit), then an exchange
	// and more frames in a second commit.
	const n = 3*pageEvents + 17
	for i := range n {
		w.Append(frame(Lane(i%3+1), fmt.Sprint("frame ", i+1)))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Append(Event{Kind: KindExchange, Lane: LaneLLM, Data: []byte(`{}`)})
	w.Append(frame(LaneAgent, "last"))
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	for _, from := range []uint64{0, 1, 2, pageEvents, pageEvents + 1, n, n + 1, n + 2, n + 3, 1 << 40} {
		got := seqs(t, s, "r", from)
		first := max(from, 1)
		want := int(max(n+3, first) - first)
		if len(got) != want {
			t.Errorf("EventsFrom(%d) yields %d events, want %d", from, len(got), want)
			continue
		}
		for i, seq := range got {
			if seq != first+uint64(i) {
				t.Errorf("EventsFrom(%d): event %d has Seq %d, want %d", from, i, seq, first+uint64(i))
				break
			}
		}
	}
}

// TestEventsBetweenPages checks that fn runs outside the file's lock, free
// to write, and that a recording replaced or deleted between two pages is
// an error rather than a mix of two recordings.
func TestEventsBetweenPages(t *testing.T) {
	s := openTestStore(t)
	const total = 3 * pageEvents
	fill := func(name string) {
		w, err := s.Create(Recording{Name: name}, true)
		if err != nil {
			t.Fatal(err)
		}
		// Frame blocks of 256 KiB hold a few thousand of these: pages
		// end between blocks.
		for i := range total {
			w.Append(frame(LaneAgent, fmt.Sprintf("%0100d", i)))
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		change func() error
		want   error
	}{
		{func() error { fill("other"); return nil }, nil},
		{func() error {
			_, err := s.Create(Recording{Name: "r"}, true)
			if err == nil {
				err = s.writers["r"].Finish()
			}
			return err
		}, ErrChanged},
		{func() error { return s.ReplaceLane("r", LaneEditor, nil) }, ErrChanged},
		{func() error { return s.Delete("r") }, ErrNotFound},
	} {
		fill("r")
		n := 0
		err := s.Events("r", func(e Event) error {
			if n++; n == 1 {
				if err := tt.change(); err != nil {
					return fmt.Errorf("the change: %w", err)
				}
			}
			return nil
		})
		if tt.want == nil && (err != nil || n != total) || tt.want != nil && (!errors.Is(err, tt.want) || n >= total) {
			t.Errorf("Events with a change after the first event = %v after %d of %d events, want %v", err, n, total, tt.want)
		}
	}
}

// TestLive checks Live: set while a Writer writes, of this Store or of
// another Store of the file, and cleared by Finish; ErrBusy for what
// would change a live recording.
func TestLive(t *testing.T) {
	s := openTestStore(t)
	other, err := Open(s.Path(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	w := mustCreate(t, s, Recording{Name: "live"})
	w.Append(frame(LaneAgent, "x"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Store{s, other} {
		if rec, err := st.Get("live"); err != nil || !rec.Live {
			t.Errorf("Get while written = %+v, %v; want Live", rec, err)
		}
		if recs, err := st.List(); err != nil || len(recs) != 1 || !recs[0].Live {
			t.Errorf("List while written = %+v, %v; want it Live", recs, err)
		}
	}
	for name, err := range map[string]error{
		"Delete":      other.Delete("live"),
		"ReplaceLane": other.ReplaceLane("live", LaneEditor, nil),
		"PutBlob":     other.PutBlob("live", "b", nil),
		"Create":      func() error { _, err := other.Create(Recording{Name: "live"}, true); return err }(),
	} {
		if !errors.Is(err, ErrBusy) {
			t.Errorf("%s of a recording another Store writes = %v, want ErrBusy", name, err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if rec, err := other.Get("live"); err != nil || rec.Live {
		t.Errorf("Get after Finish = %+v, %v; want not Live", rec, err)
	}
	if err := other.Delete("live"); err != nil {
		t.Errorf("Delete after Finish: %v", err)
	}
}

// TestConcurrentStores has 8 Stores of one file write a recording each at
// once, each from 4 goroutines, and checks every recording whole.
func TestConcurrentStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acptap.db")
	const stores, goroutines, each = 8, 4, 1000
	var wg sync.WaitGroup
	errs := make(chan error, stores)
	for i := range stores {
		wg.Go(func() {
			s, err := Open(path, nil)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			w, err := s.Create(Recording{Name: fmt.Sprint("r", i)}, false)
			if err != nil {
				errs <- err
				return
			}
			var ag sync.WaitGroup
			for g := range goroutines {
				ag.Go(func() {
					for k := range each {
						w.Append(frame(Lane(g%3+1), fmt.Sprintf("%d %d %d", i, g, k)))
					}
				})
			}
			ag.Wait()
			errs <- w.Finish()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range stores {
		name := fmt.Sprint("r", i)
		next := map[int]int{}
		var n uint64
		err := s.Events(name, func(e Event) error {
			n++
			var si, g, k int
			if _, err := fmt.Sscanf(string(e.Data), "%d %d %d", &si, &g, &k); err != nil || si != i || k != next[g] || e.Seq != n {
				return fmt.Errorf("event %d = %q, want Seq %d and goroutine %d's frame %d of store %d", e.Seq, e.Data, n, g, next[g], i)
			}
			next[g]++
			return nil
		})
		if err != nil || n != goroutines*each {
			t.Errorf("%s: %v after %d events, want %d", name, err, n, goroutines*each)
		}
	}
	checkStoreFile(t, path)
}

package store

import (
	"errors"
	"testing"
)

// TestDiscard: a discarded recording is gone, its name free for the next
// Create without force, and a recording of another name stays.
func TestDiscard(t *testing.T) {
	s := openTestStore(t)
	keep := mustCreate(t, s, Recording{Name: "keep"})
	if err := keep.Finish(); err != nil {
		t.Fatal(err)
	}
	w := mustCreate(t, s, Recording{Name: "x", Argv: []string{"agent"}})
	w.Update(func(r *Recording) { r.Done = true })
	if err := w.Discard(); err != nil {
		t.Fatalf("Discard: %v", err)
	}
	if _, err := s.Get("x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Discard: %v, want ErrNotFound", err)
	}
	if err := w.Discard(); err != nil {
		t.Errorf("a second Discard: %v", err)
	}
	if err := w.Finish(); err != nil {
		t.Errorf("Finish after Discard: %v", err)
	}
	again, err := s.Create(Recording{Name: "x"}, false)
	if err != nil {
		t.Fatalf("Create of the discarded name without force: %v", err)
	}
	if err := again.Finish(); err != nil {
		t.Fatal(err)
	}
	recs, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Errorf("List: %d recordings, want keep and the new x", len(recs))
	}
}

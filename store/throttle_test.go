package store

import (
	"bytes"
	"testing"
)

// TestThrottle checks that Backlog counts the data appended and not yet
// committed, and that Throttle waits for commits to bring it within its
// bound: with the file's lock held by another connection nothing commits,
// so a Throttle below the backlog cannot return until it is released.
func TestThrottle(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "throttle"})
	const size, n = 100 << 10, 5
	data := bytes.Repeat([]byte("x"), size)
	release := holdLock(t, s.path)
	for range n {
		w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Data: bytes.Clone(data)})
	}
	if got, want := w.Backlog(), n*size; got != want {
		t.Fatalf("Backlog with the lock held: got %d, want %d", got, want)
	}
	returned := make(chan int)
	go func() {
		w.Throttle(2 * size)
		returned <- w.Backlog()
	}()
	select {
	case got := <-returned:
		t.Fatalf("Throttle(%d) returned with nothing committed, backlog %d", 2*size, got)
	default:
	}
	release()
	if got := <-returned; got > 2*size {
		t.Errorf("Backlog once Throttle(%d) returned: got %d, want at most that", 2*size, got)
	}
	if err := w.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := w.Backlog(); got != 0 {
		t.Errorf("Backlog after Flush: got %d, want 0", got)
	}
	if err := w.Finish(); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	w.Throttle(0) // returns: nothing is pending after Finish
	frames := 0
	if err := s.Events("throttle", func(e Event) error {
		if !bytes.Equal(e.Data, data) {
			t.Errorf("event %d: %d bytes differ from the %d appended", e.Seq, len(e.Data), size)
		}
		frames++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if frames != n {
		t.Errorf("frames stored: got %d, want %d", frames, n)
	}
}

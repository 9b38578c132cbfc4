package store

import (
	"bytes"
	"testing"
	"time"
)

// TestThrottle checks that Throttle waits while more than its bound is
// queued for the next commit, and no longer: with the file's lock held by
// another connection, the first event's commit waits for it, the others
// queue behind it, and a Throttle below them cannot return until the lock
// is released and the Writer takes them.
func TestThrottle(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "throttle"})
	const size, n = 100 << 10, 5
	data := bytes.Repeat([]byte("x"), size)
	queued := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.queueBytes
	}
	release := holdLock(t, s.path)
	w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Data: bytes.Clone(data)})
	for queued() != 0 { // until the Writer has taken it, to wait for the lock
		time.Sleep(time.Millisecond)
	}
	for range n - 1 {
		w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Data: bytes.Clone(data)})
	}
	if got, want := queued(), (n-1)*size; got != want {
		t.Fatalf("queued with the lock held: got %d bytes, want %d", got, want)
	}
	returned := make(chan int)
	go func() {
		w.Throttle(2 * size)
		returned <- queued()
	}()
	select {
	case got := <-returned:
		t.Fatalf("Throttle(%d) returned with the commit waiting for the lock, %d bytes queued", 2*size, got)
	default:
	}
	release()
	if got := <-returned; got > 2*size {
		t.Errorf("queued once Throttle(%d) returned: got %d bytes, want at most that", 2*size, got)
	}
	if err := w.Finish(); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	w.Throttle(0) // returns at once after Finish
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

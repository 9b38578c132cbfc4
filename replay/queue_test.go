package replay

import (
	"errors"
	"fmt"
	"testing"
)

// TestLineQueueSpills checks that a lineQueue holds the data of its lines
// up to its budget, reads the rest back as it passes them on, in order,
// and lets go of what it passed.
func TestLineQueueSpills(t *testing.T) {
	var spooled [][]byte
	var reads []int
	q := newLineQueue(func(at int) ([]byte, error) {
		reads = append(reads, at)
		return spooled[at], nil
	})
	q.budget = 100
	for i := range 10 {
		line := fmt.Appendf(nil, "%02d%s", i, make([]byte, 38)) // 40 bytes
		spooled = append(spooled, line)
		q.push(line, i)
	}
	q.close()
	if q.held != 80 {
		t.Errorf("held %d bytes of 400 with a budget of 100, want 80", q.held)
	}
	out := make(chan []byte)
	go q.feed(out, make(chan struct{}))
	i := 0
	for line := range out {
		if got, want := string(line[:2]), fmt.Sprintf("%02d", i); got != want {
			t.Fatalf("line %d: got %q, want %q", i, got, want)
		}
		i++
	}
	if i != 10 {
		t.Fatalf("passed %d lines, want 10", i)
	}
	if want := []int{2, 3, 4, 5, 6, 7, 8, 9}; fmt.Sprint(reads) != fmt.Sprint(want) {
		t.Errorf("read back %v, want %v", reads, want)
	}
	if q.held != 0 || q.fail() != nil {
		t.Errorf("after: held %d, fail %v; want 0, nil", q.held, q.fail())
	}
}

// TestLineQueueReadBackFails checks that a line the queue cannot read
// back ends the feed, its error kept.
func TestLineQueueReadBackFails(t *testing.T) {
	broken := errors.New("disk gone")
	q := newLineQueue(func(int) ([]byte, error) { return nil, broken })
	q.budget = 10
	q.push(make([]byte, 8), 0)
	q.push(make([]byte, 8), 1)
	out := make(chan []byte)
	go q.feed(out, make(chan struct{}))
	n := 0
	for range out {
		n++
	}
	if n != 1 || !errors.Is(q.fail(), broken) {
		t.Errorf("passed %d lines, fail %v; want 1, %v", n, q.fail(), broken)
	}
}

package stamp

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestOrder takes Stamps from many goroutines at once, frames and
// exchanges mixed, and checks that they are unique, that each
// goroutine's increase, and that sorted by Stamp the times never go back
// and the counts number the exchanges 1, 2, 3, ... without a gap.
func TestOrder(t *testing.T) {
	c := NewClock()
	const goroutines, each = 8, 2000
	got := make([][]Stamp, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				var s Stamp
				if (g+i)%3 == 0 {
					s = c.Exchange()
				} else {
					s = c.Frame()
				}
				if n := len(got[g]); n > 0 && s <= got[g][n-1] {
					t.Errorf("goroutine %d: stamp %#x after %#x, want it greater", g, s, got[g][n-1])
				}
				got[g] = append(got[g], s)
			}
		})
	}
	wg.Wait()
	all := slices.Concat(got...)
	slices.Sort(all)
	if n := len(slices.Compact(slices.Clone(all))); n != len(all) {
		t.Fatalf("%d distinct stamps of %d, want all distinct", n, len(all))
	}
	var exchanges uint64
	prevNanos := int64(0)
	for i, s := range all {
		n := s.Nanos()
		if i > 0 && n <= prevNanos {
			t.Fatalf("stamp %d: time %d after %d, want later", i, n, prevNanos)
		}
		prevNanos = n
		count := s.Exchanges(exchanges)
		switch count {
		case exchanges:
		case exchanges + 1:
			exchanges = count
		default:
			t.Fatalf("stamp %d: count %d after %d, want it to grow by one exchange at a time", i, count, exchanges)
		}
	}
	if want := uint64(goroutines * each / 3); exchanges < want {
		t.Errorf("counted %d exchanges, want at least %d", exchanges, want)
	}
}

// TestTimeIsNow checks that a Stamp's time is the clock's time when it
// was taken, as Now and time.Now read it.
func TestTimeIsNow(t *testing.T) {
	c := NewClock()
	before, beforeT := Now(), time.Now()
	s := c.Frame()
	after, afterT := Now(), time.Now()
	n := s.Nanos()
	// The Stamp's microsecond resolution: its time is the microsecond it
	// was taken in, or the next one when the clock had not moved since
	// the clock's own start (NewClock) in that microsecond.
	if lo, hi := before/1000*1000, after/1000*1000+1000; n < lo || n > hi {
		t.Errorf("stamp's time %d, want between %d and %d", n, lo, hi)
	}
	at := s.Time()
	if at.Before(beforeT.Add(-time.Microsecond-time.Millisecond/10)) || at.After(afterT.Add(time.Millisecond/10)) {
		t.Errorf("stamp's Time %v, want between %v and %v", at, beforeT, afterT)
	}
	if got := NanosOf(FromNanos(n)); got != n {
		t.Errorf("NanosOf(FromNanos(%d)) = %d, want it back", n, got)
	}
}

// TestWrap takes Stamps from a clock whose reading passes the end of the
// time field, from a word whose count field is about to wrap: the order
// and the widened values carry on across.
func TestWrap(t *testing.T) {
	var w atomic.Uint64
	start := uint64(1)<<timeBits - 5 // µs, 5 before the field wraps
	w.Store((start-1)&timeMask<<countBits | countMask - 1)
	c := On(&w)
	var prev int64
	count := uint64(countMask - 1)
	for i := range 10 {
		now := start + uint64(i) // the clock's reading
		s := c.takeAt(now&timeMask, 1)
		if got := s.Exchanges(count); got != count+1 {
			t.Fatalf("exchange %d: count %d, want %d", i, got, count+1)
		}
		count++
		n := s.nanosAt(int64(now))
		if i > 0 && n <= prev {
			t.Fatalf("exchange %d: time %d after %d", i, n, prev)
		}
		if n != int64(now)*1000 {
			t.Errorf("exchange %d: time %d, want the clock's %d", i, n, now*1000)
		}
		prev = n
	}
	if count <= countMask {
		t.Fatalf("count %d did not pass the field's width", count)
	}

	// A clock that does not move: each Stamp a microsecond later, across
	// the wrap too.
	w.Store(uint64(timeMask) << countBits)
	s1 := c.takeAt(timeMask-1, 0) // the clock behind the word
	s2 := c.takeAt(timeMask-1, 0)
	if got := uint64(s1) >> countBits; got != 0 {
		t.Errorf("time field after the last one = %d, want 0", got)
	}
	if got := uint64(s2) >> countBits; got != 1 {
		t.Errorf("time field next = %d, want 1", got)
	}
	// Read by a clock still at timeMask-1, they lie ahead of it.
	if n1, n2 := s1.nanosAt(timeMask-1), s2.nanosAt(timeMask-1); n1 != (timeMask+1)*1000 || n2 != n1+1000 {
		t.Errorf("times of stamps ahead of the clock = %d, %d; want %d, %d", n1, n2, (timeMask+1)*1000, (timeMask+2)*1000)
	}
}

// TestExchangesNear widens counts from either side of the reference.
func TestExchangesNear(t *testing.T) {
	for _, tc := range []struct{ count, near uint64 }{
		{0, 0}, {5, 3}, {3, 5}, {countMask + 7, countMask - 2}, {countMask - 2, countMask + 7},
		{1 << 40, 1<<40 + countHalf - 1}, {1<<40 + countHalf - 1, 1 << 40},
	} {
		s := Stamp(tc.count & countMask)
		if got := s.Exchanges(tc.near); got != tc.count {
			t.Errorf("Stamp with count %d read near %d = %d, want %d", tc.count, tc.near, got, tc.count)
		}
	}
}

func BenchmarkFrame(b *testing.B) {
	c := NewClock()
	for b.Loop() {
		c.Frame()
	}
}

func BenchmarkFrameParallel(b *testing.B) {
	c := NewClock()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Frame()
		}
	})
}

func BenchmarkTimeNow(b *testing.B) {
	for b.Loop() {
		time.Now()
	}
}

package tapproc

import (
	"testing"
	"time"
)

func TestMonotonicRoundTrip(t *testing.T) {
	for _, ago := range []time.Duration{0, time.Millisecond, time.Hour, 30 * 24 * time.Hour} {
		t0 := time.Now()
		start := t0.Add(-ago)
		got := timeAt(monotonicAt(start))
		took := time.Since(t0)
		// Only the reads of the clocks in between may part them, and only
		// to make the time earlier (see monotonicAt); a microsecond for
		// the two clocks' rounding.
		if d := start.Sub(got); d < -time.Microsecond || d > took+time.Microsecond {
			t.Errorf("%v ago: the round trip came out %v earlier, want 0 to %v", ago, d, took)
		}
	}
}

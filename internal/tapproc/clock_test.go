package tapproc

import (
	"testing"
	"time"
)

func TestMonotonicRoundTrip(t *testing.T) {
	for _, ago := range []time.Duration{0, time.Millisecond, time.Hour, 30 * 24 * time.Hour} {
		start := time.Now().Add(-ago)
		got := timeAt(monotonicAt(start))
		// Only the few reads of the clocks in between may part them.
		if d := got.Sub(start); d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("%v ago: round trip moved the time by %v, want under 1ms", ago, d)
		}
	}
}

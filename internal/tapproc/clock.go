package tapproc

import (
	"time"

	"golang.org/x/sys/unix"
)

// Both processes count an exchange's time from Config.Start. A
// time.Time's monotonic reading means nothing in another process, and a
// duration sent down the pipe arrives late by the pipe's latency, so the
// start crosses as a reading of the system's monotonic clock, which all
// processes share and no change of the wall clock moves.

// monotonicAt is t as a reading of the system's monotonic clock, in
// nanoseconds. It reads the system's clock before Go's: the time between
// the two reads makes the reading early, never late, so that no time
// counted from it comes out earlier than it was.
func monotonicAt(t time.Time) int64 {
	mono := monotonicNow()
	return mono - int64(time.Since(t))
}

// timeAt is the time.Time of a reading of the system's monotonic clock,
// with a monotonic reading of this process's own. It reads Go's clock
// before the system's, which again makes it early, never late.
func timeAt(mono int64) time.Time {
	now := time.Now()
	return now.Add(-time.Duration(monotonicNow() - mono))
}

// monotonicNow reads the system's monotonic clock. Go's runtime reads the
// same clock but does not expose the reading.
func monotonicNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// Every unix Go runs on has CLOCK_MONOTONIC; were it refused, it
		// would be in both processes, which then agree on the wall clock.
		return time.Now().UnixNano()
	}
	return ts.Nano()
}

package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// hangGuard bounds the wait for a finalizer that must run.
const hangGuard = time.Minute

func TestPercent(t *testing.T) {
	const floor = 64 << 20
	for _, tt := range []struct {
		live uint64
		want int
	}{
		{0, 100},           // nothing read
		{2 << 20, 3100},    // 2 MiB live: 64 MiB is 32 times it
		{4 << 20, 1500},    // 4 MiB
		{32 << 20, 100},    // the floor is twice it
		{1 << 30, 100},     // far above the floor: GOGC=100
		{1, maxPercent},    // next to nothing live
		{floor/2 - 1, 100}, // just under half the floor: GOGC just above 100
	} {
		if got := percent(floor, tt.live); got != tt.want {
			t.Errorf("percent(%d, %d) = %d, want %d", floor, tt.live, got, tt.want)
		}
	}
}

// gogc returns the current GOGC.
func gogc() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestSet: after a collection the tuner sets GOGC for the floor, from
// the live heap, and the heap then takes garbage of a good part of the
// floor without a collection; undo puts GOGC back to 100.
func TestSet(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT is set: Set does nothing")
	}
	const floor = 256 << 20
	undo := Set(floor)
	defer undo()
	if got, want := gogc(), floor/runtimeMinimum*100; got != want {
		t.Errorf("GOGC before the first collection = %d, want %d", got, want)
	}
	// The test binary holds far less than half of 256 MiB.
	tuned := make(chan int, 1)
	testTuned = func(p int) {
		select {
		case tuned <- p:
		default:
		}
	}
	defer func() { testTuned = nil }()
	runtime.GC()
	var p int
	select {
	case p = <-tuned:
	case <-time.After(hangGuard):
		t.Fatal("the tuner did not run after a collection")
	}
	if p <= 100 {
		t.Errorf("GOGC set to %d with a small live heap, want more than 100", p)
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var keep [][]byte
	for range 32 {
		keep = append(keep[:0], make([]byte, 1<<20))
	}
	runtime.KeepAlive(keep)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if after.NumGC != before.NumGC {
		t.Errorf("%d collections for 32 MiB of garbage under a floor of 256 MiB, want none", after.NumGC-before.NumGC)
	}
	undo()
	if got := gogc(); got != 100 {
		t.Errorf("GOGC after undo = %d, want 100", got)
	}
}

// TestSetLeavesTheUsersChoice: with GOGC set, Set changes nothing.
func TestSetLeavesTheUsersChoice(t *testing.T) {
	t.Setenv("GOGC", "150")
	was := gogc()
	undo := Set(64 << 20)
	if got := gogc(); got != was {
		t.Errorf("GOGC = %d with GOGC set, want it left at %d", got, was)
	}
	undo()
	if got := gogc(); got != was {
		t.Errorf("GOGC = %d after undo, want it left at %d", got, was)
	}
}

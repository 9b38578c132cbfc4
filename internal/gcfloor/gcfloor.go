// Package gcfloor lets a process's heap grow to a floor before the garbage collector collects it, for a process that holds little and makes garbage fast.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// runtimeMinimum is the heap the runtime lets a program grow to before
// its first collection, at GOGC=100.
const runtimeMinimum = 4 << 20

// Set makes the garbage collector aim, from each collection to the next,
// for a heap of floor bytes or of twice the live heap, whichever is more:
// GOGC=100 above the floor, fewer collections below it. A replay holds a
// few MiB and makes as much garbage with each LLM request it serves: at
// GOGC=100 alone it collected every few milliseconds, which cost more CPU
// than holding the whole recording had.
//
// Set does nothing if GOGC or GOMEMLIMIT is set: the user chose. undo
// puts GOGC back to 100 and stops the tuning.
func Set(floor uint64) (undo func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	t := &tuner{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	// Until the first collection the runtime aims for its minimum, scaled
	// by GOGC.
	debug.SetGCPercent(int(min(floor*100/runtimeMinimum, maxPercent)))
	t.arm()
	return func() {
		t.stopped.Store(true)
		debug.SetGCPercent(100)
	}
}

// tuner sets GOGC after each collection, from the heap it left live.
type tuner struct {
	floor   uint64
	sample  []metrics.Sample
	stopped atomic.Bool
}

// testTuned, if not nil, is called with each GOGC the tuner sets.
var testTuned func(gogc int)

// sentinel is garbage whose finalizer runs after a collection. It is too
// big to be a tiny allocation, whose finalizer may never run.
type sentinel struct {
	t *tuner
	_ [16]byte
}

// arm has t tune after the next collection, and arm again.
func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.tune()
		s.t.arm()
	})
}

func (t *tuner) tune() {
	metrics.Read(t.sample)
	var live uint64
	if v := t.sample[0].Value; v.Kind() == metrics.KindUint64 {
		live = v.Uint64()
	}
	p := percent(t.floor, live)
	debug.SetGCPercent(p)
	if testTuned != nil {
		testTuned(p)
	}
}

// maxPercent bounds GOGC when almost nothing is live.
const maxPercent = 1 << 20

// percent returns the GOGC that aims for a heap of floor bytes, or twice
// live, whichever is more: GOGC=P lets the heap grow to live×(1+P/100).
func percent(floor, live uint64) int {
	if live == 0 || 2*live >= floor {
		return 100
	}
	return int(min(floor*100/live-100, maxPercent))
}

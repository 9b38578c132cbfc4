package main

import (
	"sync"
)

// inOrder runs run for each name (a recording to replay, a scenario to
// record), up to parallel at once, and hands the outcomes to emit in the
// order of names, each as soon as it and every outcome before it are in:
// reports come out whole and in order whatever order the runs end in. At
// most parallel runs are running or waiting to be emitted, so that
// --parallel 1 is one run after another, and outcomes never pile up
// behind a slow run. When emit returns false, no further run starts;
// inOrder waits for the running ones and returns without emitting them.
func inOrder[T any](names []string, parallel int, run func(string) T, emit func(T) bool) {
	parallel = max(1, min(parallel, len(names)))
	slots := make([]chan T, len(names))
	for i := range slots {
		slots[i] = make(chan T, 1)
	}
	// A token is a place in the window of replays started but not yet
	// emitted; the emitter gives one back per outcome it emits.
	tokens := make(chan struct{}, parallel)
	for range parallel {
		tokens <- struct{}{}
	}
	quit := make(chan struct{})
	indexes := make(chan int)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(indexes)
		for i := range names {
			select {
			case <-tokens:
			case <-quit:
				return
			}
			select {
			case indexes <- i:
			case <-quit:
				return
			}
		}
	})
	for range parallel {
		wg.Go(func() {
			for i := range indexes {
				slots[i] <- run(names[i])
			}
		})
	}
	for i := range names {
		if !emit(<-slots[i]) {
			break
		}
		tokens <- struct{}{}
	}
	close(quit)
	wg.Wait()
}

package main

import (
	"errors"
	"time"

	"github.com/acptap/acptap/store"
)

// How show --follow polls a recording being recorded: a reader sees a
// frame at most followPoll after its recorder committed it, and a
// recorder commits at most 5ms after the agent wrote it while the agent
// is busy, at once otherwise (see store.Writer). Each poll holds the
// store's shared lock for one short read.
const (
	followPoll = 10 * time.Millisecond
	// gapWait is how long a Seq missing among those committed is waited
	// for: a recorder reserves the Seq of an LLM exchange when its request
	// starts and commits the exchange moments later, possibly after frames
	// with later Seqs.
	gapWait = time.Second
)

// follow prints, with emit, the events of the recording rec (as Get
// returned it) as its recorder commits them, and returns when the
// recording is done or its recorder is gone, once everything it committed
// is printed. It calls flush after each pass over what was committed, in
// which emit may have been called or not. Frames come in Seq order; an LLM exchange is printed once it
// has ended, in its final form as show prints it, so that it may come
// after frames with later Seqs; one still in flight when the recording
// ends is printed as it was left.
func follow(st *store.Store, rec store.Recording, emit func(store.Event) error, flush func() error) error {
	name := rec.Name
	from := uint64(1)                 // every Seq before it is printed or given up on
	printed := map[uint64]bool{}      // Seqs from from on that are printed
	gaps := map[uint64]time.Time{}    // missing Seqs, since when
	inFlight := map[uint64]struct{}{} // exchanges seen with FlagIncomplete, not printed
	// The metadata as read with the events: Done there means that they
	// were all read. A recorder that died may have committed after the
	// read and before it died: one more read after it is found dead.
	last := rec.Done || !rec.Live
	for {
		expect := from // the Seq after the last one seen in this pass
		got, err := st.EventsFrom(name, from, func(e store.Event) error {
			for gap := expect; gap < e.Seq; gap++ {
				if _, ok := gaps[gap]; !ok && !printed[gap] {
					gaps[gap] = time.Now()
				}
			}
			expect = e.Seq + 1
			delete(gaps, e.Seq)
			if printed[e.Seq] {
				return nil
			}
			if e.Kind == store.KindExchange && e.Flags&store.FlagIncomplete != 0 && !last {
				inFlight[e.Seq] = struct{}{}
				return nil
			}
			printed[e.Seq] = true
			delete(inFlight, e.Seq)
			return emit(e)
		})
		if errors.Is(err, store.ErrLocked) {
			// A live view waits as long as it takes: another process
			// held the store's lock for longer than a read waits (a
			// machine too busy to run it, say).
			continue
		}
		if err != nil {
			return err
		}
		if err := flush(); err != nil {
			return err
		}
		if last || got.Done && len(inFlight) == 0 {
			return nil
		}
		// Done with exchanges seen in flight by an earlier page, or the
		// recorder gone: one last pass prints what is left as it is.
		last = got.Done || !got.Live
		// The next pass starts at the first Seq still to come.
		next := expect
		for seq := range inFlight {
			next = min(next, seq)
		}
		for seq, since := range gaps {
			if time.Since(since) > gapWait {
				delete(gaps, seq)
				continue
			}
			next = min(next, seq)
		}
		for seq := range printed {
			if seq < next {
				delete(printed, seq)
			}
		}
		from = next
		if !last {
			time.Sleep(followPoll)
		}
	}
}

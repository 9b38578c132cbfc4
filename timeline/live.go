package timeline

import (
	"cmp"
	"slices"

	"github.com/acptap/acptap/store"
)

// Live is the page of a recording in progress: its events are added as
// its recorder commits them, and each Page is built from all of them
// anew, as Recording builds it, since a new event changes old rows (a
// response pairs with its request, an exchange joins its turn).
type Live struct {
	join   func(store.Event) error // store.JoinLines into events
	events []liveEvent             // whole lines and exchanges, copied, in order of key
	adding uint64                  // the Seq of the event Add is adding
}

// liveEvent is an event and its place: its Seq, and a line's in pieces
// the Seq of its last piece, where Recording's store.Lines passes it.
type liveEvent struct {
	store.Event
	key uint64
}

// NewLive returns the Live page of a recording with no event yet.
func NewLive() *Live {
	l := &Live{}
	l.join = store.JoinLines(func(e store.Event) error {
		e.Data = slices.Clone(e.Data) // the store's callback reuses its arrays
		// An exchange is committed when it ends, after frames with later
		// Seqs: it goes in its place.
		at, _ := slices.BinarySearchFunc(l.events, l.adding, func(x liveEvent, key uint64) int {
			return cmp.Compare(x.key, key)
		})
		l.events = slices.Insert(l.events, at, liveEvent{e, l.adding})
		return nil
	})
	return l
}

// Add adds an event as the store's Events or EventsFrom pass it: a line
// recorded in pieces is one row once its last piece is added.
func (l *Live) Add(e store.Event) {
	l.adding = e.Seq
	_ = l.join(e) // its callback returns no error
}

// Page builds the page of rec, the recording's metadata as it is now,
// with the events added so far.
func (l *Live) Page(rec store.Recording) *Page {
	b := newBuilder()
	b.servers = rec.MCPServers
	for _, e := range l.events {
		_ = b.add(e.Event) // add returns no error
	}
	return b.recording(rec)
}

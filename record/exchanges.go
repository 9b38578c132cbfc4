package record

import (
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/store"
)

// storeRecorder records the HTTP tap's exchanges into a recording: each
// is an event of kind KindExchange on LaneLLM holding the encoded
// exchange, written with FlagIncomplete when the tap has its request and
// again under the same Seq when it has ended. A recording that stops in
// between keeps the request, in flight; the store keeps one event where
// both writes land in one commit.
type storeRecorder struct {
	w *store.Writer
	// logf receives, without the program's name, why an exchange could
	// not be recorded.
	logf func(format string, args ...any)
}

// Begin reserves the exchange's Seq, among the stdio frames, as its
// request arrives.
func (r storeRecorder) Begin() uint64 { return r.w.Reserve() }

// Started records the exchange in flight.
func (r storeRecorder) Started(id uint64, at time.Duration, x *exchange.Exchange) {
	r.append(id, at, x, store.FlagIncomplete)
}

// Ended records the exchange as it ended, in place of what Started
// recorded.
func (r storeRecorder) Ended(id uint64, at time.Duration, x *exchange.Exchange) {
	r.append(id, at, x, 0)
}

func (r storeRecorder) append(seq uint64, at time.Duration, x *exchange.Exchange, flags store.Flag) {
	data, err := exchange.Marshal(x)
	if err != nil {
		r.logf("not recording an exchange: %v", err)
		return
	}
	r.w.Append(store.Event{
		Seq:    seq,
		Kind:   store.KindExchange,
		Lane:   store.LaneLLM,
		Offset: at,
		Flags:  flags,
		Data:   data,
	})
}

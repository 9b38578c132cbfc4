// Package stamp orders the events of one recording, across its lanes and the processes that see them, by one hybrid logical clock in memory they share.
//
// Every event takes a Stamp from the Clock the moment it is seen: a stdio
// chunk as its read returns, an LLM exchange as its request reaches the
// tap. A Stamp is one 64-bit word, changed by one compare-and-swap, that
// holds both the event's time (a reading of the system's monotonic clock,
// in microseconds, advanced past the last Stamp's if the clock has not
// moved) and how many exchanges had begun by then. Because the time and
// the count change together, Stamps are totally ordered, their order is
// the order in which the events were seen (happened-before), and their
// times never go back along that order: sorting by Stamp, and by time,
// are the same thing. The count lets whoever numbers the events tell,
// from a frame's Stamp alone, which exchanges came before it, without a
// word from the process that saw them.
//
// Both fields are kept modulo their width; a reader widens them again
// from a nearby value (Stamp.Nanos, Stamp.Exchanges), which holds while
// it reads a Stamp within 25 days of its taking and within two million
// exchanges of the count it knows.
package stamp

import (
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
)

// The layout of a Stamp: the time in microseconds above the exchange count.
const (
	countBits = 22
	timeBits  = 64 - countBits
	countMask = 1<<countBits - 1
	timeMask  = 1<<timeBits - 1
	countHalf = 1 << (countBits - 1)
	timeHalf  = 1 << (timeBits - 1)
)

// A Stamp is an event's place among a recording's events, and its time.
// The zero Stamp is taken by no event.
type Stamp uint64

// A Clock hands out Stamps. It is safe for concurrent use, also by
// several processes sharing its word.
type Clock struct {
	word *atomic.Uint64
}

// NewClock returns a Clock in this process's memory.
func NewClock() *Clock {
	return On(new(atomic.Uint64))
}

// On returns a Clock on word, which may be shared with other processes
// (mapped shared, 8-byte aligned). A zero word is started at the present
// time; one that holds a Stamp goes on from it.
func On(word *atomic.Uint64) *Clock {
	// The smallest time a word can hold stands for the present if the
	// clock reads exactly 0 modulo the field.
	word.CompareAndSwap(0, max(uint64(micros())&timeMask, 1)<<countBits)
	return &Clock{word: word}
}

// Frame returns the Stamp of an event that is not an exchange (a chunk of
// stdio, the end of a stream).
func (c *Clock) Frame() Stamp { return c.take(0) }

// Exchange returns the Stamp of an exchange whose request has just
// arrived, and counts it: the Stamps taken from now on say that one more
// exchange came before them.
func (c *Clock) Exchange() Stamp { return c.take(1) }

// take advances the word to now, or past its time by a microsecond if
// the clock has not moved since, and adds inc to its count.
func (c *Clock) take(inc uint64) Stamp {
	return c.takeAt(uint64(micros())&timeMask, inc)
}

// takeAt is take at a clock reading of now microseconds, within the time
// field.
func (c *Clock) takeAt(now, inc uint64) Stamp {
	for {
		old := c.word.Load()
		t := now
		// now is taken as later than the word's time when it is ahead of
		// it by less than half the time field's range: the field wraps.
		if d := (now - old>>countBits) & timeMask; d == 0 || d >= timeHalf {
			t = (old>>countBits + 1) & timeMask
		}
		w := t<<countBits | (old+inc)&countMask
		if c.word.CompareAndSwap(old, w) {
			return Stamp(w)
		}
	}
}

// Nanos returns the Stamp's time as a reading of the system's monotonic
// clock (CLOCK_MONOTONIC on Linux, which every process shares), in
// nanoseconds, at the Stamp's resolution of a microsecond. It widens the
// Stamp's time from the present, so it holds for a Stamp up to 25 days
// old.
func (s Stamp) Nanos() int64 { return s.nanosAt(micros()) }

// nanosAt is Nanos at a clock reading of now microseconds.
func (s Stamp) nanosAt(now int64) int64 {
	d := (uint64(now) - uint64(s)>>countBits) & timeMask
	if d >= timeHalf { // a Stamp ahead of the clock, by the microseconds the clock did not move
		return (now + int64(timeMask+1-d)) * 1000
	}
	return (now - int64(d)) * 1000
}

// Exchanges returns how many exchanges had begun when s was taken,
// counting the one s is the Stamp of, if it is one: the count nearest to
// near of those the Stamp's field could hold.
func (s Stamp) Exchanges(near uint64) uint64 {
	d := (uint64(s) - near) & countMask
	if d >= countHalf {
		return near - (countMask + 1 - d)
	}
	return near + d
}

// Time returns the Stamp's time as a time.Time with a reading of this
// process's monotonic clock, so that Sub between it and other times of
// this process is exact (to the Stamp's microsecond).
func (s Stamp) Time() time.Time {
	return FromNanos(s.Nanos())
}

// Now returns the system's monotonic clock in nanoseconds, the clock
// Stamps are read from, as Nanos gives it.
func Now() int64 { return nanotime() }

// FromNanos converts a reading of the system's monotonic clock (Now,
// Nanos) to a time.Time of this process.
func FromNanos(n int64) time.Time {
	return anchor.at.Add(time.Duration(n - anchor.mono))
}

// NanosOf converts a time.Time of this process, which must carry a
// monotonic reading (time.Now's do), to a reading of the system's
// monotonic clock: the inverse of FromNanos.
func NanosOf(t time.Time) int64 {
	return anchor.mono + int64(t.Sub(anchor.at))
}

// anchor pairs a time.Time with the system clock's reading at the same
// instant: Go's monotonic clock is the system's (runtime.nanotime), read
// at an offset that time.Time does not expose.
var anchor = newAnchor()

type anchorPair struct {
	at   time.Time
	mono int64
}

// newAnchor reads both clocks back to back, keeping the pair read with
// the least time between the reads, so that a pause between them (a
// preemption) does not skew every conversion.
func newAnchor() anchorPair {
	best, gap := anchorPair{}, int64(-1)
	for range 8 {
		before := nanotime()
		at := time.Now()
		after := nanotime()
		if gap < 0 || after-before < gap {
			best, gap = anchorPair{at: at, mono: before + (after-before)/2}, after-before
		}
	}
	return best
}

// micros reads the system's monotonic clock in microseconds.
func micros() int64 { return nanotime() / 1000 }

// nanotime is the runtime's reading of the system's monotonic clock
// (CLOCK_MONOTONIC on Linux, through the vDSO): what time.Now's monotonic
// reading counts from, without the wall clock's read beside it, and
// cheaper than a clock_gettime system call.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

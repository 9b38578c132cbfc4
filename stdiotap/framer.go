package stdiotap

import (
	"bytes"
	"time"

	"github.com/acptap/acptap/internal/stamp"
)

// handoff is the line length from which a finished line's pending buffer
// is handed to the receiver instead of being copied out. Copying a line
// of tens of MiB once more would double the cost of framing it, while for
// short lines one exact-size allocation per line beats allocating a fresh
// pending buffer for every line that straddles two reads.
const handoff = 64 << 10

// minPending is the smallest capacity the pending buffer grows to.
const minPending = 512

// A framer cuts the bytes of one stream into Lines. It is not safe for
// concurrent use.
type framer struct {
	stream Stream
	max    int // longest Data before a line is split with Continued; > 0
	emit   func(Line)

	// pending holds the bytes of the current line not yet emitted.
	// Invariant between calls: len(pending) <= max.
	pending []byte
}

// write frames p, whose read took Stamp st. p is not retained.
//
// Lines that lie wholly inside p are handed out as pieces of one copy of
// p, so framing costs one allocation per read rather than one per line;
// each piece has its capacity clipped so that a receiver appending to it
// cannot write into its neighbour.
func (f *framer) write(p []byte, st stamp.Stamp) {
	at := st.Time()
	var copied []byte // p copied, made on the first whole line in p
	off := 0          // offset of p[0] in the original chunk
	for len(p) > 0 {
		if len(f.pending) == 0 {
			if i := bytes.IndexByte(p, '\n'); i >= 0 && i <= f.max {
				if copied == nil {
					copied = make([]byte, len(p))
					copy(copied, p)
					off = 0
				}
				f.emit(Line{Stream: f.stream, Stamp: st, At: at, Data: copied[off : off+i : off+i]})
				p = p[i+1:]
				off += i + 1
				continue
			}
		}
		n := f.writeSlow(p, st, at)
		p = p[n:]
		off += n
	}
}

// writeSlow frames the start of p when the current line began in an
// earlier read or is longer than max, and returns how many bytes of p it
// consumed: through the end of the line, or all of p.
func (f *framer) writeSlow(p []byte, st stamp.Stamp, at time.Time) int {
	if len(p) == 0 {
		return 0
	}
	i := bytes.IndexByte(p, '\n')
	seg := p // this line's bytes within p
	if i >= 0 {
		seg = p[:i]
	}
	// Split only once a line is known to be longer than max, so a
	// line of exactly max bytes stays one frame whatever the chunking.
	for len(f.pending)+len(seg) > f.max {
		n := f.max - len(f.pending)
		f.emit(Line{Stream: f.stream, Stamp: st, At: at, Data: f.take(seg[:n]), Continued: true})
		seg = seg[n:]
	}
	if i < 0 {
		f.pending = grow(f.pending, len(seg), f.max)
		f.pending = append(f.pending, seg...)
		return len(p)
	}
	f.emit(Line{Stream: f.stream, Stamp: st, At: at, Data: f.take(seg)})
	return i + 1
}

// flush emits the pending bytes, if any, as a line the stream ended
// without terminating.
func (f *framer) flush(st stamp.Stamp) {
	if len(f.pending) == 0 {
		return
	}
	f.emit(Line{Stream: f.stream, Stamp: st, At: st.Time(), Data: f.take(nil), NoNewline: true})
}

// take returns pending followed by seg in a slice of its own and empties
// pending. len(pending)+len(seg) must not exceed max.
func (f *framer) take(seg []byte) []byte {
	n := len(f.pending) + len(seg)
	if len(f.pending) >= handoff {
		d := append(grow(f.pending, len(seg), f.max), seg...)
		f.pending = nil
		return d[:n:n]
	}
	d := make([]byte, n)
	copy(d[copy(d, f.pending):], seg)
	f.pending = f.pending[:0]
	return d
}

// grow returns b with room for n more bytes. It doubles the capacity, so
// a huge line costs amortized O(1) copying per byte, but never beyond
// limit, which len(b)+n must not exceed.
func grow(b []byte, n, limit int) []byte {
	need := len(b) + n
	if need <= cap(b) {
		return b
	}
	c := max(min(max(2*cap(b), minPending), limit), need)
	nb := make([]byte, len(b), c)
	copy(nb, b)
	return nb
}

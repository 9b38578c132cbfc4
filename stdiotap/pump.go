package stdiotap

import (
	"io"
	"sync"
)

// bufSize is each pump's read size: a default Linux pipe buffer, so one
// read usually empties the pipe.
const bufSize = 64 << 10

// A flow is one stream's state, shared by its pump and by Wait, which
// ends it once the session is over.
type flow struct {
	stream Stream
	tape   *tape // where its chunks are sequenced; nil if nothing is framed

	mu     sync.Mutex // guards closed
	closed bool       // the stream ended or Wait closed it: no more framing
}

// close ends the flow: its pending bytes are framed, after everything put
// on the tape before.
func (l *flow) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.tape != nil {
		l.tape.end(l.stream)
	}
	l.closed = true
}

// pump copies src to dst. Each chunk it reads is sequenced on l's tape as
// soon as its read returns, before it is written to dst, so that a line
// is sequenced before the other side can see it: the recorder's order then
// respects causality (a response is never sequenced before the request
// that caused it). Sequencing is an append to a queue, without a copy:
// framing happens on the tape's goroutine. A failed write stops forwarding
// but not reading or framing, so whoever writes into src is never left
// blocked. pump returns at the first read error, io.EOF included, after
// closing l, or once a read returns after l was closed by someone else.
//
// Reading waits only when the tape's bound is full (Config.MaxBacklog):
// the recorder has fallen that far behind.
//
// With atomic set, each chunk is sequenced and written under l.mu, so once
// l.close has returned every chunk that reached dst has been sequenced;
// the caller must be able to unblock a write to dst before closing l (Wait
// closes the agent's stdin first). Otherwise only sequencing holds l.mu,
// since a write to the editor may block for as long as the editor likes.
func pump(src io.Reader, dst io.Writer, l *flow, atomic bool) {
	var own []byte  // the read buffer when there is no tape, or it closed
	var blk *block  // the read buffer on the tape
	broken := false // a write to dst failed
	forward := func(p []byte) {
		if !broken {
			if _, err := dst.Write(p); err != nil {
				broken = true
			}
		}
	}
	t := l.tape
	defer func() {
		if blk != nil {
			t.disown(blk)
		}
	}()
	for {
		var buf []byte
		if t != nil {
			blk = t.room(blk)
		}
		if blk != nil {
			buf = blk.buf[blk.tail : blk.tail+bufSize]
		} else {
			if own == nil {
				own = make([]byte, bufSize)
			}
			buf = own
		}
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			l.mu.Lock()
			closed := l.closed
			put, w := !closed && blk != nil, wakeNone
			if put {
				chunk, w = t.put(l.stream, blk, n)
			}
			if atomic && !closed {
				forward(chunk)
			}
			l.mu.Unlock()
			if !atomic {
				forward(chunk)
			}
			// After forwarding: waking the recorder, or arming its
			// timer, may cost the forwarding thread a wake-up of another.
			switch w {
			case wakeNow:
				t.wake()
			case wakeLater:
				t.arm()
			}
			if closed {
				return
			}
		}
		if err != nil {
			l.close()
			return
		}
	}
}

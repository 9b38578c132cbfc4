package stdiotap

import (
	"io"
	"sync"
	"time"
)

// bufSize is each pump's read size: a default Linux pipe buffer, so one
// read usually empties the pipe.
const bufSize = 64 << 10

// A lane is the framing state of one stream, shared by its pump and by
// Wait, which flushes and closes it once the session is over.
type lane struct {
	framing bool // OnLine is set; if false, nothing is framed

	mu     sync.Mutex // guards closed and fr
	closed bool       // the stream ended or Wait closed it: no more framing
	fr     framer
}

// close flushes the lane's pending bytes and closes it.
func (l *lane) close(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.framing {
		l.fr.flush(at)
	}
	l.closed = true
}

// pump copies src to dst, framing each chunk into l as soon as its read
// returns and writing it to dst right after. Framing comes first so that
// a line is handed to OnLine before the other side can see it: the
// recorder's sequence then respects causality (a response is never
// sequenced before the request that caused it). Framing a chunk is a scan
// for '\n' and a copy, microseconds, never I/O. A failed write stops
// forwarding but not reading or framing, so whoever writes into src is
// never left blocked. pump returns at the first read error, io.EOF
// included, after flushing and closing l, or once a read returns after l
// was closed by someone else.
//
// With atomic set, each chunk is framed and written under l.mu, so once
// l.close has returned every chunk that reached dst has been framed; the
// caller must be able to unblock a write to dst before closing l (Wait
// closes the agent's stdin first). Otherwise only framing holds l.mu,
// since a write to the editor may block for as long as the editor likes.
func pump(src io.Reader, dst io.Writer, l *lane, atomic bool) {
	buf := make([]byte, bufSize)
	broken := false // a write to dst failed
	forward := func(p []byte) {
		if !broken {
			if _, err := dst.Write(p); err != nil {
				broken = true
			}
		}
	}
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			var at time.Time
			if l.framing {
				at = time.Now()
			}
			l.mu.Lock()
			closed := l.closed
			if !closed && l.framing {
				l.fr.write(chunk, at)
			}
			if atomic && !closed {
				forward(chunk)
			}
			l.mu.Unlock()
			if !atomic {
				forward(chunk)
			}
			if closed {
				return
			}
		}
		if err != nil {
			l.close(time.Now())
			return
		}
	}
}

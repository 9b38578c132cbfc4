// Package readbuf keeps the bytes a stream reader has read but not yet
// consumed, refilled one read at a time, for the NDJSON and SSE readers.
package readbuf

import "io"

// MinRead is the least buffer space Fill offers to a Read call.
const MinRead = 4096

// maxEmptyReads is how many successive empty reads Fill tolerates before it
// reports io.ErrNoProgress, as bufio does.
const maxEmptyReads = 100

// A Buffer holds Bytes[Start:End], the bytes read but not yet consumed.
// Its zero value is an empty buffer ready to fill.
type Buffer struct {
	Bytes []byte
	Start int
	End   int
}

// Unread returns the bytes read but not yet consumed. The slice is valid
// until the next call to Fill.
func (b *Buffer) Unread() []byte { return b.Bytes[b.Start:b.End] }

// Fill makes room for at least MinRead bytes after End, moving the unread
// bytes to the front of Bytes or into a slice twice as large, then reads from
// r until it gets a byte or an error. It returns how far the unread bytes
// moved toward the front, for a caller that keeps positions in Bytes, and how
// many bytes it read (they are Bytes[End-n:End]) with the read's error. After
// 100 empty reads without an error it returns io.ErrNoProgress.
func (b *Buffer) Fill(r io.Reader) (moved, n int, err error) {
	if len(b.Bytes)-b.End < MinRead {
		if b.Start > 0 {
			moved = b.Start
			b.End = copy(b.Bytes, b.Bytes[b.Start:b.End])
			b.Start = 0
		}
		if len(b.Bytes)-b.End < MinRead {
			grown := make([]byte, max(2*len(b.Bytes), b.End+MinRead))
			copy(grown, b.Bytes[:b.End])
			b.Bytes = grown
		}
	}
	for range maxEmptyReads {
		n, err = r.Read(b.Bytes[b.End:])
		if n < 0 || n > len(b.Bytes)-b.End {
			// A broken io.Reader; bufio panics in this case too.
			panic("readbuf: reader returned an invalid count")
		}
		b.End += n
		if n > 0 || err != nil {
			return moved, n, err
		}
	}
	return moved, 0, io.ErrNoProgress
}

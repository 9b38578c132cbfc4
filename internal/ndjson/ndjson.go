// Package ndjson reads newline-delimited JSON streams line by line, keeping
// each line's raw bytes.
package ndjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// A Line is one line of a stream.
type Line struct {
	// Raw is the line as read, with its line break if it had one.
	Raw []byte
	// Value is the JSON value on the line, without surrounding
	// whitespace. It shares Raw's memory. It is nil for a blank line and
	// for a line that is not a single JSON value.
	Value json.RawMessage
	// Err, if not nil, says why the line is not a single JSON value. It
	// wraps ErrNotJSON.
	Err error
}

// minRead is the least buffer space a Reader offers to a Read call.
const minRead = 4096

// maxEmptyReads is how many successive empty reads Reader tolerates before
// failing with io.ErrNoProgress, as bufio does.
const maxEmptyReads = 100

// A Reader reads the lines of an NDJSON stream. A line ends with "\n"; a
// "\r" before it is JSON whitespace and so tolerated, and a last line
// without "\n" is still a line. Lines that are not JSON are reported in
// Line.Err rather than ending the stream, since streams in the wild carry
// such junk.
type Reader struct {
	rd    io.Reader
	buf   []byte
	start int // buf[start:w] is read but not yet returned
	w     int
	scan  int // buf[start:scan] is known to hold no '\n'
	err   error
	n     int // lines returned so far
}

// NewReader returns a Reader reading from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{rd: r}
}

// Next returns the next line. At the end of the stream it returns io.EOF,
// and any other error from the underlying reader once the lines before it
// are returned.
func (r *Reader) Next() (Line, error) {
	for {
		if i := bytes.IndexByte(r.buf[r.scan:r.w], '\n'); i >= 0 {
			return r.line(r.scan + i + 1), nil
		}
		r.scan = r.w
		if r.err != nil {
			if r.start < r.w {
				return r.line(r.w), nil
			}
			return Line{}, r.err
		}
		r.fill()
	}
}

// line returns buf[start:end] as the next line.
func (r *Reader) line(end int) Line {
	raw := bytes.Clone(r.buf[r.start:end])
	r.start, r.scan = end, end
	r.n++
	l := Line{Raw: raw}
	v := trimSpace(raw)
	if len(v) == 0 {
		return l
	}
	if !json.Valid(v) {
		// Valid says only yes or no; Unmarshal says where and why.
		var m json.RawMessage
		err := json.Unmarshal(v, &m)
		l.Err = fmt.Errorf("%w: line %d: %w", ErrNotJSON, r.n, err)
		return l
	}
	l.Value = v
	return l
}

// fill reads once more from the underlying reader.
func (r *Reader) fill() {
	if len(r.buf)-r.w < minRead {
		if r.start > 0 {
			n := copy(r.buf, r.buf[r.start:r.w])
			r.scan -= r.start
			r.w, r.start = n, 0
		}
		if len(r.buf)-r.w < minRead {
			buf := make([]byte, max(2*len(r.buf), r.w+minRead))
			copy(buf, r.buf[:r.w])
			r.buf = buf
		}
	}
	for range maxEmptyReads {
		n, err := r.rd.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			// A broken io.Reader; bufio panics in this case too.
			panic("ndjson: reader returned an invalid count")
		}
		r.w += n
		if err != nil {
			r.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
}

// trimSpace trims JSON whitespace, which is narrower than Unicode's.
func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

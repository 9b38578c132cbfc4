// Package ndjson reads newline-delimited JSON streams line by line, keeping
// each line's raw bytes.
package ndjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/acptap/acptap/internal/readbuf"
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

// A Reader reads the lines of an NDJSON stream. A line ends with "\n"; a
// "\r" before it is JSON whitespace and so tolerated, and a last line
// without "\n" is still a line. Lines that are not JSON are reported in
// Line.Err rather than ending the stream, since streams in the wild carry
// such junk.
type Reader struct {
	rd   io.Reader
	b    readbuf.Buffer // b.Unread() is read but not yet returned
	scan int            // b.Bytes[b.Start:scan] is known to hold no '\n'
	err  error
	n    int // lines returned so far
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
		if i := bytes.IndexByte(r.b.Bytes[r.scan:r.b.End], '\n'); i >= 0 {
			return r.line(r.scan + i + 1), nil
		}
		r.scan = r.b.End
		if r.err != nil {
			if r.b.Start < r.b.End {
				return r.line(r.b.End), nil
			}
			return Line{}, r.err
		}
		r.fill()
	}
}

// line returns b.Bytes[b.Start:end] as the next line.
func (r *Reader) line(end int) Line {
	raw := bytes.Clone(r.b.Bytes[r.b.Start:end])
	r.b.Start, r.scan = end, end
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
	moved, _, err := r.b.Fill(r.rd)
	r.scan -= moved
	r.err = err
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

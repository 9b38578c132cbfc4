// Package sse reads Server-Sent Events streams as the HTML standard
// interprets them, keeping the raw bytes of every event.
package sse

import (
	"bytes"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/acptap/acptap/internal/readbuf"
)

// An Event is one event dispatched from an event stream.
type Event struct {
	// Type is the value of the event field, or "message" if there was none.
	Type string
	// Data is the values of the event's data fields joined with "\n".
	Data string
	// ID is the stream's last event ID as of this event. As the standard
	// says, it persists from earlier events until an id field changes it.
	ID string
	// HasID reports whether this event's own bytes set the last event ID.
	HasID bool
	// Retry is the reconnection time in milliseconds that a retry field in
	// this event's bytes set, or -1 if none did.
	Retry int
	// Raw is the bytes of the stream from the end of the previous event
	// through the line break of the blank line that dispatched this one,
	// including any blocks without data in between, which the standard
	// does not dispatch. The events' Raw bytes followed by Reader.Rest
	// are the whole stream.
	Raw []byte
}

// A Reader reads events from an event stream.
type Reader struct {
	rd      io.Reader
	sc      Scanner
	b       readbuf.Buffer // b.Unread() has been read but returned in no event
	ends    []int          // ends in b.Bytes of events found but not yet returned
	next    int            // ends[next] is the next event to return
	err     error          // the error that ended reading, returned after all events
	started bool           // an event has been returned, so a BOM is behind us
	lastID  string
	data    []byte // scratch for joining data fields
}

// NewReader returns a Reader reading the event stream from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{rd: r}
}

// Next returns the next event. At the end of the stream it returns io.EOF,
// and any other error from the underlying reader once the events before it
// are returned. As the standard says, an incomplete block at the end of the
// stream is not an event; its bytes are in Rest.
//
// Next returns an event dispatched by a blank line that ends in CR only once
// it has read one more byte or reached the end, to know whether an LF that
// belongs to the event follows.
func (r *Reader) Next() (Event, error) {
	for r.next == len(r.ends) {
		if r.err != nil {
			if !r.sc.Flush() {
				return Event{}, r.err
			}
			r.ends = append(r.ends[:0], r.b.End)
			r.next = 0
			break
		}
		r.fill()
	}
	end := r.ends[r.next]
	r.next++
	ev := r.parse(r.b.Bytes[r.b.Start:end])
	r.b.Start = end
	return ev, nil
}

// Rest returns the bytes read from the stream that belong to no event Next
// has returned. Once Next has returned io.EOF, these are the stream's
// trailing blocks without data and its incomplete last block. The slice is
// valid until the next call to Next.
func (r *Reader) Rest() []byte {
	return r.b.Unread()
}

// fill reads once from the underlying reader and scans what it got. It is
// called only when every event found has been returned.
func (r *Reader) fill() {
	_, n, err := r.b.Fill(r.rd)
	from := r.b.End - n
	r.ends = r.sc.appendEnds(r.ends[:0], r.b.Bytes[from:r.b.End])
	r.next = 0
	for i := range r.ends {
		r.ends[i] += from
	}
	r.err = err
}

// parse interprets the lines of raw, the bytes of one event as the Scanner
// delimited them, following the standard's field processing and dispatch
// steps.
func (r *Reader) parse(raw []byte) Event {
	ev := Event{Retry: -1, Raw: bytes.Clone(raw)}
	p := raw
	if !r.started {
		r.started = true
		p = bytes.TrimPrefix(p, bom[:])
	}
	var typ []byte
	data := r.data[:0]
	eol := newEOLFinder(p)
	for i := 0; i < len(p); {
		j := eol.next(i)
		line := p[i:j]
		i = j + 1
		if j+1 < len(p) && p[j] == '\r' && p[j+1] == '\n' {
			i++
		}
		if len(line) == 0 {
			if len(data) > 0 {
				break
			}
			// A block without data dispatches nothing and starts afresh.
			typ = nil
			continue
		}
		name, value := line, []byte(nil)
		if c := bytes.IndexByte(line, ':'); c >= 0 {
			name, value = line[:c], line[c+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "event":
			typ = value
		case "data":
			data = append(data, value...)
			data = append(data, '\n')
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.lastID = decode(value)
				ev.HasID = true
			}
		case "retry":
			if n, ok := parseRetry(value); ok {
				ev.Retry = n
			}
		}
	}
	r.data = data
	ev.ID = r.lastID
	ev.Type = "message"
	if len(typ) > 0 {
		ev.Type = decode(typ)
	}
	if len(data) > 0 {
		ev.Data = decode(data[:len(data)-1])
	}
	return ev
}

// parseRetry interprets the value of a retry field, which counts only if it
// is all ASCII digits. An empty value or one too large for an int is
// ignored, as browsers do.
func parseRetry(v []byte) (int, bool) {
	if len(v) == 0 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(v))
	return n, err == nil
}

// decode converts b to a string as the standard's UTF-8 decode does:
// each maximal ill-formed subsequence becomes one U+FFFD.
func decode(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r != utf8.RuneError || size > 1 {
			out = append(out, b[:size]...)
			b = b[size:]
			continue
		}
		out = utf8.AppendRune(out, utf8.RuneError)
		b = b[maximalSubpart(b):]
	}
	return string(out)
}

// maximalSubpart returns the length of the longest prefix of b, which does
// not start with a well-formed UTF-8 sequence, that is a prefix of one.
func maximalSubpart(b []byte) int {
	lo, hi := byte(0x80), byte(0xBF) // range of the byte after the lead
	var need int
	switch c := b[0]; {
	case 0xC2 <= c && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case 0xE1 <= c && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case 0xF1 <= c && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for n <= need && n < len(b) && lo <= b[n] && b[n] <= hi {
		n++
		lo, hi = 0x80, 0xBF
	}
	return n
}

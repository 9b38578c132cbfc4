package sse

import "bytes"

// bom is the UTF-8 byte order mark, which the stream decoder skips once at
// the start of a stream.
var bom = [3]byte{0xEF, 0xBB, 0xBF}

// lineState says what the Scanner knows about the line it is in.
type lineState uint8

const (
	lineStart lineState = iota // nothing of the line seen yet
	// lineName1 to lineName4 mean the line so far is a prefix of "data"
	// of that length.
	lineName1
	lineName2
	lineName3
	lineName4
	lineData  // a data field: "data:" seen
	lineOther // any other line: a comment or another field
)

// A Scanner finds the ends of events in an event stream fed to it in chunks.
// It keeps a few bytes of state and never copies or retains the stream, so it
// can count or cut events in a stream that is being forwarded. It finds the
// same events as a Reader, however the stream is split. The zero value is
// ready to use.
type Scanner struct {
	bomSeen int8 // bytes of a leading BOM matched so far; len(bom) once settled
	line    lineState
	hasData bool // a data field was seen since the last blank line
	cr      bool // the input so far ends with a CR that ended a line
	pending bool // that line was blank and dispatched an event
}

// Feed scans the next chunk p of the stream and returns the offsets in p just
// past the end of each event that the chunk completes, in increasing order.
//
// An event ends after the line break of the blank line that dispatches it.
// When that line break is a CR at the very end of a chunk, Feed cannot yet
// tell whether an LF follows as part of the same line break, so it reports
// the event with the next chunk: at offset 1 if that chunk starts with the
// LF, otherwise at offset 0, which is the end of the previous chunk. At the
// end of the stream, Flush reports such an event.
func (s *Scanner) Feed(p []byte) []int {
	return s.appendEnds(nil, p)
}

// Flush reports whether an event ends at the end of the input fed so far that
// Feed has held back, waiting to see whether an LF follows its final CR.
// Call it once the stream has ended.
func (s *Scanner) Flush() bool {
	ok := s.pending
	s.pending = false
	return ok
}

// appendEnds is Feed appending to ends, which lets Reader reuse a slice.
func (s *Scanner) appendEnds(ends []int, p []byte) []int {
	if len(p) == 0 {
		return ends
	}
	i := 0
	if s.cr {
		s.cr = false
		if p[0] == '\n' {
			i = 1
		}
		if s.pending {
			s.pending = false
			ends = append(ends, i)
		}
	}
	for int(s.bomSeen) < len(bom) && i < len(p) {
		if p[i] == bom[s.bomSeen] {
			s.bomSeen++
			i++
			continue
		}
		if s.bomSeen > 0 {
			// The bytes of a partial BOM are line content that cannot
			// start a field named "data".
			s.line = lineOther
		}
		s.bomSeen = int8(len(bom))
	}
	eol := newEOLFinder(p)
	for i < len(p) {
		c := p[i]
		switch s.line {
		case lineData, lineOther:
			// The rest of the line does not matter: jump to its end.
			i = eol.next(i)
			if i == len(p) {
				return ends
			}
			c = p[i]
		default:
			if c != '\r' && c != '\n' {
				s.line = nextName(s.line, c)
				i++
				continue
			}
		}
		// p[i] ends a line.
		dispatch := false
		switch s.line {
		case lineStart:
			dispatch = s.hasData
			s.hasData = false
		case lineName4, lineData:
			s.hasData = true
		}
		s.line = lineStart
		i++
		if c == '\r' {
			if i == len(p) {
				s.cr = true
				s.pending = dispatch
				return ends
			}
			if p[i] == '\n' {
				i++
			}
		}
		if dispatch {
			ends = append(ends, i)
		}
	}
	return ends
}

// nextName advances the match of a line's field name against "data" by
// byte c, which is not a line break.
func nextName(st lineState, c byte) lineState {
	const name = "data"
	switch {
	case st < lineName4 && c == name[st-lineStart]:
		return st + 1
	case st == lineName4 && c == ':':
		return lineData
	}
	return lineOther
}

// eolFinder finds line breaks in p. It remembers the next CR and LF it has
// found so that a stream of CR-only lines is not rescanned for an LF at
// every line, which would be quadratic.
type eolFinder struct {
	p      []byte
	cr, lf int // index of the next CR or LF, len(p) if none, -1 if unknown
}

func newEOLFinder(p []byte) eolFinder {
	return eolFinder{p: p, cr: -1, lf: -1}
}

// next returns the index of the first CR or LF in p at or after i, or len(p)
// if there is none. Successive calls must not decrease i.
func (f *eolFinder) next(i int) int {
	if f.cr < i {
		f.cr = indexFrom(f.p, i, '\r')
	}
	if f.lf < i {
		f.lf = indexFrom(f.p, i, '\n')
	}
	return min(f.cr, f.lf)
}

func indexFrom(p []byte, i int, c byte) int {
	if j := bytes.IndexByte(p[i:], c); j >= 0 {
		return i + j
	}
	return len(p)
}

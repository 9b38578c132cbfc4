// Package jsonscan checks and splits JSON text without decoding it, so that the parts of a large request can be looked at one by one.
//
// Valid accepts exactly what encoding/json's Valid accepts, nesting depth
// included, but skips the text of strings a run at a time rather than a
// byte at a time. Members and Elements walk the top level of an object or
// an array of text already known to be valid; ValidMembers checks text
// and walks its top-level object in one pass.
package jsonscan

import (
	"bytes"
	"encoding/binary"
)

// maxDepth is encoding/json's limit on nested arrays and objects.
const maxDepth = 10000

// Valid reports whether b is one JSON value, white space around it
// allowed, as encoding/json.Valid does.
func Valid(b []byte) bool {
	s := scanner{b: b}
	s.space()
	if !s.value(0) {
		return false
	}
	s.space()
	return s.i == len(b)
}

// ValidMembers reports whether b is one JSON value, as Valid does, and
// when that value is an object, calls fn with the raw key (quotes
// included) and the raw value of each of its members, in order, as the
// check reaches them: one pass over b where Valid and then Members make
// two. fn may have been called by the time an error later in b is found,
// so a caller keeps what fn saw only when ValidMembers returns true. fn
// returning false ends the calls, not the check.
func ValidMembers(b []byte, fn func(key, value []byte) bool) bool {
	s := scanner{b: b}
	s.space()
	if s.i >= len(b) || b[s.i] != '{' {
		if !s.value(0) {
			return false
		}
	} else {
		calling := true
		ok := s.container(1, '}', func() bool {
			from := s.i
			if s.i >= len(b) || b[s.i] != '"' || !s.str() {
				return false
			}
			key := b[from:s.i]
			s.space()
			if s.i >= len(b) || b[s.i] != ':' {
				return false
			}
			s.i++
			s.space()
			from = s.i
			if !s.value(1) {
				return false
			}
			if calling {
				calling = fn(key, b[from:s.i])
			}
			return true
		})
		if !ok {
			return false
		}
	}
	s.space()
	return s.i == len(b)
}

// scanner is a position in JSON text.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one value at depth containers deep.
func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		return s.str()
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *scanner) literal(word string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

func (s *scanner) object(depth int) bool {
	return s.container(depth, '}', func() bool {
		if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() {
			return false
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		return s.value(depth)
	})
}

func (s *scanner) array(depth int) bool {
	return s.container(depth, ']', func() bool { return s.value(depth) })
}

// container scans an object or an array, depth containers deep, whose
// items item scans, up to its last byte.
func (s *scanner) container(depth int, last byte, item func() bool) bool {
	if depth > maxDepth {
		return false
	}
	s.i++ // '{' or '['
	s.space()
	if s.i < len(s.b) && s.b[s.i] == last {
		s.i++
		return true
	}
	for {
		if !item() {
			return false
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.space()
		case last:
			s.i++
			return true
		default:
			return false
		}
	}
}

// str scans a string: no control characters, valid escapes. Bytes that
// are not UTF-8 are allowed, as encoding/json allows them (it replaces
// them when decoding).
func (s *scanner) str() bool {
	b := s.b
	s.i++ // '"'
	for {
		// The string's text runs to the next quote unless a backslash
		// comes first; both are found with IndexByte, which looks at
		// many bytes at a time, and the run is then checked for control
		// characters eight bytes at a time.
		q := bytes.IndexByte(b[s.i:], '"')
		if q < 0 {
			return false
		}
		run := b[s.i : s.i+q]
		if e := bytes.IndexByte(run, '\\'); e >= 0 {
			run = run[:e]
		}
		if !noControl(run) {
			return false
		}
		s.i += len(run)
		if b[s.i] == '"' {
			s.i++
			return true
		}
		// A backslash.
		if s.i+1 >= len(b) {
			return false
		}
		switch b[s.i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			s.i += 2
		case 'u':
			if s.i+6 > len(b) {
				return false
			}
			for _, h := range b[s.i+2 : s.i+6] {
				if !isHex(h) {
					return false
				}
			}
			s.i += 6
		default:
			return false
		}
	}
}

// noControl reports whether no byte of b is below 0x20.
func noControl(b []byte) bool {
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		// A byte below 0x20 sets its high bit (Bit Twiddling Hacks:
		// "determine if a word has a byte less than n").
		if (w-ones*0x20) & ^w & highs != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return false
		}
	}
	return true
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	b := s.b
	if b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(b) && b[s.i] == '0':
		s.i++
	case s.i < len(b) && '1' <= b[s.i] && b[s.i] <= '9':
		for s.i < len(b) && isDigit(b[s.i]) {
			s.i++
		}
	default:
		return false
	}
	if s.i < len(b) && b[s.i] == '.' {
		s.i++
		if s.i >= len(b) || !isDigit(b[s.i]) {
			return false
		}
		for s.i < len(b) && isDigit(b[s.i]) {
			s.i++
		}
	}
	if s.i < len(b) && (b[s.i] == 'e' || b[s.i] == 'E') {
		s.i++
		if s.i < len(b) && (b[s.i] == '+' || b[s.i] == '-') {
			s.i++
		}
		if s.i >= len(b) || !isDigit(b[s.i]) {
			return false
		}
		for s.i < len(b) && isDigit(b[s.i]) {
			s.i++
		}
	}
	return true
}

// skip moves past the value at the position of valid JSON text.
func (s *scanner) skip() {
	switch s.b[s.i] {
	case '{', '[':
		// Strings are skipped whole, so brackets inside them do not
		// count.
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '{', '[':
				depth++
				s.i++
			case '}', ']':
				depth--
				s.i++
				if depth == 0 {
					return
				}
			case '"':
				s.skipString()
			default:
				s.i++
			}
		}
	case '"':
		s.skipString()
	default:
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			s.i++
		}
	}
}

// skipString moves past the string at the position of valid JSON text.
func (s *scanner) skipString() {
	start := s.i + 1
	s.i = start
	for {
		j := bytes.IndexByte(s.b[s.i:], '"')
		if j < 0 {
			s.i = len(s.b)
			return
		}
		end := s.i + j
		// The quote ends the string unless an odd number of
		// backslashes escapes it.
		bs := 0
		for end-1-bs >= start && s.b[end-1-bs] == '\\' {
			bs++
		}
		s.i = end + 1
		if bs%2 == 0 {
			return
		}
	}
}

// Members calls fn with the raw key (quotes and escapes as written) and
// the raw value of each member of the object b, in order, until fn
// returns false. b must be valid JSON (see Valid); ok is false if it is
// not an object.
func Members(b []byte, fn func(key, value []byte) bool) (ok bool) {
	return each(b, '{', '}', func(s *scanner) bool {
		from := s.i
		s.skipString()
		key := b[from:s.i]
		s.space()
		s.i++ // ':'
		s.space()
		from = s.i
		s.skip()
		return fn(key, b[from:s.i])
	})
}

// Elements calls fn with each element of the array b, raw, in order,
// until fn returns false. b must be valid JSON (see Valid); ok is false
// if it is not an array.
func Elements(b []byte, fn func(elem []byte) bool) (ok bool) {
	return each(b, '[', ']', func(s *scanner) bool {
		from := s.i
		s.skip()
		return fn(b[from:s.i])
	})
}

// each calls item at the start of each item of the container b, opened
// and closed by open and last, until item returns false; ok is false if
// b is not such a container. item moves s past the item.
func each(b []byte, open, last byte, item func(s *scanner) bool) (ok bool) {
	s := &scanner{b: b}
	s.space()
	if s.i >= len(b) || b[s.i] != open {
		return false
	}
	s.i++
	for {
		s.space()
		if s.i >= len(b) || b[s.i] == last {
			return true
		}
		if b[s.i] == ',' {
			s.i++
			s.space()
		}
		if !item(s) {
			return true
		}
	}
}

package driver

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// envelopeMembers are the top-level members of a JSON-RPC message whose
// string values are never rewritten: substitutions apply to payloads.
var envelopeMembers = map[string]bool{"jsonrpc": true, "id": true, "method": true}

// rewriteMessage returns the JSON text line with fn applied to every string
// value (object keys stay as they are) except those of the top-level
// envelope members, and with the top-level "id" member's value replaced
// by id when id is not nil. Everything else is kept byte for byte; a
// string fn leaves unchanged keeps its original spelling. When nothing
// changes, or line is not valid JSON, line itself is returned.
func rewriteMessage(line []byte, fn func(string) string, id json.RawMessage) []byte {
	rw := rewriter{in: line, fn: fn, id: id}
	if !rw.value(0, true) || rw.skipSpace() != len(line) {
		return line
	}
	if rw.out == nil {
		return line
	}
	return append(rw.out, line[rw.copied:]...)
}

// rewriter walks one JSON text. It assumes nothing about its input:
// malformed text makes value report false.
type rewriter struct {
	in     []byte
	pos    int
	fn     func(string) string // nil: strings are left alone
	id     json.RawMessage     // replaces the top-level "id" value if not nil
	out    []byte              // nil until the first change
	copied int                 // in[:copied] is accounted for in out
}

// replace records that in[start:end] becomes repl.
func (r *rewriter) replace(start, end int, repl []byte) {
	r.out = append(r.out, r.in[r.copied:start]...)
	r.out = append(r.out, repl...)
	r.copied = end
}

func (r *rewriter) skipSpace() int {
	for r.pos < len(r.in) {
		switch r.in[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return r.pos
		}
	}
	return r.pos
}

// value walks one value at r.pos. depth is 0 for the whole text; rewrite
// says whether its strings are to be passed to fn.
func (r *rewriter) value(depth int, rewrite bool) bool {
	if depth > maxDepth || r.skipSpace() == len(r.in) {
		return false
	}
	switch r.in[r.pos] {
	case '{':
		return r.object(depth, rewrite)
	case '[':
		r.pos++
		if r.skipSpace() < len(r.in) && r.in[r.pos] == ']' {
			r.pos++
			return true
		}
		for {
			if !r.value(depth+1, rewrite) {
				return false
			}
			if r.skipSpace() == len(r.in) {
				return false
			}
			switch r.in[r.pos] {
			case ',':
				r.pos++
			case ']':
				r.pos++
				return true
			default:
				return false
			}
		}
	case '"':
		start := r.pos
		s, ok := r.str()
		if !ok {
			return false
		}
		if rewrite && r.fn != nil {
			if t := r.fn(s); t != s {
				r.replace(start, r.pos, encodeString(t))
			}
		}
		return true
	default:
		return r.literal()
	}
}

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

func (r *rewriter) object(depth int, rewrite bool) bool {
	r.pos++ // '{'
	if r.skipSpace() < len(r.in) && r.in[r.pos] == '}' {
		r.pos++
		return true
	}
	for {
		if r.skipSpace() == len(r.in) || r.in[r.pos] != '"' {
			return false
		}
		key, ok := r.str()
		if !ok || r.skipSpace() == len(r.in) || r.in[r.pos] != ':' {
			return false
		}
		r.pos++
		envelope := depth == 0 && envelopeMembers[key]
		if envelope && key == "id" && r.id != nil {
			start := r.skipSpace()
			if !r.value(depth+1, false) {
				return false
			}
			r.replace(start, r.pos, r.id)
		} else if !r.value(depth+1, rewrite && !envelope) {
			return false
		}
		if r.skipSpace() == len(r.in) {
			return false
		}
		switch r.in[r.pos] {
		case ',':
			r.pos++
		case '}':
			r.pos++
			return true
		default:
			return false
		}
	}
}

// str reads the string at r.pos and returns its value.
func (r *rewriter) str() (string, bool) {
	start := r.pos
	escaped := false
	for i := start + 1; i < len(r.in); i++ {
		switch c := r.in[i]; {
		case c == '\\':
			escaped = true
			i++
		case c == '"':
			r.pos = i + 1
			tok := r.in[start:r.pos]
			if body := tok[1 : len(tok)-1]; !escaped && utf8.Valid(body) {
				return string(body), true
			}
			var s string
			if json.Unmarshal(tok, &s) != nil {
				return "", false
			}
			return s, true
		case c < 0x20:
			return "", false
		}
	}
	return "", false
}

// literal reads a number, true, false or null.
func (r *rewriter) literal() bool {
	start := r.pos
	for r.pos < len(r.in) {
		switch r.in[r.pos] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return json.Valid(r.in[start:r.pos])
		}
		r.pos++
	}
	return json.Valid(r.in[start:r.pos])
}

// encodeString returns s as a JSON string, with "<", ">" and "&" as they
// are, as agents and editors write them.
func encodeString(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

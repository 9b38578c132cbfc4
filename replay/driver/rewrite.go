package driver

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/acptap/acptap/internal/jsonscan"
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
	if !jsonscan.Valid(line) {
		return line
	}
	rw := rewriter{in: line, fn: fn}
	top := bytes.Trim(line, " \t\r\n")
	if len(top) > 0 && top[0] == '{' {
		jsonscan.Members(top, func(key, value []byte) bool {
			name, _ := decodeString(key)
			switch {
			case !envelopeMembers[name]:
				rw.strings(value)
			case name == "id" && id != nil:
				rw.replace(value, id)
			}
			return true
		})
	} else {
		rw.strings(top)
	}
	if rw.out == nil {
		return line
	}
	return append(rw.out, line[rw.copied:]...)
}

// rewriter builds the rewritten copy of one valid JSON text from the
// parts of it that change, found with jsonscan.
type rewriter struct {
	in     []byte
	fn     func(string) string // nil: strings are left alone
	out    []byte              // nil until the first change
	copied int                 // in[:copied] is accounted for in out
}

// replace records that part, a slice of r.in found after every part
// replaced so far, becomes repl.
func (r *rewriter) replace(part, repl []byte) {
	// part shares r.in's array, so the capacity it lacks is its offset.
	start := cap(r.in) - cap(part)
	r.out = append(r.out, r.in[r.copied:start]...)
	r.out = append(r.out, repl...)
	r.copied = start + len(part)
}

// strings applies fn to every string value in v, a valid JSON value
// within r.in.
func (r *rewriter) strings(v []byte) {
	if r.fn == nil {
		return
	}
	switch v[0] {
	case '{':
		jsonscan.Members(v, func(_, value []byte) bool { r.strings(value); return true })
	case '[':
		jsonscan.Elements(v, func(elem []byte) bool { r.strings(elem); return true })
	case '"':
		s, ok := decodeString(v)
		if !ok {
			return
		}
		if t := r.fn(s); t != s {
			r.replace(v, encodeString(t))
		}
	}
}

// decodeString returns the value of the JSON string tok, quotes included.
func decodeString(tok []byte) (string, bool) {
	if body := tok[1 : len(tok)-1]; bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), true
	}
	var s string
	if json.Unmarshal(tok, &s) != nil {
		return "", false
	}
	return s, true
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

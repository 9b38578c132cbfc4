package redact

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"

	"github.com/acptap/acptap/internal/jsonscan"
)

// secretSuffixes end the names of JSON members, headers and flags that
// hold secrets (apiKey, proxy_key, X-Auth-Token, client_secret), compared
// case-insensitively; secretWholeNames are such names whole.
var (
	secretSuffixes   = []string{"key", "token", "secret"}
	secretWholeNames = []string{"password", "authorization", "cookie"}
)

// SecretMember reports whether a JSON member, header or flag named name
// holds a secret: its name ends with key, token or secret, or is
// password, authorization or cookie, in any case. Plurals (maxTokens,
// X-Ratelimit-Remaining-Tokens) are counts, not secrets, and do not match.
func SecretMember(name string) bool { return secretName([]byte(name)) }

// maskJSON is the JSON string that replaces a secret member's value.
var maskJSON = []byte(`"` + Mask + `"`)

// Members returns the JSON text line with the string values of its
// secret members (SecretMember, at any depth, _meta included) masked as
// "[REDACTED]", and of the value member of a {"name": ..., "value": ...}
// object whose name says secret (ACP's environment variables and HTTP
// headers of MCP servers). A secret member whose value is an object or
// an array has every string in it masked. Every other byte is kept as it
// is. In a line that is not JSON, such as a log line quoting a message,
// string members written "NAME": "VALUE" are masked. A line without
// anything to mask is returned itself, never copied; a line is never
// changed in place.
//
// It runs on every stdio line recorded, so a line is first looked over
// for a member name that could say secret, which costs a search for each
// ':' in it and nothing else; only a line with one is parsed.
func Members(line []byte) []byte {
	if !maybeSecretMember(line) {
		return line
	}
	if !jsonscan.Valid(line) {
		return textMembers(line)
	}
	w := walker{b: line}
	w.value(false)
	spans := w.spans
	if w.unordered {
		sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	}
	if len(spans) == 0 {
		return line
	}
	n := len(line)
	for _, s := range spans {
		n += len(maskJSON) - (s[1] - s[0])
	}
	out := make([]byte, 0, n)
	done := 0
	for _, s := range spans {
		out = append(out, line[done:s[0]]...)
		out = append(out, maskJSON...)
		done = s[1]
	}
	return append(out, line[done:]...)
}

// walker finds the strings Members masks in b, valid JSON text, in one
// pass.
type walker struct {
	b []byte
	i int
	// spans are the offsets of the strings to mask, quotes included,
	// in order unless unordered (a "value" masked for its "name" after
	// it). They never overlap.
	spans     [][2]int
	unordered bool
}

func (w *walker) space() {
	for w.i < len(w.b) && (w.b[w.i] == ' ' || w.b[w.i] == '\t' || w.b[w.i] == '\r' || w.b[w.i] == '\n') {
		w.i++
	}
}

// str moves past the string at w.i and returns where it began.
func (w *walker) str() int {
	from := w.i
	w.i++
	for {
		j := bytes.IndexByte(w.b[w.i:], '"')
		end := w.i + j
		// The quote ends the string unless an odd number of
		// backslashes escapes it.
		bs := 0
		for w.b[end-1-bs] == '\\' {
			bs++
		}
		w.i = end + 1
		if bs%2 == 0 {
			return from
		}
	}
}

// value moves past the value at w.i, adding the strings in it to mask:
// all of them if secret, else those of its secret members.
func (w *walker) value(secret bool) {
	w.space()
	switch w.b[w.i] {
	case '"':
		from := w.str()
		// Empty strings hold nothing to hide, and stay as they were.
		if secret && w.i-from > 2 {
			w.spans = append(w.spans, [2]int{from, w.i})
		}
	case '[':
		w.i++
		for {
			w.space()
			if w.b[w.i] == ']' {
				w.i++
				return
			}
			w.value(secret)
			w.space()
			if w.b[w.i] == ',' {
				w.i++
			}
		}
	case '{':
		w.object(secret)
	default:
		for w.i < len(w.b) {
			switch w.b[w.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			w.i++
		}
	}
}

// object is value for an object. The value member of a {"name",
// "value"} pair whose name says secret is secret too, and name may come
// after value.
func (w *walker) object(secret bool) {
	w.i++
	pairName := false   // the object's "name" says secret
	var values [][2]int // its "value" members, strings not masked yet
	for {
		w.space()
		if w.b[w.i] == '}' {
			w.i++
			break
		}
		from := w.str()
		key := w.b[from:w.i]
		w.space()
		w.i++ // ':'
		w.space()
		name := memberName(key)
		switch {
		case secret || secretName(name):
			w.value(true)
		case string(name) == "name" && w.b[w.i] == '"':
			at := w.str()
			var v string
			if json.Unmarshal(w.b[at:w.i], &v) == nil && (SecretMember(v) || SecretName(v)) {
				pairName = true
			}
		case string(name) == "value" && w.b[w.i] == '"':
			at := w.str()
			if w.i-at > 2 {
				values = append(values, [2]int{at, w.i})
			}
		default:
			w.value(false)
		}
		w.space()
		if w.b[w.i] == ',' {
			w.i++
		}
	}
	if pairName && len(values) > 0 {
		w.spans = append(w.spans, values...)
		w.unordered = true
	}
}

// memberName decodes a member's raw key, quotes included; without escapes
// it is the bytes between the quotes, not copied.
func memberName(key []byte) []byte {
	if bytes.IndexByte(key, '\\') < 0 {
		return key[1 : len(key)-1]
	}
	var name string
	json.Unmarshal(key, &name) // valid JSON: it decodes
	return []byte(name)
}

// secretName is SecretMember of a name's bytes, without copying them.
func secretName(name []byte) bool {
	for _, w := range secretSuffixes {
		if hasFoldSuffix(name, w) {
			return true
		}
	}
	for _, w := range secretWholeNames {
		if len(name) == len(w) && hasFoldSuffix(name, w) {
			return true
		}
	}
	return false
}

// maxNameBytes bounds how far back from a member name's closing quote
// maybeSecretMember looks for its opening one: "authorization" with every
// letter escaped as \u00XX, and a little more.
const maxNameBytes = 6*len("authorization") + 8

// maybeSecretMember reports whether line may have a member that Members
// masks: a member name (a string before a ':') that says secret or is
// "value", or that has an escape in it, which only decoding can tell.
// False means there is none; true may be wrong, but only where a ':'
// after a quote sits inside a string.
func maybeSecretMember(line []byte) bool {
	for i := 0; i < len(line); {
		j := bytes.IndexByte(line[i:], ':')
		if j < 0 {
			return false
		}
		colon := i + j
		i = colon + 1
		q := colon - 1
		for q >= 0 && (line[q] == ' ' || line[q] == '\t' || line[q] == '\r' || line[q] == '\n') {
			q--
		}
		if q < 0 || line[q] != '"' {
			continue
		}
		// The name runs back from line[q] to its opening quote.
		from := max(0, q-maxNameBytes)
		open := bytes.LastIndexByte(line[from:q], '"')
		if open < 0 {
			// Longer than any secret name, escaped or not, unless
			// the quote is further back still: no name of ours.
			continue
		}
		name := line[from+open+1 : q]
		if bytes.IndexByte(name, '\\') >= 0 || (from+open > 0 && line[from+open-1] == '\\') {
			return true
		}
		if candidateName(name) {
			return true
		}
	}
	return false
}

// candidateName is SecretMember for the raw bytes of a name without
// escapes, or the name "value" of a {"name", "value"} pair.
func candidateName(name []byte) bool {
	return secretName(name) || string(name) == "value"
}

// hasFoldSuffix reports whether b ends with w, a lowercase ASCII word,
// in any case: x|0x20 is w's letter only for that letter and its capital.
func hasFoldSuffix(b []byte, w string) bool {
	if len(b) < len(w) {
		return false
	}
	b = b[len(b)-len(w):]
	for i := range len(w) {
		if b[i]|0x20 != w[i] {
			return false
		}
	}
	return true
}

// stringMember matches a member with a string value in text that may
// not be JSON as a whole: its name, and its value with its quotes.
var stringMember = regexp.MustCompile(`"((?:[^"\\]|\\.){1,96})"\s*:\s*("(?:[^"\\]|\\.)*")`)

// textMembers is Members for a line that is not JSON: the string values
// of secret members, and of the value of a "name" that says secret, in
// JSON quoted in it.
func textMembers(line []byte) []byte {
	var out []byte
	done := 0
	pairName := false
	for _, m := range stringMember.FindAllSubmatchIndex(line, -1) {
		name := memberName(line[m[2]-1 : m[3]+1])
		value := line[m[4]:m[5]]
		switch {
		case string(name) == "name":
			var v string
			pairName = json.Unmarshal(value, &v) == nil && (SecretMember(v) || SecretName(v))
			continue
		case secretName(name), string(name) == "value" && pairName:
		default:
			continue
		}
		if len(value) <= 2 {
			continue
		}
		out = append(out, line[done:m[4]]...)
		out = append(out, maskJSON...)
		done = m[5]
	}
	if out == nil {
		return line
	}
	return append(out, line[done:]...)
}

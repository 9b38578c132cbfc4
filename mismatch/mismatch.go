// Package mismatch describes a place where two runs differ, the one model of a difference that normalize, the replay LLM server, calibrate and replay's reports share, and shows it in one line as the reports print it.
//
// The runs are the recorded one and a live one (a replay), or two replays
// of calibrate. A Mismatch is where they differ and what each has there;
// the types that report differences (normalize.Difference, llmserver.Drift,
// calibrate.Conflict, replay.Divergence) embed it and add where in their
// own structure it is. Pair shows two strings around the first place they
// differ.
package mismatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// A Mismatch is one place where two runs differ.
type Mismatch struct {
	// Path says where: a JSON path ("$.params.update.status") inside the
	// value its container names, rooted at a name where the value has
	// one ("agent output $[7].params", "llm #2 $.body.messages[1]").
	Path string
	// Recorded and Live are the values there, decoded JSON, in the
	// recording (or the first run) and in the live run; a value that
	// reports Absent (normalize.Missing) for one a side lacks.
	Recorded, Live any
}

// String shows m in one line: its path, and the two values as Pair shows
// them ("$.text, character 41: recorded "…abc", live "…abd"").
func (m Mismatch) String() string {
	c := Pair(m.Recorded, m.Live)
	return fmt.Sprintf("%s%s: recorded %s, live %s", m.Path, c.Where(), c.A, c.B)
}

// Context is about how many characters of two strings Pair shows on each
// side of their first difference.
const Context = 40

// maxValue bounds a value other than a string that Pair shows.
const maxValue = 160

// A Contrast is two values as a one-line report shows them.
type Contrast struct {
	// A and B are the values: JSON, a string excerpted around the first
	// difference with "…" outside its quotes where it was cut, and
	// "nothing" for an Absent value (normalize.Missing).
	A, B string
	// At is the 0-based character (rune) offset of the first difference
	// of two strings when A or B is an excerpt of it; -1 when both are
	// shown whole or are not both strings.
	At int
}

// Where returns ", character N" (1-based) when the values are excerpts,
// to follow the path of the values in a report, and "" when they are
// shown whole.
func (c Contrast) Where() string {
	if c.At < 0 {
		return ""
	}
	return fmt.Sprintf(", character %d", c.At+1)
}

// Pair returns a and b as a one-line report shows them. Two strings are
// shown from about Context characters before their first difference to
// about Context after it, each; other values as JSON, cut at 160 bytes.
func Pair(a, b any) Contrast {
	sa, okA := a.(string)
	sb, okB := b.(string)
	if !okA || !okB || sa == sb {
		return Contrast{A: value(a), B: value(b), At: -1}
	}
	at := commonPrefix(sa, sb)
	from := back(sa, at, Context)
	ea, cutA := excerpt(sa, from, at)
	eb, cutB := excerpt(sb, from, at)
	c := Contrast{A: ea, B: eb, At: -1}
	if cutA || cutB {
		c.At = utf8.RuneCountInString(sa[:at])
	}
	return c
}

// commonPrefix returns the length in bytes of the longest common prefix of
// a and b that ends at a rune boundary of both.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	for n > 0 && (n < len(a) && !utf8.RuneStart(a[n]) || n < len(b) && !utf8.RuneStart(b[n])) {
		n--
	}
	return n
}

// back returns the byte offset n runes before i in s, or 0.
func back(s string, i, n int) int {
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return i
}

// forward returns the byte offset n runes after i in s, or len(s).
func forward(s string, i, n int) int {
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

// excerpt returns s[from:] up to Context runes after at, quoted, with "…"
// where it is cut, and whether it is.
func excerpt(s string, from, at int) (string, bool) {
	to := forward(s, at, Context)
	q := quote(s[from:to])
	cut := from > 0 || to < len(s)
	if from > 0 {
		q = "…" + q
	}
	if to < len(s) {
		q += "…"
	}
	return q, cut
}

// quote returns s as a JSON string, '<', '>' and '&' as they are.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(strings.ToValidUTF8(s, "\uFFFD"))
	return strings.TrimSuffix(b.String(), "\n")
}

// Value formats one value as Pair shows a value that is not one of two
// differing strings: a string quoted, anything else as JSON, cut at 160
// bytes; an Absent value (normalize.Missing) is "nothing".
func Value(v any) string { return value(v) }

// An Absent value stands for a value that one side of a comparison lacks
// (normalize.Missing is one): Pair and Value show it as "nothing". The
// method only marks the type, so that this package need not know the
// comparisons' packages.
type Absent interface{ Absent() }

// value formats a value other than two differing strings.
func value(v any) string {
	if _, ok := v.(Absent); ok {
		return "nothing"
	}
	if s, ok := v.(string); ok {
		if len(s) > maxValue {
			return quote(s[:cutAt(s, maxValue)]) + "…"
		}
		return quote(s)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	out := ""
	if err := enc.Encode(v); err != nil {
		out = fmt.Sprint(v)
	} else {
		out = strings.TrimSuffix(b.String(), "\n")
	}
	if len(out) > maxValue {
		out = out[:cutAt(out, maxValue)] + "…"
	}
	return out
}

// cutAt returns the largest rune boundary of s at or before n.
func cutAt(s string, n int) int {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

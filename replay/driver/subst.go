package driver

import (
	"bytes"
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/acptap/acptap/normalize"
)

// Learned substitutions.
//
// A value the agent mints (a sessionId, a toolCallId, ...) differs from
// run to run. Comparing a live message with its recorded twin, a string
// that differs at the same JSON path and looks like an id (see idLike)
// becomes a substitution recorded → live, applied to the editor frames
// sent later.
//
// A substitution replaces a whole string value equal to the recorded id.
// When both ids are words (ASCII letters, digits, '_' and '-'), it also
// replaces the recorded id where it appears as a whole word inside a
// longer string ("sess_1a2b" in "/tmp/sess_1a2b/log", not in
// "xsess_1a2b"). To make applying substitutions idempotent, a pair is
// refused when its recorded id is, or is a word of, a live id already
// learned, or its live id is, or is a word of, a recorded id already
// learned (or the other way round); and a recorded id keeps its first
// live value.

// Bounds of what looks like an id.
const (
	minIDLen  = 6
	wordIDLen = 16 // an id without a digit is at least this long
	maxIDLen  = 1024
)

// idLike reports whether s looks like a minted id: valid UTF-8 of 6 bytes
// to 1 KiB without white space or control characters, with a digit
// unless it is 16 bytes or longer. A status or stop reason that differs
// ("pending", "in_progress") is no id: taking it for one would rewrite
// the word wherever the editor says it.
func idLike(s string) bool {
	if len(s) < minIDLen || len(s) > maxIDLen || !utf8.ValidString(s) {
		return false
	}
	digit := len(s) >= wordIDLen
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
		digit = digit || '0' <= r && r <= '9'
	}
	return digit
}

func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// isWord reports whether s is one non-empty word.
func isWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isWordByte(s[i]) {
			return false
		}
	}
	return true
}

// words calls fn with each maximal run of word bytes in s and its offset.
func words(s string, fn func(w string, at int)) {
	for i := 0; i < len(s); {
		if !isWordByte(s[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && isWordByte(s[j]) {
			j++
		}
		fn(s[i:j], i)
		i = j
	}
}

// substitutions are the recorded → live pairs learned in one Run. The
// zero value is empty and ready to use.
type substitutions struct {
	live map[string]string // recorded → live
	rec  map[string]string // live → recorded
	// words maps recorded → live for the pairs whose both sides are
	// words: they are also replaced inside strings.
	words map[string]string

	lives     map[string]bool // the live values
	keyWords  map[string]bool // the words of the recorded values
	liveWords map[string]bool // the words of the live values
}

// add learns rec → live and reports whether it was accepted.
func (s *substitutions) add(rec, live string) bool {
	if rec == live || !idLike(rec) || !idLike(live) {
		return false
	}
	if _, dup := s.live[rec]; dup {
		return false
	}
	// rec is no live value nor a word of one, live no recorded value nor
	// a word of one; and the same within the new pair.
	if s.lives[rec] || s.liveWords[rec] || s.keyWords[live] {
		return false
	}
	if _, ok := s.live[live]; ok {
		return false
	}
	bad := false
	words(live, func(w string, _ int) {
		if _, ok := s.live[w]; ok || w == rec {
			bad = true
		}
	})
	words(rec, func(w string, _ int) {
		if s.lives[w] || w == live {
			bad = true
		}
	})
	if bad {
		return false
	}
	if s.live == nil {
		s.live = make(map[string]string)
		s.rec = make(map[string]string)
		s.words = make(map[string]string)
		s.lives = make(map[string]bool)
		s.keyWords = make(map[string]bool)
		s.liveWords = make(map[string]bool)
	}
	s.live[rec] = live
	s.rec[live] = rec
	if isWord(rec) && isWord(live) {
		s.words[rec] = live
	}
	s.lives[live] = true
	words(rec, func(w string, _ int) { s.keyWords[w] = true })
	words(live, func(w string, _ int) { s.liveWords[w] = true })
	return true
}

// recorded returns the recorded value that live took the place of, or live
// itself if none did.
func (s *substitutions) recorded(live string) string {
	if rec, ok := s.rec[live]; ok {
		return rec
	}
	return live
}

// apply returns str with the substitutions made.
func (s *substitutions) apply(str string) string {
	if len(s.live) == 0 {
		return str
	}
	if live, ok := s.live[str]; ok {
		return live
	}
	if len(s.words) == 0 {
		return str
	}
	var b strings.Builder
	copied := 0
	words(str, func(w string, at int) {
		live, ok := s.words[w]
		if !ok {
			return
		}
		b.WriteString(str[copied:at])
		b.WriteString(live)
		copied = at + len(w)
	})
	if copied == 0 {
		return str
	}
	b.WriteString(str[copied:])
	return b.String()
}

// learn compares the JSON values rec and live structurally and learns a
// substitution from every string that differs at the same path. Values
// that are not JSON teach nothing.
func (s *substitutions) learn(rec, live []byte) {
	rv, ok := decodeJSON(rec)
	if !ok {
		return
	}
	lv, ok := decodeJSON(live)
	if !ok {
		return
	}
	s.walk(rv, lv)
}

func decodeJSON(b []byte) (any, bool) {
	if len(b) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

// walk learns from the strings that differ between rec and live at the
// same path. Object members are visited in key order, so that which of
// two conflicting pairs wins does not depend on map order.
func (s *substitutions) walk(rec, live any) {
	switch r := rec.(type) {
	case string:
		if l, ok := live.(string); ok {
			s.add(r, l)
		}
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return
		}
		keys := make([]string, 0, len(r))
		for k := range r {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if lv, ok := l[k]; ok {
				s.walk(r[k], lv)
			}
		}
	case []any:
		l, ok := live.([]any)
		if !ok {
			return
		}
		for i := range min(len(r), len(l)) {
			s.walk(r[i], l[i])
		}
	}
}

// A pathMap rewrites recorded path prefixes to replay ones, in every form
// agents spell a directory in (see normalize.PathForms): -tmp-rec-ws
// becomes -tmp-sandbox-work as /tmp/rec/ws becomes /tmp/sandbox/work. It
// is immutable once made.
type pathMap struct {
	pairs []pathPair // longest from first
}

// A pathPair is a recorded prefix and its replay one, in one form.
type pathPair struct {
	from, to string
	sep      string // the separator of the form, which may end the prefix
	derived  bool   // the prefix may start right after a separator
}

func newPathMap(m map[string]string) *pathMap {
	pm := &pathMap{}
	seen := map[string]bool{}
	// In a fixed order: two forms of different directories may coincide.
	for _, from := range slices.Sorted(maps.Keys(m)) {
		to := m[from]
		from, to = trimSlash(from), trimSlash(to)
		if from == "" || from == to {
			continue
		}
		tos := map[string]normalize.PathForm{}
		for _, f := range normalize.PathForms(to) {
			tos[f.Kind] = f
		}
		for _, f := range normalize.PathForms(from) {
			t, ok := tos[f.Kind]
			if !ok || f.Path == t.Path || seen[f.Path] || f.Kind != "plain" && f.Path == from {
				continue
			}
			seen[f.Path] = true
			pm.pairs = append(pm.pairs, pathPair{from: f.Path, to: t.Path, sep: f.Sep, derived: f.Derived})
		}
	}
	slices.SortStableFunc(pm.pairs, func(a, b pathPair) int {
		return cmp.Or(cmp.Compare(len(b.from), len(a.from)), cmp.Compare(a.from, b.from))
	})
	return pm
}

// trimSlash drops a trailing '/' but leaves "/" alone.
func trimSlash(p string) string {
	if len(p) > 1 {
		return strings.TrimSuffix(p, "/")
	}
	return p
}

// isNameByte reports whether c can be part of a file name as written in
// text. Bytes of multibyte UTF-8 sequences are.
func isNameByte(c byte) bool {
	return isWordByte(c) || c >= 0x80 || strings.IndexByte(".~+@%", c) >= 0
}

// apply rewrites, in s, each recorded prefix that starts a path (at the
// start of s, after a byte that cannot be in a path, or after "file://";
// a derived form also right after a separator) and ends at a path
// boundary (the end of s, '/', the form's separator, a byte that cannot
// be in a name, or a '.' that ends a sentence) by its replay prefix.
func (pm *pathMap) apply(s string) string {
	if len(pm.pairs) == 0 {
		return s
	}
	var b strings.Builder
	copied := 0
	for i := 0; i < len(s); {
		plainStart := i == 0 || !isNameByte(s[i-1]) && s[i-1] != '/' || strings.HasSuffix(s[:i], "file://")
		if !plainStart && s[i-1] != '/' && s[i-1] != '\\' {
			i++
			continue
		}
		n := 0
		for _, p := range pm.pairs {
			if (plainStart || p.derived) && strings.HasPrefix(s[i:], p.from) &&
				(pathEnd(s, i+len(p.from)) || strings.HasPrefix(s[i+len(p.from):], p.sep)) {
				b.WriteString(s[copied:i])
				b.WriteString(p.to)
				n = len(p.from)
				break
			}
		}
		if n == 0 {
			i++
			continue
		}
		i += n
		copied = i
	}
	if copied == 0 {
		return s
	}
	b.WriteString(s[copied:])
	return b.String()
}

// pathEnd reports whether a path prefix may end at s[j].
func pathEnd(s string, j int) bool {
	if j == len(s) || s[j] == '/' || !isNameByte(s[j]) {
		return true
	}
	// "... in /work/rec." or "/work/rec.\n": a full stop, not a suffix.
	return s[j] == '.' && (j+1 == len(s) || !isNameByte(s[j+1]) && s[j+1] != '/')
}

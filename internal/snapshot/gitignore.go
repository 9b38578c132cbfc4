package snapshot

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The .gitignore subset understood here (see gitignore(5)):
//
//   - blank lines and lines starting with '#' match nothing; "\#" starts
//     a pattern with '#'
//   - trailing spaces are dropped unless escaped with '\'; a trailing
//     '\r' (a file edited on Windows) and a leading UTF-8 BOM too
//   - '!' negates: a path a negated pattern matches is included again,
//     unless a directory above it is excluded (its contents are never
//     looked at); "\!" starts a pattern with '!'
//   - a trailing '/' matches directories only
//   - a pattern with a '/' at its start or in its middle is anchored: it
//     matches paths relative to the directory of its .gitignore; any other
//     pattern matches the name of an entry at any depth below it
//   - '*' matches any run of characters but '/', '?' any one character
//     but '/', "[...]" one character of a class: ranges ("a-z"), "!" or
//     "^" first to negate, ']' first taken literally, POSIX classes
//     ("[:digit:]"), '\' escaping; an unterminated class or an unknown
//     POSIX class makes the pattern match nothing, as in git
//   - '\' makes the next character literal
//   - "**/" at the start matches in all directories, "/**" at the end
//     everything inside, "/**/" in the middle zero or more directories;
//     other runs of '*' are one '*'
//   - the last pattern that matches a path decides; patterns of a deeper
//     .gitignore come after those of the directories above it
//
// Matching works on runes, not bytes, and is case-sensitive.

// pattern is one line of a .gitignore.
type pattern struct {
	base     string // slash path of the .gitignore's directory, "" for the root
	negate   bool   // '!': a match includes
	dirOnly  bool   // trailing '/': matches directories only
	anchored bool   // matches the whole path below base, not only the name
	broken   bool   // an unterminated or unknown class: matches nothing
	// segs are the pattern's '/'-separated parts; a nil segment is "**".
	// An unanchored pattern has one.
	segs [][]token
}

// tokenKind says what a token of a segment matches.
type tokenKind uint8

const (
	tokLiteral tokenKind = iota // the rune r
	tokAny                      // '?': any one rune
	tokStar                     // '*': any run of runes
	tokClass                    // "[...]"
)

// token is one element of a pattern segment.
type token struct {
	kind   tokenKind
	r      rune        // tokLiteral
	negate bool        // tokClass: matches runes not in it
	ranges []runeRange // tokClass
	named  []func(rune) bool
}

type runeRange struct{ lo, hi rune }

// posixClasses are the "[:name:]" classes of a bracket expression.
var posixClasses = map[string]func(rune) bool{
	"alnum": func(r rune) bool { return r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) },
	"alpha": func(r rune) bool { return r < utf8.RuneSelf && unicode.IsLetter(r) },
	"blank": func(r rune) bool { return r == ' ' || r == '\t' },
	"cntrl": func(r rune) bool { return r < utf8.RuneSelf && unicode.IsControl(r) },
	"digit": func(r rune) bool { return '0' <= r && r <= '9' },
	"graph": func(r rune) bool { return '!' <= r && r <= '~' },
	"lower": func(r rune) bool { return 'a' <= r && r <= 'z' },
	"print": func(r rune) bool { return ' ' <= r && r <= '~' },
	"punct": func(r rune) bool {
		return r < utf8.RuneSelf && unicode.IsPunct(r) || r < utf8.RuneSelf && unicode.IsSymbol(r)
	},
	"space":  func(r rune) bool { return r == ' ' || '\t' <= r && r <= '\r' },
	"upper":  func(r rune) bool { return 'A' <= r && r <= 'Z' },
	"xdigit": func(r rune) bool { return '0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F' },
}

// parseGitignore returns the patterns of the .gitignore content data,
// found in the directory base (a slash path, "" for the root), in order.
func parseGitignore(base string, data []byte) []pattern {
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	var pats []pattern
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if p, ok := parseLine(base, string(line)); ok {
			pats = append(pats, p)
		}
	}
	return pats
}

// parseLine parses one line of a .gitignore; ok is false for a line that
// holds no pattern.
func parseLine(base, line string) (p pattern, ok bool) {
	line = strings.TrimSuffix(line, "\r")
	line = trimTrailingSpaces(line)
	if line == "" || line[0] == '#' {
		return pattern{}, false
	}
	p.base = base
	if line[0] == '!' {
		p.negate = true
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") && !escapedAt(line, len(line)-1) {
		p.dirOnly = true
		line = strings.TrimRight(line, "/")
	}
	if line == "" {
		return pattern{}, false
	}
	p.anchored = strings.Contains(line, "/")
	line = strings.TrimPrefix(line, "/")
	if line == "" {
		return pattern{}, false
	}
	parts := strings.Split(line, "/")
	for i, part := range parts {
		if part == "**" && p.anchored {
			if i == len(parts)-1 && len(parts) > 1 {
				// "x/**" matches what is inside x, not x: one
				// segment at least, then any more.
				p.segs = append(p.segs, []token{{kind: tokStar}})
			}
			p.segs = append(p.segs, nil)
			continue
		}
		toks, ok := parseSegment(part)
		if !ok {
			p.broken = true
		}
		p.segs = append(p.segs, toks)
	}
	return p, true
}

// trimTrailingSpaces drops the spaces ending s that no '\' escapes.
func trimTrailingSpaces(s string) string {
	end := len(s)
	for end > 0 && s[end-1] == ' ' && !escapedAt(s, end-1) {
		end--
	}
	return s[:end]
}

// escapedAt reports whether the byte s[i] is escaped by an odd run of
// backslashes before it.
func escapedAt(s string, i int) bool {
	n := 0
	for i > 0 && s[i-1] == '\\' {
		n++
		i--
	}
	return n%2 == 1
}

// parseSegment turns one segment of a pattern, free of '/', into tokens.
// ok is false if a class is unterminated or names an unknown POSIX class.
// A segment never holds a nil token list: "" gives an empty, non-nil one.
func parseSegment(s string) (toks []token, ok bool) {
	toks = make([]token, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case '*':
			for i < len(s) && s[i] == '*' {
				i++
			}
			toks = append(toks, token{kind: tokStar})
			continue
		case '?':
			toks = append(toks, token{kind: tokAny})
			i++
			continue
		case '[':
			t, n, ok := parseClass(s[i:])
			if !ok {
				return toks, false
			}
			toks = append(toks, t)
			i += n
			continue
		case '\\':
			if i+1 < len(s) {
				i++
			}
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		toks = append(toks, token{kind: tokLiteral, r: r})
		i += n
	}
	return toks, true
}

// parseClass parses the bracket expression at the start of s and returns
// it with its length in bytes.
func parseClass(s string) (t token, n int, ok bool) {
	t.kind = tokClass
	i := 1
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		t.negate = true
		i++
	}
	first := true
	for i < len(s) {
		if s[i] == ']' && !first {
			return t, i + 1, true
		}
		first = false
		if strings.HasPrefix(s[i:], "[:") {
			end := strings.Index(s[i+2:], ":]")
			if end < 0 {
				return t, 0, false
			}
			fn, known := posixClasses[s[i+2:i+2+end]]
			if !known {
				return t, 0, false
			}
			t.named = append(t.named, fn)
			i += 2 + end + 2
			continue
		}
		lo, k := classRune(s[i:])
		i += k
		hi := lo
		if i+1 < len(s) && s[i] == '-' && s[i+1] != ']' {
			hi, k = classRune(s[i+1:])
			i += 1 + k
		}
		t.ranges = append(t.ranges, runeRange{lo, hi})
	}
	return t, 0, false
}

// classRune decodes the rune at the start of s, a '\' making the next
// one literal, and returns it with its length in bytes.
func classRune(s string) (rune, int) {
	if s[0] == '\\' && len(s) > 1 {
		r, n := utf8.DecodeRuneInString(s[1:])
		return r, 1 + n
	}
	return utf8.DecodeRuneInString(s)
}

// matchRune reports whether the class t matches r.
func (t *token) matchRune(r rune) bool {
	in := false
	for _, rg := range t.ranges {
		if rg.lo <= r && r <= rg.hi {
			in = true
			break
		}
	}
	for _, fn := range t.named {
		if in {
			break
		}
		in = fn(r)
	}
	return in != t.negate
}

// matchSegment reports whether toks match all of name, a path segment.
// '*' backtracks to its last position only, which is enough for a
// pattern whose other tokens match one rune each: the cost is
// O(len(toks)·len(name)).
func matchSegment(toks []token, name string) bool {
	px, nx := 0, 0
	starPx, starNx := -1, 0
	for px < len(toks) || nx < len(name) {
		if px < len(toks) {
			t := &toks[px]
			if t.kind == tokStar {
				starPx, starNx = px, nx
				px++
				continue
			}
			if nx < len(name) {
				r, n := utf8.DecodeRuneInString(name[nx:])
				var ok bool
				switch t.kind {
				case tokLiteral:
					ok = r == t.r
				case tokAny:
					ok = r != '/'
				case tokClass:
					ok = r != '/' && t.matchRune(r)
				}
				if ok {
					px++
					nx += n
					continue
				}
			}
		}
		if starPx < 0 || starNx >= len(name) {
			return false
		}
		r, n := utf8.DecodeRuneInString(name[starNx:])
		if r == '/' {
			return false
		}
		starNx += n
		px, nx = starPx+1, starNx
	}
	return true
}

// matchSegments reports whether the segments segs, where nil is "**",
// match all the parts of a path, with the same backtracking as
// matchSegment one level up.
func matchSegments(segs [][]token, parts []string) bool {
	sx, px := 0, 0
	starSx, starPx := -1, 0
	for sx < len(segs) || px < len(parts) {
		if sx < len(segs) {
			if segs[sx] == nil {
				starSx, starPx = sx, px
				sx++
				continue
			}
			if px < len(parts) && matchSegment(segs[sx], parts[px]) {
				sx++
				px++
				continue
			}
		}
		if starSx < 0 || starPx >= len(parts) {
			return false
		}
		starPx++
		sx, px = starSx+1, starPx
	}
	return true
}

// match reports whether p matches rel, a slash path relative to p.base
// naming a directory if isDir; negation is the caller's business.
func (p *pattern) match(rel string, isDir bool) bool {
	if p.broken || p.dirOnly && !isDir {
		return false
	}
	if !p.anchored {
		name := rel
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			name = rel[i+1:]
		}
		return matchSegment(p.segs[0], name)
	}
	return matchSegments(p.segs, strings.Split(rel, "/"))
}

// ignored reports whether pats, the patterns in force for the slash path
// name (those of the .gitignore files of its ancestors, outermost
// first), exclude it: the last pattern that matches decides.
func ignored(pats []pattern, name string, isDir bool) bool {
	for i := len(pats) - 1; i >= 0; i-- {
		p := &pats[i]
		rel, ok := relTo(p.base, name)
		if ok && p.match(rel, isDir) {
			return !p.negate
		}
	}
	return false
}

// relTo returns name relative to the directory base, if name is below it.
func relTo(base, name string) (string, bool) {
	if base == "" {
		return name, name != ""
	}
	if len(name) > len(base)+1 && strings.HasPrefix(name, base) && name[len(base)] == '/' {
		return name[len(base)+1:], true
	}
	return "", false
}

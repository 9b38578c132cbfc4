package normalize

import (
	"cmp"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
)

// A root is a directory whose absolute paths are rewritten to start with a
// placeholder.
type root struct {
	dir         string
	placeholder string
	rank        int // breaks ties between equal dirs: cwd, then tmp, then home
}

// newRoots returns the roots of opts, longest first, so that a workspace
// inside TMPDIR or HOME becomes <cwd> and not <tmp>/... . Relative and
// empty roots, and "/", are ignored: they would rewrite every path. A root
// that needs escaping in a URI is also matched escaped, for file:// URIs.
func newRoots(opts Options) []root {
	var rs []root
	add := func(dirs []string, placeholder string, rank int) {
		for _, d := range dirs {
			d = strings.TrimRight(filepath.Clean(d), `/\`)
			if d == "" || d == "." || !(strings.HasPrefix(d, "/") || filepath.IsAbs(d)) {
				continue
			}
			rs = append(rs, root{d, placeholder, rank})
			if esc := (&url.URL{Path: d}).EscapedPath(); esc != d {
				rs = append(rs, root{esc, placeholder, rank})
			}
		}
	}
	add(opts.Cwd, "<cwd>", 0)
	add(opts.Tmp, "<tmp>", 1)
	add(opts.Home, "<home>", 2)
	slices.SortStableFunc(rs, func(a, b root) int {
		if c := cmp.Compare(len(b.dir), len(a.dir)); c != 0 {
			return c
		}
		return cmp.Compare(a.rank, b.rank)
	})
	return slices.CompactFunc(rs, func(a, b root) bool { return a.dir == b.dir })
}

// replaceRoots rewrites the roots at the start of absolute paths in s. A
// root counts only where a path can start (at the start of s, after a
// character that cannot be in a path, or after "file://") and only up to
// where a path component ends, so that /tmp/ws does not rewrite
// /tmp/ws2 or foo/tmp/ws.
//
// Right after a path placeholder, only a root of the same kind counts.
// "<cwd>/tmp/x" is a path in the workspace, which must not become
// "<cwd><tmp>/x" when normalized again; but Codex writes its working
// directory as "<cwd>/home/me/proj</cwd>", which must become
// "<cwd><cwd></cwd>" in both runs.
func replaceRoots(rs []root, s string) string {
	if len(rs) == 0 || !containsAnyRoot(rs, s) {
		return s
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if i > 0 && isPathByte(s[i-1]) && !afterFileScheme(s, i) {
			continue
		}
		after := ""
		if i > 0 && s[i-1] == '>' {
			after = trailingPlaceholder(s[:i])
		}
		for _, r := range rs {
			end := i + len(r.dir)
			if !strings.HasPrefix(s[i:], r.dir) || !pathEnd(s, end) ||
				isRootPlaceholder(after) && after != r.placeholder {
				continue
			}
			b.WriteString(s[last:i])
			b.WriteString(r.placeholder)
			last = end
			i = end - 1
			break
		}
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func containsAnyRoot(rs []root, s string) bool {
	for _, r := range rs {
		if strings.Contains(s, r.dir) {
			return true
		}
	}
	return false
}

func afterFileScheme(s string, i int) bool {
	return i >= len("file://") && strings.EqualFold(s[i-len("file://"):i], "file://")
}

func isRootPlaceholder(p string) bool {
	return p == "<cwd>" || p == "<home>" || p == "<tmp>"
}

// pathEnd reports whether a path component ends at s[i]: at the end of
// s, at a separator, or at a byte that cannot be in a path. A '.' ends it
// only when no name follows, as at the end of a sentence, so that a root
// /w does not match /w.bak.
func pathEnd(s string, i int) bool {
	if i == len(s) {
		return true
	}
	switch c := s[i]; {
	case c == '/' || c == '\\':
		return true
	case c == '.':
		return i+1 == len(s) || !isPathByte(s[i+1])
	default:
		return !isPathByte(c)
	}
}

// isPathByte reports whether c can be part of a path component or
// separator.
func isPathByte(c byte) bool {
	return isAlnum(c) || strings.IndexByte("._-~%/\\", c) >= 0
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// trailingPlaceholder returns the placeholder at the end of s, or "".
func trailingPlaceholder(s string) string {
	i := strings.LastIndexByte(s, '<')
	if i < 0 || !isPlaceholder(s[i:]) {
		return ""
	}
	return s[i:]
}

// isPlaceholder reports whether s is a placeholder: '<', a name (a letter,
// then letters, digits or '_'), optionally ':' and a number, and '>'.
// Placeholders are never rewritten again, which keeps normalization
// idempotent.
func isPlaceholder(s string) bool {
	if len(s) < 3 || s[0] != '<' || s[len(s)-1] != '>' {
		return false
	}
	body := s[1 : len(s)-1]
	name, num, hasNum := strings.Cut(body, ":")
	if name == "" || !isLetter(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		if !isAlnum(name[i]) && name[i] != '_' {
			return false
		}
	}
	if !hasNum {
		return true
	}
	if num == "" {
		return false
	}
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

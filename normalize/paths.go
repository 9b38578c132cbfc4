package normalize

import (
	"cmp"
	"encoding/json"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// A root is a directory whose absolute paths are rewritten to start with a
// placeholder, in one of the forms it is written in.
type root struct {
	dir         string // the directory in this form
	placeholder string
	rank        int // breaks ties between equal dirs: cwd, then tmp, then home
	// sep is the separator of the form: a path component ends where it
	// starts, as at "/" or a backslash (the ends of every form).
	sep string
	// derived says that dir is the directory spelled another way, such
	// as -tmp-x-ws for /tmp/x/ws, which may also start right after a
	// separator: agents build such names into paths of their own
	// (~/.claude/projects/-tmp-x-ws/).
	derived bool
}

// newRoots returns the roots of opts, longest first, so that a workspace
// inside TMPDIR or HOME becomes <cwd> and not <tmp>/... . Relative and
// empty roots, and "/", are ignored: they would rewrite every path. Each
// is also matched in the forms derived from it (see derivedForms).
func newRoots(opts Options) []root {
	var rs []root
	add := func(dirs []string, placeholder string, rank int) {
		for _, d := range dirs {
			d = strings.TrimRight(filepath.Clean(d), `/\`)
			if d == "" || d == "." || !(strings.HasPrefix(d, "/") || filepath.IsAbs(d)) {
				continue
			}
			rs = append(rs, root{dir: d, placeholder: placeholder, rank: rank, sep: "/"})
			for _, f := range derivedForms(d) {
				f.placeholder, f.rank = placeholder, rank
				rs = append(rs, f)
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

// derivedForms returns the roots of the forms of d but d itself (see
// PathForms), each once.
func derivedForms(d string) []root {
	var out []root
	seen := map[string]bool{d: true}
	for _, f := range PathForms(d) {
		if !seen[f.Path] {
			seen[f.Path] = true
			out = append(out, root{dir: f.Path, sep: f.Sep, derived: f.Derived})
		}
	}
	return out
}

// A PathForm is one way agents spell an absolute directory.
type PathForm struct {
	// Kind names the form: "plain", "uri", "percent", "percent-lower",
	// "query", "json", "json-slashes", "dashes", "underscores" or
	// "dashes-all".
	Kind string
	// Path is the directory in this form, and Sep the separator that
	// ends a component in it ("/", "%2F", "-", ...).
	Path, Sep string
	// Derived says that the form may also start right after a "/" or a
	// backslash, as a name made of the directory does
	// (~/.claude/projects/-tmp-x-ws/), where a path starts only where a
	// path can.
	Derived bool
}

// PathForms returns the spellings of the absolute directory d that
// agents write, d itself first, each kind once (the same kinds in the
// same order for every directory of as many components, so that two
// directories' forms pair up by Kind):
//
//   - plain: d;
//   - uri: escaped for a URI path (/tmp/my%20dir), for file:// URIs;
//   - percent, percent-lower, query: percent-encoded whole, as a query
//     value or a URL path segment (%2Ftmp%2Fx%2Fws, %2ftmp%2fx%2fws, and
//     with a plus for a space);
//   - json, json-slashes: JSON-escaped, as text holding JSON shows it
//     (/tmp/a\u0026b, \/tmp\/x\/ws);
//   - dashes, underscores, dashes-all: with "/" replaced by "-" or "_"
//     (-tmp-x-ws, _tmp_x_ws), and with every character but letters and
//     digits replaced by "-", as agents name a directory of their own
//     after the workspace (Claude Code's ~/.claude/projects/-tmp-x-ws).
//     These only for a directory of two components or more: -tmp or
//     _home is too common a word to be a path.
//
// Forms may be equal to d or to each other.
func PathForms(d string) []PathForm {
	forms := []PathForm{
		{"plain", d, "/", false},
		{"uri", (&url.URL{Path: d}).EscapedPath(), "/", false},
	}
	pct := url.PathEscape(d)
	forms = append(forms,
		PathForm{"percent", pct, "%2F", true},
		PathForm{"percent-lower", lowerHex(pct), "%2f", true},
		PathForm{"query", url.QueryEscape(d), "%2F", true})
	inner := d
	if b, err := json.Marshal(d); err == nil {
		inner = string(b[1 : len(b)-1])
	}
	forms = append(forms,
		PathForm{"json", inner, "/", false},
		PathForm{"json-slashes", strings.ReplaceAll(inner, "/", `\/`), `\/`, true})
	if strings.Count(d, "/") >= 2 {
		forms = append(forms,
			PathForm{"dashes", strings.ReplaceAll(d, "/", "-"), "-", true},
			PathForm{"underscores", strings.ReplaceAll(d, "/", "_"), "_", true},
			PathForm{"dashes-all", strings.Map(func(r rune) rune {
				if r < utf8.RuneSelf && isAlnum(byte(r)) {
					return r
				}
				return '-'
			}, d), "-", true})
	}
	return forms
}

// lowerHex returns s with the hex digits of its percent escapes in lower
// case.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1] = toLower(b[i+1])
			b[i+2] = toLower(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func toLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// replaceRoots rewrites the roots at the start of absolute paths in s. A
// root counts only where a path can start (at the start of s, after a
// character that cannot be in a path, or after "file://"; a derived form
// also right after a separator) and only up to where a path component
// ends, so that /tmp/ws does not rewrite /tmp/ws2 or foo/tmp/ws.
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
		plainStart := i == 0 || !isPathByte(s[i-1]) || afterFileScheme(s, i)
		if !plainStart && s[i-1] != '/' && s[i-1] != '\\' {
			continue
		}
		after := ""
		if i > 0 && s[i-1] == '>' {
			after = trailingPlaceholder(s[:i])
		}
		for _, r := range rs {
			end := i + len(r.dir)
			if !plainStart && !r.derived || !strings.HasPrefix(s[i:], r.dir) || !pathEnd(s, end, r.sep) ||
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
// s, at a separator (sep, "/" or a backslash), or at a byte that cannot be in
// a path. A '.' ends it only when no name follows, as at the end of a
// sentence, so that a root /w does not match /w.bak.
func pathEnd(s string, i int, sep string) bool {
	if i == len(s) || strings.HasPrefix(s[i:], sep) {
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

package snapshot

import (
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestGitignoreMatch(t *testing.T) {
	tests := []struct {
		rules string
		name  string
		dir   bool
		want  bool
	}{
		// Blank lines, comments, escapes.
		{"", "a", false, false},
		{"\n\n# a\n", "a", false, false},
		{"# a", "# a", false, false},
		{`\#a`, "#a", false, true},
		{`\!a`, "!a", false, true},
		{"a  ", "a", false, true},
		{`a\ `, "a ", false, true},
		{`a\ `, "a", false, false},
		{"a\r\n", "a", false, true},
		{"\uFEFFa", "a", false, true},
		// Unanchored patterns match the name at any depth.
		{"a.txt", "a.txt", false, true},
		{"a.txt", "x/y/a.txt", false, true},
		{"a.txt", "a.txt/b", false, false},
		{"*.log", "x/debug.log", false, true},
		{"*.log", "x/debug.log.1", false, false},
		{"d*", "x/data", true, true},
		// Anchored patterns match the path below the .gitignore.
		{"/a.txt", "a.txt", false, true},
		{"/a.txt", "x/a.txt", false, false},
		{"x/a.txt", "x/a.txt", false, true},
		{"x/a.txt", "y/x/a.txt", false, false},
		{"x/*", "x/a", false, true},
		{"x/*", "x/a/b", false, false},
		{"/*.c", "a.c", false, true},
		{"/*.c", "x/a.c", false, false},
		// Directory-only patterns.
		{"build/", "build", true, true},
		{"build/", "build", false, false},
		{"build/", "x/build", true, true},
		{"x/build/", "x/build", true, true},
		{"x/build/", "x/build", false, false},
		// '?' and classes.
		{"?.txt", "a.txt", false, true},
		{"?.txt", "ab.txt", false, false},
		{"*.[oa]", "x.o", false, true},
		{"*.[oa]", "x.c", false, false},
		{"f[0-9]", "f7", false, true},
		{"f[0-9]", "fx", false, false},
		{"f[!0-9]", "fx", false, true},
		{"f[^0-9]", "f7", false, false},
		{"f[]]", "f]", false, true},
		{"f[!]]", "fa", false, true},
		{"f[a-]", "f-", false, true},
		{`f[\]]`, "f]", false, true},
		{"f[[:digit:]]", "f3", false, true},
		{"f[[:digit:][:upper:]]", "fQ", false, true},
		{"f[[:digit:]]", "fa", false, false},
		{"f[[:nope:]]", "f3", false, false},
		{"f[abc", "f[abc", false, false},
		{"f[abc", "fa", false, false},
		{`\*`, "*", false, true},
		{`\*`, "a", false, false},
		{"é?", "éü", false, true},
		// '**'.
		{"**/foo", "foo", false, true},
		{"**/foo", "a/b/foo", false, true},
		{"**/foo/bar", "a/foo/bar", false, true},
		{"foo/**", "foo/a", false, true},
		{"foo/**", "foo/a/b", false, true},
		{"foo/**", "foo", true, false},
		{"a/**/b", "a/b", false, true},
		{"a/**/b", "a/x/b", false, true},
		{"a/**/b", "a/x/y/b", false, true},
		{"a/**/b", "a/x/y/c", false, false},
		{"a**b", "axxb", false, true},
		{"a**b", "ax/xb", false, false},
		{"**", "x/y", false, true},
		{"/**", "x", false, true},
		// Negation: the last match wins.
		{"*.log\n!keep.log", "keep.log", false, false},
		{"*.log\n!keep.log", "other.log", false, true},
		{"!keep.log\n*.log", "keep.log", false, true},
		{"!a", "a", false, false},
		// Lines with no pattern.
		{"/", "a", false, false},
		{"!", "!", false, false},
		{"!/", "a", true, false},
	}
	for _, tt := range tests {
		got := ignored(parseGitignore("", []byte(tt.rules)), tt.name, tt.dir)
		if got != tt.want {
			t.Errorf("rules %q, path %q (dir %v): ignored = %v, want %v", tt.rules, tt.name, tt.dir, got, tt.want)
		}
	}
}

func TestGitignoreNested(t *testing.T) {
	// Patterns apply below their own directory; deeper ones come later
	// and so win.
	pats := parseGitignore("", []byte("*.tmp\n/top\n"))
	pats = append(pats, parseGitignore("sub", []byte("!keep.tmp\n/top\nx/\n"))...)
	tests := []struct {
		name string
		dir  bool
		want bool
	}{
		{"a.tmp", false, true},
		{"sub/a.tmp", false, true},
		{"sub/keep.tmp", false, false},
		{"keep.tmp", false, true},
		{"other/keep.tmp", false, true},
		{"top", false, true},
		{"sub/top", false, true},
		{"sub/y/top", false, false},
		{"other/top", false, false},
		{"sub/x", true, true},
		{"sub/z/x", true, true},
		{"x", true, false},
		{"sub", true, false},
	}
	for _, tt := range tests {
		if got := ignored(pats, tt.name, tt.dir); got != tt.want {
			t.Errorf("path %q (dir %v): ignored = %v, want %v", tt.name, tt.dir, got, tt.want)
		}
	}
}

// escapeGlob makes name, a path segment, a pattern that matches it alone.
func escapeGlob(name string) string {
	var b strings.Builder
	for _, r := range name {
		if strings.ContainsRune("\\*?[!# \uFEFF", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func FuzzGitignore(f *testing.F) {
	for _, s := range []struct{ rules, name string }{
		{"*.log\n!keep.log\nbuild/\n", "keep.log"},
		{"a/**/b\n", "a/x/y/b"},
		{"f[[:digit:]-z]\n", "f5"},
		{"**/**/**/**/**/**/**/**/x\n", "a/b/c/d/e/f/g/h/i/j/k/y"},
		{"*a*a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		{`\`, `\`},
		{"[", "["},
		{"[!", "a"},
		{"[[:", "a"},
		{"[a-", "a"},
		{"!\\", "x"},
		{"x/\\/", "x"},
	} {
		f.Add(s.rules, s.name)
	}
	f.Fuzz(func(t *testing.T, rules, name string) {
		pats := parseGitignore("", []byte(rules))
		for _, p := range pats {
			if !p.anchored && len(p.segs) != 1 {
				t.Fatalf("unanchored pattern of %d segments from %q", len(p.segs), rules)
			}
		}
		// Any path: no panic, and the same answer twice.
		parts := strings.FieldsFunc(name, func(r rune) bool { return r == '/' })
		if len(parts) == 0 {
			return
		}
		p := strings.Join(parts, "/")
		for _, dir := range []bool{false, true} {
			first := ignored(pats, p, dir)
			if again := ignored(pats, p, dir); again != first {
				t.Fatalf("rules %q, path %q: answers differ", rules, p)
			}
		}
		// Negating each line afterwards undoes it.
		if !strings.ContainsAny(rules, "\n\r") && rules != "" && rules[0] != '!' && rules[0] != '#' && !strings.HasPrefix(rules, "\uFEFF") {
			both := parseGitignore("", []byte(rules+"\n!"+rules))
			if ignored(both, p, false) || ignored(both, p, true) {
				t.Fatalf("rules %q then its negation still ignore %q", rules, p)
			}
		}
		// An escaped name matches itself, anchored or not.
		plain := func(s string) bool { return utf8.ValidString(s) && !strings.ContainsAny(s, "\r\n") }
		seg := parts[len(parts)-1]
		if esc := escapeGlob(seg); plain(seg) && !ignored(parseGitignore("", []byte(esc)), p, false) {
			t.Fatalf("pattern %q does not match %q", esc, p)
		}
		if esc := "/" + escapeGlob(parts[0]); plain(parts[0]) && !ignored(parseGitignore("", []byte(esc)), parts[0], false) {
			t.Fatalf("pattern %q does not match %q", esc, parts[0])
		}
		// Where the syntaxes agree (one segment, no classes or escapes),
		// path.Match is the reference.
		if !strings.ContainsAny(rules, "[]\\/!# \r\n\uFEFF") && rules != "" && !strings.ContainsRune(seg, '/') && utf8.ValidString(seg) && utf8.ValidString(rules) {
			want, err := path.Match(rules, seg)
			if err == nil {
				got := ignored(parseGitignore("", []byte(rules)), seg, false)
				if got != want {
					t.Fatalf("pattern %q, name %q: ignored = %v, path.Match = %v", rules, seg, got, want)
				}
			}
		}
	})
}

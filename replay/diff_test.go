package replay

import (
	"fmt"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	a := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"
	b := "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n11\n"
	got := unifiedDiff("expected", "actual", a, b)
	// Five equal lines between the changes are fewer than twice the
	// context: one hunk.
	want := `--- expected
+++ actual
@@ -2,9 +2,10 @@
 2
 3
 4
-5
+five
 6
 7
 8
 9
 10
+11
`
	if got != want {
		t.Errorf("unifiedDiff =\n%s\nwant\n%s", got, want)
	}
	if d := unifiedDiff("a", "b", a, a); d != "" {
		t.Errorf("diff of equal texts = %q, want empty", d)
	}
}

func TestUnifiedDiffHunks(t *testing.T) {
	var a, b strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&a, "%d\n", i)
		switch i {
		case 3, 17:
			fmt.Fprintf(&b, "changed %d\n", i)
		default:
			fmt.Fprintf(&b, "%d\n", i)
		}
	}
	got := unifiedDiff("recorded", "replayed", a.String(), b.String())
	want := `--- recorded
+++ replayed
@@ -1,6 +1,6 @@
 1
 2
-3
+changed 3
 4
 5
 6
@@ -14,7 +14,7 @@
 14
 15
 16
-17
+changed 17
 18
 19
 20
`
	if got != want {
		t.Errorf("unifiedDiff =\n%s\nwant\n%s", got, want)
	}
}

// TestUnifiedDiffApplies checks that each diff, applied, turns a into b.
func TestUnifiedDiffApplies(t *testing.T) {
	cases := [][2]string{
		{"", "x\n"}, {"x\n", ""}, {"a\nb\nc\n", "c\nb\na\n"},
		{strings.Repeat("same\n", 20) + "old\n" + strings.Repeat("same\n", 20), strings.Repeat("same\n", 20) + "new\nnewer\n" + strings.Repeat("same\n", 20)},
		{"{\n  \"a\": 1\n}\n{\n  \"b\": 2\n}\n", "{\n  \"b\": 2\n}\n{\n  \"a\": 1\n}\n{\n}\n"},
	}
	for _, c := range cases {
		d := unifiedDiff("a", "b", c[0], c[1])
		if got := applyDiff(t, c[0], d); got != c[1] {
			t.Errorf("applying the diff of %q → %q gives %q\n%s", c[0], c[1], got, d)
		}
	}
}

// TestUnifiedDiffLarge checks that two changes far apart in a long text
// make a diff of those lines, not of everything between them.
func TestUnifiedDiffLarge(t *testing.T) {
	const n = 100_000
	a := make([]string, n)
	for i := range a {
		a[i] = fmt.Sprintf("line %d", i)
	}
	b := append([]string(nil), a...)
	b[10], b[n-10] = "first change", "second change"
	d := unifiedDiff("a", "b", strings.Join(a, "\n")+"\n", strings.Join(b, "\n")+"\n")
	var removed, added int
	for _, l := range strings.Split(d, "\n")[2:] {
		switch {
		case strings.HasPrefix(l, "-"):
			removed++
		case strings.HasPrefix(l, "+"):
			added++
		}
	}
	if removed != 2 || added != 2 {
		t.Errorf("diff of 2 changed lines among %d removes %d and adds %d lines, want 2 and 2", n, removed, added)
	}
}

// applyDiff applies a unified diff made with full hunk headers.
func applyDiff(t *testing.T, a, d string) string {
	t.Helper()
	src := splitLines(a)
	var out []string
	pos := 0 // next line of src to copy
	for _, l := range splitLines(d)[2:] {
		if strings.HasPrefix(l, "@@") {
			var as, ac, bs, bc int
			if _, err := fmt.Sscanf(l, "@@ -%d,%d +%d,%d @@", &as, &ac, &bs, &bc); err != nil {
				t.Fatalf("hunk header %q: %v", l, err)
			}
			start := as - 1
			if ac == 0 {
				start = as
			}
			out = append(out, src[pos:start]...)
			pos = start
			continue
		}
		switch l[0] {
		case ' ':
			out = append(out, src[pos])
			pos++
		case '-':
			pos++
		case '+':
			out = append(out, l[1:])
		}
	}
	out = append(out, src[pos:]...)
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

package replay

import (
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	a := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"
	b := "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n11\n"
	got := unifiedDiff("expected", "actual", a, b, 2)
	want := `--- expected
+++ actual
@@ -3,5 +3,5 @@
 3
 4
-5
+five
 6
 7
@@ -9,2 +9,3 @@
 9
 10
+11
`
	if got != want {
		t.Errorf("unifiedDiff =\n%s\nwant\n%s", got, want)
	}
	if d := unifiedDiff("a", "b", a, a, 3); d != "" {
		t.Errorf("diff of equal texts = %q, want empty", d)
	}
}

// TestUnifiedDiffApplies checks that each diff, applied, turns a into b.
func TestUnifiedDiffApplies(t *testing.T) {
	cases := [][2]string{
		{"", "x\n"}, {"x\n", ""}, {"a\nb\nc\n", "c\nb\na\n"},
		{strings.Repeat("same\n", 20) + "old\n" + strings.Repeat("same\n", 20), strings.Repeat("same\n", 20) + "new\nnewer\n" + strings.Repeat("same\n", 20)},
	}
	for _, c := range cases {
		d := unifiedDiff("a", "b", c[0], c[1], 3)
		if got := applyDiff(t, c[0], d); got != c[1] {
			t.Errorf("applying the diff of %q → %q gives %q\n%s", c[0], c[1], got, d)
		}
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
			if _, err := fmtSscanf(l, &as, &ac, &bs, &bc); err != nil {
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

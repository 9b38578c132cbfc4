package textdiff

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestUnifiedDiff(t *testing.T) {
	a := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"
	b := "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n11\n"
	got := Unified("expected", "actual", a, b)
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
		t.Errorf("Unified =\n%s\nwant\n%s", got, want)
	}
	if d := Unified("a", "b", a, a); d != "" {
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
	got := Unified("recorded", "replayed", a.String(), b.String())
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
		t.Errorf("Unified =\n%s\nwant\n%s", got, want)
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
		d := Unified("a", "b", c[0], c[1])
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
	d := Unified("a", "b", strings.Join(a, "\n")+"\n", strings.Join(b, "\n")+"\n")
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

func raws(vs ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(vs))
	for i, v := range vs {
		out[i] = json.RawMessage(v)
	}
	return out
}

// frame is an agent line as a normalized stream has it.
func frame(id int, method, text string) string {
	return fmt.Sprintf(`{"id":"<agentRpc:%d>","jsonrpc":"2.0","method":%q,"params":{"sessionId":"<session:1>","text":%q}}`, id, method, text)
}

// TestAlignMissingFrame: a frame the replay lacks is removed, and the
// frames after it, each changed (their ids shifted), pair with their
// twins, not with their neighbours.
func TestAlignMissingFrame(t *testing.T) {
	var a, b []string
	for i := 1; i <= 8; i++ {
		a = append(a, frame(i, fmt.Sprintf("m/%d", i), fmt.Sprintf("text %d", i)))
		switch {
		case i == 3:
		case i > 3:
			b = append(b, frame(i-1, fmt.Sprintf("m/%d", i), fmt.Sprintf("text %d", i)))
		default:
			b = append(b, a[i-1])
		}
	}
	got := Align(raws(a...), raws(b...))
	want := []Pair{{0, 0}, {1, 1}, {2, -1}, {3, 2}, {4, 3}, {5, 4}, {6, 5}, {7, 6}}
	if !slices.Equal(got, want) {
		t.Errorf("Align = %v, want %v", got, want)
	}
}

func TestAlign(t *testing.T) {
	x, y, z := `{"a":1,"b":"x"}`, `{"a":1,"b":"y"}`, `{"c":[1,2,3]}`
	for _, c := range []struct {
		name string
		a, b []json.RawMessage
		want []Pair
	}{
		{"equal", raws(x, z), raws(x, z), []Pair{{0, 0}, {1, 1}}},
		{"none", nil, nil, nil},
		{"all added", nil, raws(x, z), []Pair{{-1, 0}, {-1, 1}}},
		{"all removed", raws(x, z), nil, []Pair{{0, -1}, {1, -1}}},
		{"changed", raws(x, z), raws(y, z), []Pair{{0, 0}, {1, 1}}},
		{"added in the middle", raws(x, x), raws(x, z, x), []Pair{{0, 0}, {-1, 1}, {1, 2}}},
		{"swapped", raws(x, z), raws(z, x), []Pair{{0, -1}, {1, 0}, {-1, 1}}},
		{"not JSON", raws("a\nb", x), raws("a\nc", x), []Pair{{0, 0}, {1, 1}}},
	} {
		if got := Align(c.a, c.b); !slices.Equal(got, c.want) {
			t.Errorf("%s: Align = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestAlignLarge: two long streams, one frame missing near the start,
// align in well under a second, every later frame paired with its twin.
func TestAlignLarge(t *testing.T) {
	const n = 20_000
	var a, b []string
	for i := range n {
		f := frame(i, "session/update", fmt.Sprintf("chunk %d", i))
		a = append(a, f)
		if i != 10 {
			b = append(b, f)
		}
	}
	start := time.Now()
	got := Align(raws(a...), raws(b...))
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("aligning %d frames took %v", n, d)
	}
	if len(got) != n || got[10] != (Pair{10, -1}) || got[n-1] != (Pair{n - 1, n - 2}) {
		t.Errorf("Align: %d rows, row 10 %v, last %v", len(got), got[10], got[len(got)-1])
	}
}

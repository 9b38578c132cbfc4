// Package textdiff compares two lists of JSON values as text: the unified
// diff of their pretty forms that replay and diff print, and the
// alignment of the values that follows from it, which the pages show side
// by side, so that a page pairs the values as the printed diff does.
package textdiff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rogpeppe/go-internal/diff"
)

// Unified returns a unified diff of two texts, line by line, with three
// lines of context around each change; "" when they are equal. Its
// header is the two lines "--- aName" and "+++ bName".
//
// The diff is anchored (github.com/rogpeppe/go-internal/diff): the lines
// that occur once in each text anchor the matching, so that a changed
// value reads as its own lines rather than as a minimal edit that reuses
// unrelated closing braces, and it takes O(n log n) time at any size.
func Unified(aName, bName, a, b string) string {
	d := diff.Diff(aName, []byte(a), bName, []byte(b))
	if d == nil {
		return ""
	}
	// go-internal starts with a "diff aName bName" line, which says
	// nothing the --- and +++ lines do not.
	_, rest, _ := bytes.Cut(d, []byte("\n"))
	return string(rest)
}

// Pretty is values as the diff compares them: each indented by two
// spaces, on lines of its own.
func Pretty(values []json.RawMessage) string {
	var b bytes.Buffer
	for _, v := range values {
		// No index markers: after an insertion they would all differ and
		// bury the real change; the first divergence names the index.
		if err := json.Indent(&b, v, "", "  "); err != nil {
			b.Write(v)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// A Pair is one row of two aligned lists: A and B index them, -1 for the
// side that has no value in the row.
type Pair struct{ A, B int }

// Align pairs the values of a and b as their unified diff (of Pretty)
// does: each value with the value of the other side that most of its
// matched lines are matched with, when that value's most are matched with
// it too. A value the diff removes or adds whole pairs with nothing. The
// pairs are in order, the unpaired values of a before those of b between
// two pairs.
func Align(a, b []json.RawMessage) []Pair {
	ta, oa := owners(a)
	tb, ob := owners(b)
	// votes counts the lines the diff matches between two values.
	type vp struct{ a, b int }
	votes := map[vp]int{}
	matched(Unified("a", "b", ta, tb), len(oa), len(ob), func(x, y int) {
		votes[vp{oa[x], ob[y]}]++
	})
	bestB := make([]int, len(a)) // the value of b value i of a shares most lines with
	bestA := make([]int, len(b))
	nb, na := make([]int, len(a)), make([]int, len(b))
	for i := range bestB {
		bestB[i] = -1
	}
	for i := range bestA {
		bestA[i] = -1
	}
	for k, n := range votes {
		// Ties go to the earlier value, so that the choice is the same
		// from run to run.
		if n > nb[k.a] || n == nb[k.a] && k.b < bestB[k.a] {
			nb[k.a], bestB[k.a] = n, k.b
		}
		if n > na[k.b] || n == na[k.b] && k.a < bestA[k.b] {
			na[k.b], bestA[k.b] = n, k.a
		}
	}
	var out []Pair
	j := 0 // the next value of b not yet in out
	for i := range a {
		k := bestB[i]
		// The matched lines are in order on both sides, so mutual
		// choices are too; the check keeps out a choice that is not.
		if k < j || bestA[k] != i {
			out = append(out, Pair{i, -1})
			continue
		}
		for ; j < k; j++ {
			out = append(out, Pair{-1, j})
		}
		out = append(out, Pair{i, k})
		j = k + 1
	}
	for ; j < len(b); j++ {
		out = append(out, Pair{-1, j})
	}
	return out
}

// owners returns Pretty(values) and the index of the value each of its
// lines belongs to.
func owners(values []json.RawMessage) (string, []int) {
	text := Pretty(values)
	var own []int
	for i, v := range values {
		var b bytes.Buffer
		n := 1
		if json.Indent(&b, v, "", "  ") == nil {
			n += bytes.Count(b.Bytes(), []byte("\n"))
		} else {
			n += bytes.Count(v, []byte("\n"))
		}
		for range n {
			own = append(own, i)
		}
	}
	return text, own
}

// matched calls fn with each pair of lines, of texts of n and m lines,
// that the unified diff d of them (as Unified writes it) keeps: the lines
// outside its hunks and its context lines.
func matched(d string, n, m int, fn func(x, y int)) {
	x, y := 0, 0
	if d != "" {
		lines := strings.Split(d, "\n")
		for _, l := range lines[2:] { // after --- and +++
			if l == "" {
				continue
			}
			switch l[0] {
			case '@':
				var as, ac, bs, bc int
				if _, err := fmt.Sscanf(l, "@@ -%d,%d +%d,%d @@", &as, &ac, &bs, &bc); err != nil {
					panic(fmt.Sprintf("textdiff: go-internal/diff wrote the hunk header %q", l))
				}
				start := as - 1 // 1-based, but 0 for a hunk of no line of a
				if ac == 0 {
					start = as
				}
				for ; x < start; x, y = x+1, y+1 {
					fn(x, y)
				}
			case ' ':
				fn(x, y)
				x, y = x+1, y+1
			case '-':
				x++
			case '+':
				y++
			}
		}
	}
	for ; x < n && y < m; x, y = x+1, y+1 {
		fn(x, y)
	}
}

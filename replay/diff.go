package replay

import (
	"bytes"

	"github.com/rogpeppe/go-internal/diff"
)

// unifiedDiff returns a unified diff of two texts, line by line, with
// three lines of context around each change; "" when they are equal. Its
// header is the two lines "--- aName" and "+++ bName".
//
// The diff is anchored (github.com/rogpeppe/go-internal/diff): the lines
// that occur once in each text anchor the matching, so that a changed
// value reads as its own lines rather than as a minimal edit that reuses
// unrelated closing braces, and it takes O(n log n) time at any size.
func unifiedDiff(aName, bName, a, b string) string {
	d := diff.Diff(aName, []byte(a), bName, []byte(b))
	if d == nil {
		return ""
	}
	// go-internal starts with a "diff aName bName" line, which says
	// nothing the --- and +++ lines do not.
	_, rest, _ := bytes.Cut(d, []byte("\n"))
	return string(rest)
}

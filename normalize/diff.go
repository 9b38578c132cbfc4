package normalize

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"

	"github.com/acptap/acptap/mismatch"
)

// Missing stands, in the results of FirstDifference, for a value that one
// side lacks: an object member, or an array element past the end.
type Missing struct{}

// String returns "(missing)".
func (Missing) String() string { return "(missing)" }

// Absent marks Missing as an mismatch.Absent value, which reports show as
// "nothing".
func (Missing) Absent() {}

// FirstDifference returns the path of the first place where two JSON
// values differ, and the values there, or ok false if they are equal.
// Values are what encoding/json decodes (maps, slices, strings, numbers as
// float64 or json.Number, bools, nil), json.RawMessage, []json.RawMessage
// such as Stream returns, or anything json.Marshal accepts. Numbers are
// equal when their values are, exactly. Object members are visited in
// sorted order, so "first" is in document order for arrays and key order
// for objects.
//
// The path is in the syntax of path rules: $ for the root, .key or
// ["key"], and [index], as in $[3].params.update.content.text.
func FirstDifference(a, b any) (path string, av, bv any, ok bool) {
	walkDifferences(nil, a, b, func(p []step, x, y any) bool {
		path, av, bv, ok = formatPath(p), x, y, true
		return false
	})
	return path, av, bv, ok
}

// Mismatches returns every place where a and b differ, a member or an
// element that one side lacks (Missing), values of different types, or
// two different scalars, with its path as FirstDifference writes it and
// a's value as Recorded, b's as Live, in the order in which
// FirstDifference finds the first; nil if they are equal. Where one side
// lacks a member or element, or the types differ, that is one difference:
// what is inside is not compared.
func Mismatches(a, b any) []mismatch.Mismatch {
	var out []mismatch.Mismatch
	walkDifferences(nil, a, b, func(p []step, x, y any) bool {
		out = append(out, mismatch.Mismatch{Path: formatPath(p), Recorded: x, Live: y})
		return true
	})
	return out
}

// walkDifferences calls fn with the path and values of each difference of
// two values, in order, until fn returns false; it reports whether it
// went through. fn must not keep path, which is reused.
//
// A value of a type other than decode's (see plainView) is made plain
// where the walk meets it, not up front: a walk does not enter a part two
// values share, and the parts of normalized requests mostly are shared.
// Two values that cannot be made plain are compared by reflect.DeepEqual.
func walkDifferences(path []step, a, b any, fn func(path []step, a, b any) bool) bool {
	if !plainKind(a) || !plainKind(b) {
		pa, okA := plainView(a)
		pb, okB := plainView(b)
		if !okA || !okB {
			return reflect.DeepEqual(a, b) || fn(path, a, b)
		}
		return walkDifferences(path, pa, pb, fn)
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		if sameMap(x, y) {
			// One value, such as a part of two requests that
			// normalize.Requests normalized once.
			return true
		}
		union := make(map[string]bool, len(x)+len(y))
		for k := range x {
			union[k] = true
		}
		for k := range y {
			union[k] = true
		}
		for _, k := range sortedKeys(union) {
			va, inA := x[k]
			vb, inB := y[k]
			p := append(path, step{key: k})
			switch {
			case !inA:
				if !fn(p, Missing{}, vb) {
					return false
				}
			case !inB:
				if !fn(p, va, Missing{}) {
					return false
				}
			default:
				if !walkDifferences(p, va, vb, fn) {
					return false
				}
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok {
			break
		}
		if len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0]) {
			return true
		}
		for i := range max(len(x), len(y)) {
			p := append(path, step{index: i, isIndex: true})
			var more bool
			switch {
			case i >= len(x):
				more = fn(p, Missing{}, y[i])
			case i >= len(y):
				more = fn(p, x[i], Missing{})
			default:
				more = walkDifferences(p, x[i], y[i], fn)
			}
			if !more {
				return false
			}
		}
		return true
	case json.Number:
		if y, ok := b.(json.Number); ok && numbersEqual(x, y) {
			return true
		}
		return fn(path, a, b)
	}
	if a == b { // strings, bools, nil
		return true
	}
	return fn(path, a, b)
}

// plainKind reports whether v's own type, not looking inside it, is one
// of decode's.
func plainKind(v any) bool {
	switch v.(type) {
	case nil, bool, string, json.Number, Missing, map[string]any, []any:
		return true
	}
	return false
}

// formatPath returns a path in the syntax of path rules.
func formatPath(path []step) string {
	var b strings.Builder
	b.WriteString("$")
	for _, s := range path {
		if s.isIndex {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		} else {
			b.WriteString(keyPath(s.key))
		}
	}
	return b.String()
}

// keyPath returns the path step of an object key: .key for identifiers,
// ["key"] for the rest.
func keyPath(k string) string {
	ident := k != ""
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(isLetter(c) || c == '_' || i > 0 && '0' <= c && c <= '9') {
			ident = false
			break
		}
	}
	if ident {
		return "." + k
	}
	return "[" + string(encode(k)) + "]"
}

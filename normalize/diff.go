package normalize

import (
	"encoding/json"
	"reflect"
	"strconv"
)

// Missing stands, in the results of FirstDifference, for a value that one
// side lacks: an object member, or an array element past the end.
type Missing struct{}

// String returns "(missing)".
func (Missing) String() string { return "(missing)" }

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
	pa, okA := plain(a)
	pb, okB := plain(b)
	if !okA || !okB {
		if reflect.DeepEqual(a, b) {
			return "", nil, nil, false
		}
		return "$", a, b, true
	}
	return diff("$", pa, pb)
}

func diff(path string, a, b any) (string, any, any, bool) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
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
			p := path + keyPath(k)
			switch {
			case !inA:
				return p, Missing{}, vb, true
			case !inB:
				return p, va, Missing{}, true
			}
			if p, va, vb, ok := diff(p, va, vb); ok {
				return p, va, vb, true
			}
		}
		return "", nil, nil, false
	case []any:
		y, ok := b.([]any)
		if !ok {
			break
		}
		for i := range max(len(x), len(y)) {
			p := path + "[" + strconv.Itoa(i) + "]"
			switch {
			case i >= len(x):
				return p, Missing{}, y[i], true
			case i >= len(y):
				return p, x[i], Missing{}, true
			}
			if p, va, vb, ok := diff(p, x[i], y[i]); ok {
				return p, va, vb, true
			}
		}
		return "", nil, nil, false
	case json.Number:
		if y, ok := b.(json.Number); ok && numbersEqual(x, y) {
			return "", nil, nil, false
		}
		return path, a, b, true
	}
	if a == b { // strings, bools, nil
		return "", nil, nil, false
	}
	return path, a, b, true
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

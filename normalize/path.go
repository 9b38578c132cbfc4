package normalize

import (
	"strconv"
	"strings"
)

// A Path is where a value sits in a JSON value: the object keys and array
// indices from its root. It is what the rules learned by calibrate are
// made from; String writes it as FirstDifference and rules do
// ("$.params.update[0].text").
type Path []step

// String returns p in the syntax of FirstDifference and of path rules.
func (p Path) String() string { return formatPath(p) }

// Pattern returns p in the syntax of a rule's path, with every array
// index "[*]", any index, if anyIndex.
func (p Path) Pattern(anyIndex bool) string {
	var b strings.Builder
	b.WriteString("$")
	for _, s := range p {
		switch {
		case s.isIndex && anyIndex:
			b.WriteString("[*]")
		case s.isIndex:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		default:
			b.WriteString(keyPath(s.key))
		}
	}
	return b.String()
}

// Value returns the value at p in v, which must have one there.
func (p Path) Value(v any) any {
	for _, s := range p {
		switch x := v.(type) {
		case map[string]any:
			v = x[s.key]
		case []any:
			v = x[s.index]
		}
	}
	return v
}

// WalkDifferences calls fn with the path and the values of each place
// where a and b differ, in order, as FirstDifference finds the first of
// them, until fn returns false. fn must not keep the path, which is
// reused (clone it).
func WalkDifferences(a, b any, fn func(p Path, a, b any) bool) {
	walkDifferences(nil, a, b, func(p []step, a, b any) bool { return fn(p, a, b) })
}

// Plain converts v to the types of a decoded JSON value, as the rules and
// FirstDifference see it: a json.RawMessage decoded, numbers as
// json.Number, structs as objects. It reports false for a value that does
// not encode as JSON.
func Plain(v any) (any, bool) { return plain(v) }

// ApplyRules applies rules, in order, to v, the value at p, and to
// everything inside it, as a Normalizer applies its Options.Rules; a
// string is rewritten until no rule changes it. v is changed in place.
func ApplyRules(rules []Rule, v any, at Path) any { return applyRules(rules, v, at) }

// IsPlaceholder reports whether s is a placeholder as the default rules
// write them: '<', a name (a letter, then letters, digits or '_'),
// optionally ':' and a number, and '>' ("<tmp>", "<rpc:3>"). Placeholders
// are never rewritten again, which keeps normalization idempotent.
func IsPlaceholder(s string) bool { return isPlaceholder(s) }

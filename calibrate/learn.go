package calibrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/acptap/acptap/mismatch"

	"github.com/acptap/acptap/normalize"
)

// A Sample is one thing, such as an ACP frame or an LLM request, as several
// runs of the same agent session produced it, normalized: Values[0] as
// recorded, Values[1:] as replayed, each a value FirstDifference takes.
type Sample struct {
	// Name says where the thing is, in the comments of the rules: it
	// stands for the root "$" of the paths there, as in "agent output
	// $[7]" or "llm #2 $".
	Name   string
	Values []any
}

// Learned is a rule that Learn made, and what it made it from.
type Learned struct {
	Rule normalize.Rule
	// Sample is the index of the sample the rule was learned from, and
	// Path the place in it.
	Sample int
	Path   string
	// Values are the varying part of the values there, one per run in
	// the order of Sample.Values: for a string varying in part, the part;
	// for a presence rule, how many of its frames the recording and each
	// run had there.
	Values []string
}

// Learn returns rules that make the values of each sample equal, learned
// Diffy-style from what varies between them, or the places where they
// differ in more than values. A rule covers only what varied, as narrowly
// as the values allow:
//
//   - A string that varies in part, such as a path with a random suffix
//     (<tmp>/agent-home.Z8qUtU/notes.txt), gets a regexp over the varying
//     part, by the characters and lengths seen there ([0-9A-Za-z]{6}; any
//     number of digits for digits), with up to 24 bytes of the constant
//     text around it ("(agent-home\.)[0-9A-Za-z]{6}(/notes\.txt)" →
//     "${1}<random>${2}"), at the path of the value with any index for
//     array indices ($.params.update.content[*].content.text). Each part
//     that varies gets a rule of its own. The replacement names what
//     varied: <number> for digits, <hex>, <random> for other letters and
//     digits, <varies> for the rest. Parts whose words and punctuation
//     differ from run to run ("Z8qUtU", "a-b_cd") still get a rule each
//     where constant text separates them, as a per-run directory named in
//     several places of a system prompt does.
//   - A string that varies whole, and a number, get a regexp over the
//     whole value at its exact path ("^[0-9a-f]{16}$" → "<hex>").
//
// Values must have the same structure: objects with the same members,
// arrays of the same lengths, the same types. Where they do not, Learn
// reports a Structure conflict. Where all replayed runs agree and differ
// from the recording (with two replayed runs or more), it reports a
// Steady conflict: that is not noise. Where no narrow rule fits, a
// Shapeless one. It reports the first conflict of a sample only, and
// learns nothing more from it.
//
// Rules are learned sample by sample, in order, each on the values as the
// rules before it rewrite them, so that a value already covered (the same
// temporary directory in every frame) gets no second rule. Every rule is
// a fixed point, as ParseRules demands of user rules, and applying them
// all twice equals applying them once on every sample.
func Learn(samples []Sample) ([]Learned, []Conflict) {
	var learned []Learned
	var conflicts []Conflict
	var rules []normalize.Rule
	for i, smp := range samples {
		if len(smp.Values) < 2 {
			continue
		}
		vals, ok := plainValues(smp.Values)
		if !ok {
			for r := 1; r < len(smp.Values); r++ {
				if !reflect.DeepEqual(smp.Values[0], smp.Values[r]) {
					conflicts = append(conflicts, Conflict{Kind: Structure, Run: r, Mismatch: mismatch.Mismatch{Path: smp.Name, Recorded: smp.Values[0], Live: smp.Values[r]}})
					break
				}
			}
			continue
		}
		leaves, c := varyingLeaves(vals)
		if c != nil {
			c.Path = rooted(smp.Name, c.Path)
			conflicts = append(conflicts, *c)
			continue
		}
		for _, leaf := range leaves {
			values := make([]any, len(vals))
			for r, v := range vals {
				values[r] = normalize.ApplyRules(rules, leaf.Value(v), leaf)
			}
			if allEqual(values) {
				continue // covered by a rule learned before
			}
			if !allEqual(values[1:]) || len(values) == 2 {
				got, c := generalise(smp.Name, leaf, values)
				if c != nil {
					c.Path = rooted(smp.Name, leaf.String())
					conflicts = append(conflicts, *c)
					break
				}
				for _, g := range got {
					g.Sample = i
					learned = append(learned, g)
					rules = append(rules, g.Rule)
				}
				continue
			}
			conflicts = append(conflicts, Conflict{Kind: Steady, Run: 1, Mismatch: mismatch.Mismatch{Path: rooted(smp.Name, leaf.String()), Recorded: values[0], Live: values[1]}})
			break
		}
	}
	if len(conflicts) == 0 {
		conflicts = verify(samples, rules)
	}
	return learned, conflicts
}

// rooted returns path, a JSON path from "$", rooted at the sample named
// name instead, as a Conflict's Path says it ("agent output $[7]" and
// "$.params" give "agent output $[7].params").
func rooted(name, path string) string {
	if name == "" {
		return path
	}
	return name + path[1:]
}

// plainValues converts values with plain.
func plainValues(values []any) ([]any, bool) {
	out := make([]any, len(values))
	for i, v := range values {
		p, ok := normalize.Plain(v)
		if !ok {
			return nil, false
		}
		out[i] = p
	}
	return out, true
}

// varyingLeaves returns the paths, in the order found, of the strings and
// numbers that differ between vals[0] and another of vals, or the first
// place where they differ in more than such a value.
func varyingLeaves(vals []any) ([]normalize.Path, *Conflict) {
	var leaves []normalize.Path
	seen := map[string]bool{}
	for r := 1; r < len(vals); r++ {
		var conflict *Conflict
		normalize.WalkDifferences(vals[0], vals[r], func(p normalize.Path, a, b any) bool {
			if !sameScalarType(a, b) {
				conflict = &Conflict{Kind: Structure, Run: r, Mismatch: mismatch.Mismatch{Path: p.String(), Recorded: a, Live: b}}
				return false
			}
			if key := p.String(); !seen[key] {
				seen[key] = true
				leaves = append(leaves, slices.Clone(p))
			}
			return true
		})
		if conflict != nil {
			return nil, conflict
		}
	}
	return leaves, nil
}

// sameScalarType reports whether a and b are both strings or both numbers:
// the values Learn learns from.
func sameScalarType(a, b any) bool {
	switch a.(type) {
	case string:
		_, ok := b.(string)
		return ok
	case json.Number:
		_, ok := b.(json.Number)
		return ok
	}
	return false
}

func allEqual(values []any) bool {
	for _, v := range values[1:] {
		if _, _, _, differ := normalize.FirstDifference(values[0], v); differ {
			return false
		}
	}
	return true
}

// generalise returns the rules that make values (strings, or numbers, at
// path) equal, or a ConflictShapeless.
func generalise(name string, path normalize.Path, values []any) ([]Learned, *Conflict) {
	strs := make([]string, len(values))
	_, isNumber := values[0].(json.Number)
	for i, v := range values {
		switch x := v.(type) {
		case string:
			strs[i] = x
		case json.Number:
			strs[i] = string(x)
		}
	}
	shapeless := &Conflict{Kind: Shapeless, Run: firstDiffering(values), Mismatch: mismatch.Mismatch{Recorded: values[0], Live: values[firstDiffering(values)]}}
	if isNumber {
		if g, ok := wholeRule(name, path, strs, values); ok {
			return []Learned{g}, nil
		}
		return nil, shapeless
	}
	if slices.Contains(strs, "") {
		return nil, shapeless
	}
	if got, ok := partRules(name, path, strs, values); ok {
		return got, nil
	}
	if g, ok := anchoredRule(name, path, strs, values); ok {
		return []Learned{g}, nil
	}
	return nil, shapeless
}

func firstDiffering(values []any) int {
	for r := 1; r < len(values); r++ {
		if _, _, _, differ := normalize.FirstDifference(values[0], values[r]); differ {
			return r
		}
	}
	return 1
}

// A token is a run of ASCII letters and digits (a word) or one other
// character.
type token struct {
	s    string
	word bool
}

func tokenize(s string) []token {
	var ts []token
	for i := 0; i < len(s); {
		if isAlnum(s[i]) {
			j := i
			for j < len(s) && isAlnum(s[j]) {
				j++
			}
			ts = append(ts, token{s[i:j], true})
			i = j
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		ts = append(ts, token{s[i : i+size], false})
		i += size
	}
	return ts
}

// maxContext bounds the constant text a rule keeps on each side of the
// part it rewrites.
const maxContext = 24

// partRules returns a rule per part of the strings that varies, with the
// constant text around it, if the strings are alike but for such parts.
func partRules(name string, path normalize.Path, strs []string, values []any) ([]Learned, bool) {
	toks := make([][]token, len(strs))
	for i, s := range strs {
		toks[i] = tokenize(s)
	}
	var tries [][]span
	if s, ok := tokenSpans(toks); ok {
		tries = append(tries, s)
	} else {
		// The strings differ in their punctuation too. Several parts
		// apart, as a per-run directory named in several places of a
		// system prompt is, get a rule each; else one part from the
		// first difference to the last, split into tokens again so that
		// its context is whole tokens.
		d, several := diffSpans(toks)
		if several && len(d) > 1 {
			tries = append(tries, d)
		}
		if s, ok := charSpan(strs); ok {
			tries = append(tries, []span{s})
		}
		if several && len(d) == 1 {
			tries = append(tries, d)
		}
	}
	for _, spans := range tries {
		if out, ok := spansRules(name, path, spans, values); ok {
			return out, true
		}
	}
	return nil, false
}

// spansRules returns the rules of spans, if they make values equal.
func spansRules(name string, path normalize.Path, spans []span, values []any) ([]Learned, bool) {
	var out []Learned
	var rules []normalize.Rule
	for _, sp := range spans {
		g, ok := spanRule(name, path, sp)
		if !ok {
			return nil, false
		}
		out = append(out, g)
		rules = append(rules, g.Rule)
	}
	if !fixes(rules, path, values) {
		return nil, false
	}
	return out, true
}

// maxPart bounds the tokens of a part diffSpans finds, and resync is the
// number of tokens that must agree after it (fewer at the end).
const (
	maxPart = 64
	resync  = 4
)

// diffSpans returns the varying parts of strings whose tokens do not line
// up, a part being one word in one string and several in another
// ("Z8qUtU" and "a-b_c"): after each difference, the first place where
// resync tokens agree again in every string, within maxPart tokens, ends
// the part. Each part must be non-empty in every string.
func diffSpans(toks [][]token) ([]span, bool) {
	pos := make([]int, len(toks))
	varying := make([]bool, len(toks[0])) // the tokens of toks[0] in a part
	var spans []span
	var ends []int // where each part ends in toks[0]
	for {
		for allBefore(toks, pos) && sameAt(toks, pos) {
			for r := range pos {
				pos[r]++
			}
		}
		if !allBefore(toks, pos) {
			for r := range pos {
				if pos[r] != len(toks[r]) {
					return nil, false // a part empty at the end of one
				}
			}
			break
		}
		end, ok := resyncAt(toks, pos)
		if !ok {
			return nil, false
		}
		sp := span{mids: make([]string, len(toks))}
		for r := range toks {
			sp.mids[r] = joinTokens(toks[r][pos[r]:end[r]])
			lo := 0
			for _, t := range toks[r][:pos[r]] {
				lo += len(t.s)
			}
			if inPlaceholder(joinTokens(toks[r]), lo, lo+len(sp.mids[r])) {
				return nil, false
			}
		}
		sp.parts = []spanPart{{words: sp.mids}}
		sp.before, sp.atStart = contextBefore(toks[0][:pos[0]], varying[:pos[0]])
		for j := pos[0]; j < end[0]; j++ {
			varying[j] = true
		}
		spans = append(spans, sp)
		ends = append(ends, end[0])
		copy(pos, end)
	}
	for i := range spans {
		spans[i].after, spans[i].atEnd = contextAfter(toks[0][ends[i]:], varying[ends[i]:])
	}
	return spans, len(spans) > 0
}

// allBefore reports whether pos is before the end of every token list.
func allBefore(toks [][]token, pos []int) bool {
	for r, ts := range toks {
		if pos[r] >= len(ts) {
			return false
		}
	}
	return true
}

// sameAt reports whether the tokens at pos are the same in every list.
func sameAt(toks [][]token, pos []int) bool {
	for r := 1; r < len(toks); r++ {
		if toks[r][pos[r]].s != toks[0][pos[0]].s {
			return false
		}
	}
	return true
}

// resyncAt returns where, past pos, the token lists agree again: the
// nearest end of a part in toks[0] after which resync tokens (or all
// that are left, to the end of every list) stand in every list within
// maxPart tokens of pos.
func resyncAt(toks [][]token, pos []int) ([]int, bool) {
	t0 := toks[0]
	for e0 := pos[0] + 1; e0 <= min(len(t0), pos[0]+maxPart); e0++ {
		w := min(resync, len(t0)-e0)
		window := t0[e0 : e0+w]
		end := []int{e0}
		for r := 1; r < len(toks); r++ {
			ts := toks[r]
			found := -1
			for e := pos[r] + 1; e <= min(len(ts)-w, pos[r]+maxPart); e++ {
				if w < resync && e+w != len(ts) {
					continue // fewer than resync tokens agree only at the end
				}
				if tokensEqual(ts[e:e+w], window) {
					found = e
					break
				}
			}
			if found < 0 {
				break
			}
			end = append(end, found)
		}
		if len(end) == len(toks) {
			return end, true
		}
	}
	return nil, false
}

func tokensEqual(a, b []token) bool {
	return slices.EqualFunc(a, b, func(x, y token) bool { return x.s == y.s })
}

// A span is a varying part of some strings: before, the constant text
// before it (as tokens, reaching the start of the strings if atStart),
// mids the part in each string, and after the constant text after it.
type span struct {
	before, after  []token
	atStart, atEnd bool
	// parts is the pattern of the part: literal text, or the index of a
	// varying word in words.
	parts []spanPart
	mids  []string // the whole part in each string
}

type spanPart struct {
	lit   string   // a constant token
	words []string // or a varying word, in each string
}

// tokenSpans returns the varying parts of strings whose tokens line up,
// differing only in words: each run of varying words, with the single
// constant characters other than white space that join them (a1b2-c3d4),
// is a part.
func tokenSpans(toks [][]token) ([]span, bool) {
	n := len(toks[0])
	for _, ts := range toks[1:] {
		if len(ts) != n {
			return nil, false
		}
	}
	varying := make([]bool, n)
	for k := range n {
		t0 := toks[0][k]
		for _, ts := range toks[1:] {
			switch {
			case ts[k].word != t0.word:
				return nil, false
			case !t0.word && ts[k].s != t0.s:
				return nil, false
			case ts[k].s != t0.s:
				varying[k] = true
			}
		}
	}
	var spans []span
	for k := 0; k < n; k++ {
		if !varying[k] {
			continue
		}
		hi := k + 1
		for hi+1 < n && varying[hi+1] && !varying[hi] && joiner(toks[0][hi].s) {
			hi += 2
		}
		sp := span{mids: make([]string, len(toks))}
		for j := k; j < hi; j++ {
			if !varying[j] {
				sp.parts = append(sp.parts, spanPart{lit: toks[0][j].s})
				continue
			}
			words := make([]string, len(toks))
			for r, ts := range toks {
				words[r] = ts[j].s
			}
			sp.parts = append(sp.parts, spanPart{words: words})
		}
		for r, ts := range toks {
			var b strings.Builder
			for j := k; j < hi; j++ {
				b.WriteString(ts[j].s)
			}
			sp.mids[r] = b.String()
		}
		for r, ts := range toks {
			lo := 0
			for _, t := range ts[:k] {
				lo += len(t.s)
			}
			if inPlaceholder(joinTokens(ts), lo, lo+len(sp.mids[r])) {
				return nil, false
			}
		}
		sp.before, sp.atStart = contextBefore(toks[0][:k], varying[:k])
		sp.after, sp.atEnd = contextAfter(toks[0][hi:], varying[hi:])
		spans = append(spans, sp)
		k = hi - 1
	}
	return spans, len(spans) > 0
}

// joiner reports whether a constant character between two varying words
// makes them one part, as the dashes of a random id do.
func joiner(s string) bool {
	return len(s) == 1 && strings.IndexByte("-_.,:+/=", s[0]) >= 0
}

// contextBefore returns the constant tokens that end toks, back to a
// varying one (varying[i] says whether toks[i] is), a newline (included)
// or maxContext bytes, and whether they reach the start of toks.
func contextBefore(toks []token, varying []bool) ([]token, bool) {
	size := 0
	i := len(toks)
	for i > 0 && !varying[i-1] {
		t := toks[i-1]
		if size+len(t.s) > maxContext {
			if size == 0 {
				// One long word: its end.
				cut := len(t.s) - maxContext
				for cut < len(t.s) && !utf8.RuneStart(t.s[cut]) {
					cut++
				}
				return []token{{t.s[cut:], t.word}}, false
			}
			break
		}
		size += len(t.s)
		i--
		if t.s == "\n" {
			break
		}
	}
	return toks[i:], i == 0
}

// contextAfter is contextBefore forward.
func contextAfter(toks []token, varying []bool) ([]token, bool) {
	size := 0
	i := 0
	for i < len(toks) && !varying[i] {
		t := toks[i]
		if size+len(t.s) > maxContext {
			if size == 0 {
				cut := maxContext
				for cut > 0 && !utf8.RuneStart(t.s[cut]) {
					cut--
				}
				return []token{{t.s[:cut], t.word}}, false
			}
			break
		}
		size += len(t.s)
		i++
		if t.s == "\n" {
			break
		}
	}
	return toks[:i], i == len(toks)
}

// charSpan returns the part of strs from their first difference to their
// last, widened to whole words, if it is not empty in any of them.
func charSpan(strs []string) (span, bool) {
	pre, suf := affixes(strs)
	sp := span{mids: make([]string, len(strs))}
	for r, s := range strs {
		sp.mids[r] = s[len(pre) : len(s)-len(suf)]
		if sp.mids[r] == "" || inPlaceholder(s, len(pre), len(s)-len(suf)) {
			return span{}, false
		}
	}
	sp.parts = []spanPart{{words: sp.mids}}
	before := tokenize(pre)
	sp.before, sp.atStart = contextBefore(before, make([]bool, len(before)))
	after := tokenize(suf)
	sp.after, sp.atEnd = contextAfter(after, make([]bool, len(after)))
	return sp, true
}

// affixes returns the longest common prefix and suffix of strs that do not
// overlap in any of them, end at rune boundaries, and do not cut a word
// that the varying part continues.
func affixes(strs []string) (pre, suf string) {
	pre = strs[0]
	shortest := len(strs[0])
	for _, s := range strs[1:] {
		n := 0
		for n < len(pre) && n < len(s) && pre[n] == s[n] {
			n++
		}
		pre = pre[:n]
		shortest = min(shortest, len(s))
	}
	for len(pre) > 0 && !runeBoundaries(strs, len(pre)) {
		pre = pre[:len(pre)-1]
	}
	for len(pre) > 0 && isAlnum(pre[len(pre)-1]) && continues(strs, len(pre)) {
		pre = pre[:len(pre)-1]
	}
	// The suffix, from what is left after the prefix.
	n := 0
	for ; n < shortest-len(pre); n++ {
		c := strs[0][len(strs[0])-1-n]
		same := true
		for _, s := range strs[1:] {
			if s[len(s)-1-n] != c {
				same = false
				break
			}
		}
		if !same {
			break
		}
	}
	for n > 0 && !utf8.RuneStart(strs[0][len(strs[0])-n]) {
		n--
	}
	for n > 0 && isAlnum(strs[0][len(strs[0])-n]) && continuesBack(strs, n) {
		n--
	}
	return pre, strs[0][len(strs[0])-n:]
}

// runeBoundaries reports whether i is a rune boundary of every string.
func runeBoundaries(strs []string, i int) bool {
	for _, s := range strs {
		if i < len(s) && !utf8.RuneStart(s[i]) {
			return false
		}
	}
	return true
}

// continues reports whether a word goes on at byte i of one of strs.
func continues(strs []string, i int) bool {
	for _, s := range strs {
		if i < len(s) && isAlnum(s[i]) {
			return true
		}
	}
	return false
}

// continuesBack reports whether a word goes on before the last n bytes of
// one of strs.
func continuesBack(strs []string, n int) bool {
	for _, s := range strs {
		if i := len(s) - n - 1; i >= 0 && isAlnum(s[i]) {
			return true
		}
	}
	return false
}

// inPlaceholder reports whether s[lo:hi] is inside a placeholder of s, as
// the number of <uuid:2> is: placeholders are the normalizer's, and
// rewriting them would unlink the values they link.
func inPlaceholder(s string, lo, hi int) bool {
	open := strings.LastIndexByte(s[:lo], '<')
	if open < 0 || strings.IndexByte(s[open:lo], '>') >= 0 {
		return false
	}
	end := strings.IndexByte(s[hi:], '>')
	if end < 0 || strings.IndexByte(s[hi:hi+end], '<') >= 0 {
		return false
	}
	return normalize.IsPlaceholder(s[open : hi+end+1])
}

// spanRule returns the rule of one varying part.
func spanRule(name string, path normalize.Path, sp span) (Learned, bool) {
	var mid strings.Builder
	kinds := map[string]bool{}
	for _, p := range sp.parts {
		if p.words == nil {
			mid.WriteString(regexp.QuoteMeta(p.lit))
			continue
		}
		pattern, kind, ok := charClass(p.words)
		if !ok {
			return Learned{}, false
		}
		mid.WriteString(pattern)
		kinds[kind] = true
	}
	placeholder := "<random>"
	switch {
	case kinds["varies"]:
		placeholder = "<varies>"
	case len(kinds) == 1 && kinds["number"]:
		placeholder = "<number>"
	case len(kinds) == 1 && kinds["hex"]:
		placeholder = "<hex>"
	}
	var re, repl strings.Builder
	group := 0
	if sp.atStart {
		re.WriteString("^")
	}
	if before := joinTokens(sp.before); before != "" {
		group++
		re.WriteString("(" + regexp.QuoteMeta(before) + ")")
		repl.WriteString("${" + strconv.Itoa(group) + "}")
	}
	re.WriteString(mid.String())
	repl.WriteString(placeholder)
	if after := joinTokens(sp.after); after != "" {
		group++
		re.WriteString("(" + regexp.QuoteMeta(after) + ")")
		repl.WriteString("${" + strconv.Itoa(group) + "}")
	}
	if sp.atEnd {
		re.WriteString("$")
	}
	// With constant text on either side, the rule holds for that text
	// anywhere in the value's array; without, only at its exact path.
	return learnedRule(name, path, group > 0, re.String(), repl.String(), sp.mids)
}

func joinTokens(ts []token) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.s)
	}
	return b.String()
}

// wholeRule returns the rule that rewrites the whole of each value, at its
// exact path, by the characters and lengths of strs, the values' text.
func wholeRule(name string, path normalize.Path, strs []string, values []any) (Learned, bool) {
	pattern, kind, ok := charClass(strs)
	if !ok {
		return Learned{}, false
	}
	g, ok := learnedRule(name, path, false, "^"+pattern+"$", "<"+kind+">", strs)
	if !ok || !fixes([]normalize.Rule{g.Rule}, path, values) {
		return Learned{}, false
	}
	return g, true
}

// anchoredRule is the rule of last resort for strings: the whole value,
// its constant prefix and suffix spelled out, at its exact path.
func anchoredRule(name string, path normalize.Path, strs []string, values []any) (Learned, bool) {
	pre, suf := affixes(strs)
	mids := make([]string, len(strs))
	for r, s := range strs {
		mids[r] = s[len(pre) : len(s)-len(suf)]
		if inPlaceholder(s, len(pre), len(s)-len(suf)) {
			return Learned{}, false
		}
	}
	pattern, kind, ok := charClass(mids)
	if !ok {
		lo, hi := lengths(mids)
		pattern, kind = fmt.Sprintf("(?s:.{%d,%d})", lo, hi), "varies"
	}
	if slices.Contains(mids, "") {
		pattern = "(?:" + pattern + ")?"
	}
	re := "^" + regexp.QuoteMeta(pre) + pattern + regexp.QuoteMeta(suf) + "$"
	repl := strings.ReplaceAll(pre, "$", "$$") + "<" + kind + ">" + strings.ReplaceAll(suf, "$", "$$")
	g, ok := learnedRule(name, path, false, re, repl, mids)
	if !ok || !fixes([]normalize.Rule{g.Rule}, path, values) {
		return Learned{}, false
	}
	return g, true
}

// charClass returns a pattern that matches each of strs whole, by the
// characters and lengths seen, and the kind of what it matches: "number"
// for digits (any number of them), "hex" for hex digits of one case,
// "random" for letters and digits, "varies" for other characters. It
// fails for '<' and '>', which placeholders are made of, and for control
// characters.
func charClass(strs []string) (pattern, kind string, ok bool) {
	var digit, lower, upper, hexLower, hexUpper = false, false, false, true, true
	var others []rune
	for _, s := range strs {
		for _, c := range s {
			switch {
			case '0' <= c && c <= '9':
				digit = true
			case 'a' <= c && c <= 'z':
				lower = true
				hexLower = hexLower && c <= 'f'
			case 'A' <= c && c <= 'Z':
				upper = true
				hexUpper = hexUpper && c <= 'F'
			case c == '<' || c == '>' || c < ' ' || c == 0x7f:
				return "", "", false
			default:
				if !slices.Contains(others, c) {
					others = append(others, c)
				}
			}
		}
	}
	slices.Sort(others)
	var class string
	switch {
	case !lower && !upper && digit:
		class, kind = "0-9", "number"
	case !lower && !upper:
		kind = "varies"
	case lower && !upper && hexLower:
		class, kind = "0-9a-f", "hex"
	case upper && !lower && hexUpper:
		class, kind = "0-9A-F", "hex"
	case lower && upper:
		class, kind = "0-9A-Za-z", "random"
	case lower:
		class, kind = "0-9a-z", "random"
	default:
		class, kind = "0-9A-Z", "random"
	}
	for _, c := range others {
		if c != '-' && c != '_' {
			kind = "varies"
		}
		if c == '-' {
			class += `\-`
		} else {
			class += regexp.QuoteMeta(string(c))
		}
	}
	if class == "" {
		return "", "", false
	}
	lo, hi := lengths(strs)
	quant := "{" + strconv.Itoa(lo) + "}"
	switch {
	case kind == "number" && len(others) == 0:
		quant = "+"
	case lo != hi:
		quant = "{" + strconv.Itoa(lo) + "," + strconv.Itoa(hi) + "}"
	}
	return "[" + class + "]" + quant, kind, true
}

// lengths returns the least and the greatest length in runes of strs.
func lengths(strs []string) (lo, hi int) {
	lo = -1
	for _, s := range strs {
		n := utf8.RuneCountInString(s)
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return lo, hi
}

// learnedRule makes the rule {path, regexp, replace} through ParseRules,
// which checks it as it checks user rules, with a comment saying where it
// comes from.
func learnedRule(name string, at normalize.Path, anyIndex bool, re, repl string, seen []string) (Learned, bool) {
	var examples []string
	for i, s := range seen {
		if i == 4 {
			examples = append(examples, "…")
			break
		}
		if len(s) > maxContext {
			s = s[:cutRune(s, maxContext)] + "…"
		}
		examples = append(examples, string(encodeJSON(s)))
	}
	where := at.String()
	if name != "" {
		where = name + where[1:]
	}
	comment := "calibrate: varies at " + where + ": " + strings.Join(examples, ", ")
	src := encodeJSON([]map[string]string{{"path": at.Pattern(anyIndex), "regexp": re, "replace": repl, "comment": comment}})
	rules, err := normalize.ParseRules(src)
	if err != nil {
		return Learned{}, false
	}
	return Learned{Rule: rules[0], Path: at.String(), Values: slices.Clone(seen)}, true
}

// cutRune returns the largest rune boundary of s at or before n.
func cutRune(s string, n int) int {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// fixes reports whether rules, applied at path, make values equal, and
// leave what they make as it is when applied again.
func fixes(rules []normalize.Rule, path normalize.Path, values []any) bool {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = normalize.ApplyRules(rules, v, path)
		if again := normalize.ApplyRules(rules, out[i], path); !reflect.DeepEqual(again, out[i]) {
			return false
		}
	}
	return allEqual(out)
}

// verify checks that rules make the values of every sample equal, and that
// applying them twice equals applying them once, and returns the places
// where they do not.
func verify(samples []Sample, rules []normalize.Rule) []Conflict {
	var conflicts []Conflict
	for _, smp := range samples {
		if len(smp.Values) < 2 {
			continue
		}
		vals, ok := plainValues(smp.Values)
		if !ok {
			continue
		}
		once := make([]any, len(vals))
		for r, v := range vals {
			once[r] = normalize.ApplyRules(rules, v, nil)
			c, _ := normalize.Plain(once[r])
			if twice := normalize.ApplyRules(rules, c, nil); !reflect.DeepEqual(twice, once[r]) {
				path, a, b, _ := normalize.FirstDifference(once[r], twice)
				conflicts = append(conflicts, Conflict{Kind: Shapeless, Run: r, Mismatch: mismatch.Mismatch{Path: rooted(smp.Name, path), Recorded: a, Live: b}})
				break
			}
		}
		for r := 1; r < len(once); r++ {
			if path, a, b, differ := normalize.FirstDifference(once[0], once[r]); differ {
				conflicts = append(conflicts, Conflict{Kind: Shapeless, Run: r, Mismatch: mismatch.Mismatch{Path: rooted(smp.Name, path), Recorded: a, Live: b}})
				break
			}
		}
	}
	return conflicts
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// encodeJSON returns v as JSON, with '<', '>' and '&' as they are, which
// placeholders and rules are full of.
func encodeJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(v) // strings and maps of them always encode
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

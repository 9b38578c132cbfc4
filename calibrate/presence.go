package calibrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/acptap/acptap/mismatch"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/replay/driver"
)

// learnPresence returns the presence rules (see normalize.ParseRules)
// that describe the frames some of the runs and the recording have and
// others lack, or the places where frames differ in a way no such rule
// describes. It compares the normalized agent output of the recording
// and of each run per turn and stream (replay.Result.Transcripts): where
// a stream has more values in some than in others, the values one side
// has more must be of one kind and
//
//   - for a tool call, or another stream of updates, the last ones of the
//     stream, never its first: {"optional": "update KIND STATUS", "at":
//     "last"};
//   - for the agent's requests, of one method: {"optional": "request
//     METHOD", "after": KIND}, with the kind of the frame before each
//     when it is the same for all of them, else without "after";
//   - for a notification other than session/update, of one method:
//     {"optional": "notification METHOD"}.
//
// With the frames they name left out, every stream must have the same
// kinds of values in every run. A frame that every run has and the
// recording lacks, or the other way round, is no noise: with two runs or
// more, that is a Steady conflict. learnPresence learns nothing when the
// runs have another number of turns: agentSamples reports that.
func learnPresence(results []*replay.Result) ([]Learned, []Conflict) {
	ts := []*normalize.Transcript{results[0].Transcripts[0]}
	for _, res := range results {
		ts = append(ts, res.Transcripts[1])
	}
	for _, t := range ts {
		if t == nil || t.Order != normalize.ByStream || len(t.Turns) != len(ts[0].Turns) {
			return nil, nil
		}
	}
	var learned []Learned
	seen := map[string]bool{}
	numbers := map[string]int{} // turns so far by session
	for k := range ts[0].Turns {
		numbers[ts[0].Turns[k].Session]++
		turn := numbers[ts[0].Turns[k].Session]
		keys, streams := turnStreams(ts, k)
		for _, key := range keys {
			ss := streams[key]
			if sameLengths(ss) {
				continue
			}
			where := fmt.Sprintf("agent output turn %d, %s", turn, key.name)
			if key.session != "" && key.session != "<sessionId:1>" {
				where += " of " + key.session
			}
			if ts[0].Turns[k].Session != "" {
				where += " (session " + ts[0].Turns[k].Session + ")"
			}
			l, c := presenceRule(where, key.name, ss)
			if c != nil {
				return nil, []Conflict{*c}
			}
			if s := l.Rule.WithComment("").String(); !seen[s] {
				seen[s] = true
				learned = append(learned, l)
			}
		}
	}
	return learned, nil
}

type streamKey struct{ name, session string }

// turnStreams returns the streams of turn k of each of ts, by name and
// session, in order of first appearance; a stream one lacks is empty
// there.
func turnStreams(ts []*normalize.Transcript, k int) ([]streamKey, map[streamKey][]normalize.Stream) {
	var keys []streamKey
	streams := map[streamKey][]normalize.Stream{}
	for i, t := range ts {
		for _, s := range t.Turns[k].Streams {
			key := streamKey{s.Name, s.Session}
			if _, ok := streams[key]; !ok {
				keys = append(keys, key)
				streams[key] = make([]normalize.Stream, len(ts))
			}
			streams[key][i] = s
		}
	}
	return keys, streams
}

func sameLengths(ss []normalize.Stream) bool {
	for _, s := range ss[1:] {
		if len(s.Values) != len(ss[0].Values) {
			return false
		}
	}
	return true
}

// presenceRule returns the rule that makes the streams ss, one of each
// of the recording and the runs, alike in the kinds of their values, or
// the conflict that says why none does.
func presenceRule(where, name string, ss []normalize.Stream) (Learned, *Conflict) {
	kinds := make([][]string, len(ss))
	for i, s := range ss {
		for _, v := range s.Values {
			kinds[i] = append(kinds[i], normalize.FrameKind(v))
		}
	}
	structure := func() *Conflict {
		c := streamConflict(where, ss)
		return &c
	}
	var src string
	switch {
	case name == normalize.RequestsStream:
		what, ok := oneMore(kinds)
		if !ok || !strings.HasPrefix(what, "request ") {
			return Learned{}, structure()
		}
		var afters []string
		for i, s := range ss {
			for j, k := range kinds[i] {
				if k == what && j < len(s.After) {
					afters = append(afters, s.After[j])
				}
			}
		}
		src = fmt.Sprintf(`{"optional":%q}`, what)
		if len(afters) > 0 && afters[0] != "" && !slices.ContainsFunc(afters, func(a string) bool { return a != afters[0] }) {
			src = fmt.Sprintf(`{"optional":%q,"after":%q}`, what, afters[0])
		}
	case strings.HasSuffix(name, " notifications"):
		what, ok := oneMore(kinds)
		if !ok || !strings.HasPrefix(what, "notification ") {
			return Learned{}, structure()
		}
		src = fmt.Sprintf(`{"optional":%q}`, what)
	case name == normalize.JunkStream:
		return Learned{}, structure()
	default:
		short := len(kinds[0])
		for _, k := range kinds {
			short = min(short, len(k))
		}
		if short == 0 {
			// A stream missing whole, as a tool call is: no presence.
			return Learned{}, structure()
		}
		var what string
		for _, k := range kinds {
			if len(k) > short {
				what = k[short]
				break
			}
		}
		if !strings.HasPrefix(what, "update ") {
			return Learned{}, structure()
		}
		src = fmt.Sprintf(`{"optional":%q,"at":%q}`, what, normalize.PresenceLast)
	}
	rules, err := normalize.ParseRules([]byte("[" + src + "]"))
	if err != nil {
		return Learned{}, structure()
	}
	rule := rules[0]
	// The rule must leave the streams alike, and what it leaves out
	// must vary among the runs, not only against the recording.
	kept := make([][]string, len(ss))
	counts := make([]int, len(ss))
	for i, s := range ss {
		drop := dropped(rule, kinds[i], s.After)
		for j, k := range kinds[i] {
			if drop[j] {
				counts[i]++
			} else {
				kept[i] = append(kept[i], k)
			}
		}
	}
	for i := range kept[1:] {
		if !slices.Equal(kept[i+1], kept[0]) {
			return Learned{}, structure()
		}
	}
	what, _, _ := rule.Optional()
	if len(counts) > 2 && !slices.ContainsFunc(counts[2:], func(n int) bool { return n != counts[1] }) {
		c := streamConflict(where, ss)
		c.Kind, c.Run = Steady, 1
		return Learned{}, &c
	}
	seen := make([]string, len(counts))
	for i, n := range counts {
		seen[i] = fmt.Sprint(n)
	}
	comment := fmt.Sprintf("calibrate: sent in some runs only at %s: %s; recorded %s, runs %s", where, kindWords(what), seen[0], strings.Join(seen[1:], " "))
	return Learned{Rule: rule.WithComment(comment), Sample: -1, Path: where, Values: seen}, nil
}

// kindWords says what frames of kind k are, for a rule's comment.
func kindWords(k string) string {
	word, rest, _ := strings.Cut(k, " ")
	switch word {
	case "request":
		return "an agent request " + rest
	case "notification":
		return "a notification " + rest
	}
	kind, status, ok := strings.Cut(rest, " ")
	if ok {
		return kind + " (" + status + ")"
	}
	return kind
}

// oneMore returns the one kind of value whose number differs among the
// kinds' lists.
func oneMore(kinds [][]string) (string, bool) {
	var what string
	counts := make([]map[string]int, len(kinds))
	for i, ks := range kinds {
		counts[i] = map[string]int{}
		for _, k := range ks {
			counts[i][k]++
		}
	}
	for i := range counts {
		for k := range counts[i] {
			for j := range counts {
				if counts[j][k] != counts[i][k] {
					if what != "" && what != k {
						return "", false
					}
					what = k
				}
			}
		}
	}
	return what, what != ""
}

// dropped says which values of a stream, of kinds kinds and with the
// kinds before them after (normalize.Stream.After), the presence rule
// leaves out, as the normalizer does (see normalize.ParseRules).
func dropped(rule normalize.Rule, kinds, after []string) []bool {
	what, at, before := rule.Optional()
	drop := make([]bool, len(kinds))
	match := func(k string) bool {
		return k == what || strings.HasPrefix(k, what+" ") && strings.HasPrefix(what, "update ")
	}
	switch {
	case at == normalize.PresenceLast:
		for j := len(kinds) - 1; j > 0 && match(kinds[j]); j-- {
			drop[j] = true
		}
	default:
		for j, k := range kinds {
			drop[j] = match(k) && (before == "" || j < len(after) && after[j] == before)
		}
	}
	return drop
}

// streamConflict is the Structure conflict of streams that differ in more
// than values: the first place where a run has a value more or fewer
// than the recording, or one of another kind.
func streamConflict(where string, ss []normalize.Stream) Conflict {
	rec := ss[0].Values
	for r, s := range ss[1:] {
		for j := range max(len(rec), len(s.Values)) {
			var a, b any = normalize.Missing{}, normalize.Missing{}
			if j < len(rec) {
				a = decoded(rec[j])
			}
			if j < len(s.Values) {
				b = decoded(s.Values[j])
			}
			if j < len(rec) && j < len(s.Values) && normalize.FrameKind(rec[j]) == normalize.FrameKind(s.Values[j]) {
				continue
			}
			return Conflict{Kind: Structure, Run: r + 1, Mismatch: mismatch.Mismatch{Path: fmt.Sprintf("%s, value %d", where, j+1), Recorded: a, Live: b}}
		}
	}
	return Conflict{Kind: Structure, Run: 1, Mismatch: mismatch.Mismatch{Path: where, Recorded: normalize.Missing{}, Live: normalize.Missing{}}}
}

// presenceError reports whether d is the editor side's failure that an
// agent request missing or extra makes (a *driver.MissingError or
// *driver.MismatchError), and of which method: learnPresence judges it
// from the agent's output.
func presenceError(d replay.Divergence) (string, bool) {
	if d.Kind != replay.EditorFailed {
		return "", false
	}
	var missing *driver.MissingError
	if errors.As(d.Err, &missing) {
		return missing.Method, true
	}
	var extra *driver.MismatchError
	if errors.As(d.Err, &extra) {
		return extra.Method, true
	}
	return "", false
}

// decoded returns a normalized value decoded, numbers as json.Number, or
// its text if it is not JSON.
func decoded(v json.RawMessage) any {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if dec.Decode(&x) != nil {
		return string(v)
	}
	return x
}

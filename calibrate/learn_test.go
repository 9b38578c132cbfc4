package calibrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acptap/acptap/mismatch"

	"github.com/acptap/acptap/normalize"

	"github.com/acptap/acptap/lane"
)

// frames returns one sample of a tool_call_update frame per run, each
// with its text, rawOutput token and count.
func toolSample(name string, runs ...[3]string) Sample {
	smp := Sample{Name: name}
	for _, r := range runs {
		smp.Values = append(smp.Values, json.RawMessage(fmt.Sprintf(
			`{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call_update","status":"completed","content":[{"type":"content","content":{"type":"text","text":%q}}],"rawOutput":{"token":%q,"count":%s}}}}`,
			r[0], r[1], r[2])))
	}
	return smp
}

func learnedStrings(ls []Learned) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Rule.WithComment("").String())
	}
	return out
}

func TestLearn(t *testing.T) {
	smp := toolSample("agent output $[7]",
		[3]string{"Read notes.txt into <tmp>/agent-home.Z8qUtU/notes.txt\nProcess Group PGID: 17876", "7f3a9c0e5b1d2a4f", "8680"},
		[3]string{"Read notes.txt into <tmp>/agent-home.Ab12Cd/notes.txt\nProcess Group PGID: 901", "0c1d2e3f4a5b6c7d", "8682"},
		[3]string{"Read notes.txt into <tmp>/agent-home.qW3rTy/notes.txt\nProcess Group PGID: 17901", "9e8d7c6b5a4f3e2d", "8680"},
		[3]string{"Read notes.txt into <tmp>/agent-home.Lk9pMn/notes.txt\nProcess Group PGID: 4242", "1a2b3c4d5e6f7a8b", "8690"},
	)
	// The same directory in another frame is covered already.
	again := Sample{Name: "agent output $[9]"}
	for _, d := range []string{"Z8qUtU", "Ab12Cd", "qW3rTy", "Lk9pMn"} {
		again.Values = append(again.Values, map[string]any{"params": map[string]any{"update": map[string]any{"content": []any{
			map[string]any{"type": "text", "text": "nothing"},
			map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "Read notes.txt into <tmp>/agent-home." + d + "/notes.txt\nProcess Group PGID: 1"}},
		}}}})
	}
	learned, conflicts := Learn([]Sample{smp, again})
	if len(conflicts) != 0 {
		t.Fatalf("conflicts %+v, want none", conflicts)
	}
	want := []string{
		`{"path":"$.params.update.content[*].content.text","regexp":"( into <tmp>/agent-home\\.)[0-9A-Za-z]{6}(/notes\\.txt\n)","replace":"${1}<random>${2}"}`,
		`{"path":"$.params.update.content[*].content.text","regexp":"(\nProcess Group PGID: )[0-9]+$","replace":"${1}<number>"}`,
		`{"path":"$.params.update.rawOutput.count","regexp":"^[0-9]+$","replace":"<number>"}`,
		`{"path":"$.params.update.rawOutput.token","regexp":"^[0-9a-f]{16}$","replace":"<hex>"}`,
	}
	got := learnedStrings(learned)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("learned\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(learned) > 0 {
		l := learned[0]
		if l.Sample != 0 || l.Path != "$.params.update.content[0].content.text" || strings.Join(l.Values, " ") != "Z8qUtU Ab12Cd qW3rTy Lk9pMn" {
			t.Errorf("learned[0] from sample %d at %s, values %q; want sample 0, the text, the four directories", l.Sample, l.Path, l.Values)
		}
		if c := l.Rule.Comment(); c != `calibrate: varies at agent output $[7].params.update.content[0].content.text: "Z8qUtU", "Ab12Cd", "qW3rTy", "Lk9pMn"` {
			t.Errorf("comment %q", c)
		}
	}

	// With the rules, every run normalizes alike, and again alike.
	var rules []normalize.Rule
	for _, l := range learned {
		rules = append(rules, l.Rule)
	}
	norm := func(v json.RawMessage) string {
		return string(normalize.New(normalize.Options{Rules: rules}).Frame(lane.Agent, v))
	}
	first := norm(smp.Values[0].(json.RawMessage))
	for _, v := range smp.Values[1:] {
		if got := norm(v.(json.RawMessage)); got != first {
			t.Errorf("normalized with the learned rules:\n%s\nwant\n%s", got, first)
		}
	}
	if twice := norm(json.RawMessage(first)); twice != first {
		t.Errorf("normalized twice:\n%s\nonce:\n%s", twice, first)
	}

	// What did not vary is still compared: a changed file, a changed
	// word, a token of another shape, a count that is not a number.
	for _, changed := range [][3]string{
		{"Read other.txt into <tmp>/agent-home.Z8qUtU/notes.txt\nProcess Group PGID: 17876", "7f3a9c0e5b1d2a4f", "8680"},
		{"Read notes.txt into <tmp>/agent-home.Z8qUtU/other.txt\nProcess Group PGID: 17876", "7f3a9c0e5b1d2a4f", "8680"},
		{"Read notes.txt into <tmp>/agent-home.Z8qUtU/notes.txt\nProcess Group PGID: none", "7f3a9c0e5b1d2a4f", "8680"},
		{"Read notes.txt into <tmp>/agent-home.Z8qUtU/notes.txt\nProcess Group PGID: 17876", "not a token", "8680"},
		{"Read notes.txt into <tmp>/agent-home.Z8qUtU/notes.txt\nProcess Group PGID: 17876", "7f3a9c0e5b1d2a4f", "8680.5"},
		{"Read notes.txt into <tmp>/agent-home.Z8qUtU9/notes.txt\nProcess Group PGID: 17876", "7f3a9c0e5b1d2a4f", "8680"},
	} {
		if got := norm(toolSample("", changed).Values[0].(json.RawMessage)); got == first {
			t.Errorf("a changed frame %q normalizes like the recorded one", changed)
		}
	}
}

func TestLearnConflicts(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   Conflict
	}{
		{"a member missing", []string{`{"a":1,"b":2}`, `{"a":1,"b":3}`, `{"a":1}`},
			Conflict{Kind: Structure, Run: 2, Mismatch: mismatch.Mismatch{Path: "x.b", Recorded: json.Number("2"), Live: normalize.Missing{}}}},
		{"an element more", []string{`[1,2]`, `[1,2,3]`},
			Conflict{Kind: Structure, Run: 1, Mismatch: mismatch.Mismatch{Path: "x[2]", Recorded: normalize.Missing{}, Live: json.Number("3")}}},
		{"another type", []string{`{"a":"1"}`, `{"a":1}`},
			Conflict{Kind: Structure, Run: 1, Mismatch: mismatch.Mismatch{Path: "x.a", Recorded: "1", Live: json.Number("1")}}},
		{"a flag", []string{`{"a":true}`, `{"a":false}`},
			Conflict{Kind: Structure, Run: 1, Mismatch: mismatch.Mismatch{Path: "x.a", Recorded: true, Live: false}}},
		{"the same change in every run", []string{`{"text":"You said: hi"}`, `{"text":"Something else"}`, `{"text":"Something else"}`},
			Conflict{Kind: Steady, Run: 1, Mismatch: mismatch.Mismatch{Path: "x.text", Recorded: "You said: hi", Live: "Something else"}}},
		{"empty in one run", []string{`{"text":"abc"}`, `{"text":""}`},
			Conflict{Kind: Shapeless, Run: 1, Mismatch: mismatch.Mismatch{Path: "x.text", Recorded: "abc", Live: ""}}},
		{"placeholders", []string{`{"text":"<a>"}`, `{"text":"<b>"}`},
			Conflict{Kind: Shapeless, Run: 1, Mismatch: mismatch.Mismatch{Path: "x.text", Recorded: "<a>", Live: "<b>"}}},
	}
	for _, tt := range tests {
		smp := Sample{Name: "x"}
		for _, v := range tt.values {
			smp.Values = append(smp.Values, json.RawMessage(v))
		}
		learned, conflicts := Learn([]Sample{{Values: []any{json.RawMessage(`1`), json.RawMessage(`1`)}}, smp})
		if len(conflicts) != 1 || conflicts[0].Kind != tt.want.Kind || conflicts[0].Run != tt.want.Run ||
			conflicts[0].Path != tt.want.Path || !same(conflicts[0].Recorded, tt.want.Recorded) || !same(conflicts[0].Live, tt.want.Live) {
			t.Errorf("%s: conflicts %+v, want %+v", tt.name, conflicts, tt.want)
		}
		if len(learned) != 0 {
			t.Errorf("%s: learned %v from a conflict, want nothing", tt.name, learnedStrings(learned))
		}
	}
	if got := Steady.String(); got != "steady" {
		t.Errorf("Steady.String() = %q", got)
	}
}

// TestLearnParts covers how strings are cut into what varies and what
// stays.
func TestLearnParts(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   []string // rules, without comments
	}{
		{"a random id with dashes", []string{"id a1b2-c3d4 end", "id e5f6-a7b8 end", "id 9c0d-1e2f end"},
			[]string{`{"path":"$.v","regexp":"^(id )[0-9a-f]{4}-[0-9a-f]{4}( end)$","replace":"${1}<hex>${2}"}`}},
		{"one value, two places", []string{"dir /t/a.XyZ123 and /t/a.XyZ123/x", "dir /t/a.Qq9Rr8 and /t/a.Qq9Rr8/x"},
			[]string{
				`{"path":"$.v","regexp":"^(dir /t/a\\.)[0-9A-Za-z]{6}( and /t/a\\.)","replace":"${1}<random>${2}"}`,
				`{"path":"$.v","regexp":"( and /t/a\\.)[0-9A-Za-z]{6}(/x)$","replace":"${1}<random>${2}"}`,
			}},
		{"punctuation that varies too", []string{"key=ab+/cd== rest", "key=q9Z/x== rest"},
			[]string{`{"path":"$.v","regexp":"^(key=)[0-9A-Za-z\\+/]{5,6}(== rest)$","replace":"${1}<varies>${2}"}`}},
		{"a long prefix", []string{strings.Repeat("word ", 20) + "n=1", strings.Repeat("word ", 20) + "n=22"},
			[]string{`{"path":"$.v","regexp":"( word word word word n=)[0-9]+$","replace":"${1}<number>"}`}},
		{"a whole string", []string{"Z8qUtU", "Ab12Cd"},
			[]string{`{"path":"$.v","regexp":"^[0-9A-Za-z]{6}$","replace":"<random>"}`}},
		{"a thousands separator", []string{"about 8,680 tokens", "about 8,682 tokens", "about 9,001 tokens"},
			[]string{`{"path":"$.v","regexp":"^(about )[0-9]+,[0-9]+( tokens)$","replace":"${1}<number>${2}"}`}},
	}
	for _, tt := range tests {
		smp := Sample{}
		for _, v := range tt.values {
			smp.Values = append(smp.Values, map[string]any{"v": v})
		}
		learned, conflicts := Learn([]Sample{smp})
		if len(conflicts) != 0 {
			t.Errorf("%s: conflicts %+v", tt.name, conflicts)
			continue
		}
		if got := learnedStrings(learned); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
			t.Errorf("%s: learned\n%s\nwant\n%s", tt.name, strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
		}
	}
}

// FuzzLearn checks that Learn either reports conflicts or returns rules
// that parse back from their text, make every run of its sample equal,
// and are fixed points: a Normalizer with them normalizes twice as once.
func FuzzLearn(f *testing.F) {
	f.Add("<tmp>/agent-home.", "Z8qUtU", "Ab12Cd", "qW3rTy", "/notes.txt", int64(8680), int64(8682))
	f.Add("Process Group PGID: ", "17876", "901", "17901", "", int64(1), int64(1))
	f.Add("", "a1b2-c3d4", "e5f6-a7b8", "9c0d-1e2f", " end", int64(0), int64(-3))
	f.Add("key=", "ab+/cd", "q9Z/x", "zz", "==", int64(5), int64(50))
	f.Add("x", "<a>", "b>", "", "é", int64(7), int64(7))
	f.Add("home is /tmp/home-", "Z8qUtU", "a-b_cd", "Q1_w2e", "/.agent and", int64(1), int64(2))
	f.Fuzz(func(t *testing.T, pre, m1, m2, m3, suf string, n1, n2 int64) {
		var values []any
		for i, m := range []string{m1, m2, m3} {
			n := n1
			if i == 1 {
				n = n2
			}
			// The part twice in one string, as a per-run directory is in
			// a system prompt.
			values = append(values, json.RawMessage(fmt.Sprintf(`{"text":%s,"list":[%s,{"n":%d}],"twice":%s}`,
				encodeJSON(pre+m+suf), encodeJSON(m+suf), n, encodeJSON(pre+m+suf+"\nagain: "+pre+m+suf))))
		}
		learned, conflicts := Learn([]Sample{{Name: "f", Values: values}})
		if len(conflicts) > 0 {
			if len(conflicts) > 1 {
				t.Fatalf("%d conflicts for one sample: %+v", len(conflicts), conflicts)
			}
			return
		}
		var rules []normalize.Rule
		for _, l := range learned {
			back, err := normalize.ParseRules([]byte("[" + l.Rule.String() + "]"))
			if err != nil || back[0].String() != l.Rule.String() {
				t.Fatalf("rule %s does not parse back: %v", l.Rule, err)
			}
			rules = append(rules, l.Rule)
		}
		opts := normalize.Options{Rules: rules}
		var first []byte
		for i, v := range values {
			once := normalize.New(opts).Frame(lane.Agent, v.(json.RawMessage))
			if twice := normalize.New(opts).Frame(lane.Agent, once); !bytes.Equal(twice, once) {
				t.Fatalf("rules %v: normalized twice\n%s\nonce\n%s", learnedStrings(learned), twice, once)
			}
			if i == 0 {
				first = once
			} else if !bytes.Equal(once, first) {
				t.Fatalf("rules %v: run %d normalizes to\n%s\nthe recording to\n%s", learnedStrings(learned), i, once, first)
			}
		}
	})
}

// same reports whether a and b are equal as normalize compares values.
func same(a, b any) bool {
	_, _, _, differ := normalize.FirstDifference(a, b)
	return !differ
}

// TestLearnSeveralParts checks that a long string with a per-run part in
// several places, spelled in words and punctuation that differ from run
// to run (a system prompt naming a per-run home directory three times),
// gets a narrow rule per place, and that the text between them is still
// compared.
func TestLearnSeveralParts(t *testing.T) {
	filler := strings.Repeat("The agent reads files and answers questions. ", 30)
	prompt := func(home string) string {
		return "You are a helpful agent. Your home is /tmp/home-" + home + "/.agent and\n" + filler +
			"\nSettings are in /tmp/home-" + home + "/.agent/settings.json.\n" + filler +
			"\nYour cache: /tmp/home-" + home + "/cache"
	}
	homes := []string{"Z8qUtU", "a-b_cd", "Q1_w2e", "k9-8j7"}
	smp := Sample{Name: "llm #1 $"}
	for _, h := range homes {
		smp.Values = append(smp.Values, map[string]any{"body": map[string]any{"system": prompt(h)}})
	}
	learned, conflicts := Learn([]Sample{smp})
	if len(conflicts) != 0 {
		t.Fatalf("conflicts %v, want none", conflicts)
	}
	want := []string{
		`{"path":"$.body.system","regexp":"( Your home is /tmp/home-)[0-9A-Za-z\\-_]{6}(/\\.agent and\n)","replace":"${1}<random>${2}"}`,
		`{"path":"$.body.system","regexp":"( are in /tmp/home-)[0-9A-Za-z\\-_]{6}(/\\.agent/settings\\.json\\.\n)","replace":"${1}<random>${2}"}`,
		`{"path":"$.body.system","regexp":"(\nYour cache: /tmp/home-)[0-9A-Za-z\\-_]{6}(/cache)$","replace":"${1}<random>${2}"}`,
	}
	if got := learnedStrings(learned); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("learned\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var rules []normalize.Rule
	for _, l := range learned {
		rules = append(rules, l.Rule)
	}
	norm := func(s string) any {
		return normalize.ApplyRules(rules, map[string]any{"body": map[string]any{"system": s}}, nil)
	}
	first := norm(prompt(homes[0]))
	if _, _, _, differ := normalize.FirstDifference(norm(prompt("x_y-zz")), first); differ {
		t.Errorf("another run's home is not covered")
	}
	changed := strings.Replace(prompt(homes[0]), "answers questions", "asks questions", 1)
	if _, _, _, differ := normalize.FirstDifference(norm(changed), first); !differ {
		t.Errorf("a changed word between the parts is covered too")
	}
}

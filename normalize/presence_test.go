package normalize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func drain(id int, s string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"_x/drain","params":{"sessionId":"%s"}}`, id, s)
}

func progress(s string) string {
	return `{"jsonrpc":"2.0","method":"_x/progress","params":{"sessionId":"` + s + `"}}`
}

func mustRules(t *testing.T, src string) []Rule {
	t.Helper()
	rules, err := ParseRules([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// withTurn2Permission is a run whose second turn asks for a permission,
// with request id id, before its answer.
func withTurn2Permission(r run, id int) []string {
	l := r.lines()
	return slices.Insert(l, len(l)-1, permission(id, r.s, r.call))
}

// TestPresenceRules checks each kind of presence rule: without it, a
// frame one run has and the other lacks is a difference; with it, it is
// none, on either side; and a frame of another kind, or in another
// place, is still one.
func TestPresenceRules(t *testing.T) {
	const (
		last  = `[{"optional":"update tool_call_update completed","at":"last"}]`
		after = `[{"optional":"request _x/drain","after":"update tool_call_update completed"}]`
		note  = `[{"optional":"notification _x/progress"}]`
	)
	recorded := withTurn2Permission(runA, 2)
	for _, tt := range []struct {
		name  string
		rules string
		live  []string
		equal bool // with the rules
	}{
		{"the last update missing", last, slices.Delete(withTurn2Permission(runB, 2), 9, 10), true},
		{"the last update missing, another kind of rule", after, slices.Delete(withTurn2Permission(runB, 2), 9, 10), false},
		{"the last update failed", last, slices.Replace(withTurn2Permission(runB, 2), 9, 10, toolUpdate(runB.s, runB.call, "failed")), false},
		{"the tool call missing whole", last, slices.DeleteFunc(withTurn2Permission(runB, 2), func(s string) bool {
			return strings.Contains(s, `"toolCallId":"`+runB.call+`","title"`)
		}), false},
		{"an in_progress update missing", last, slices.Delete(withTurn2Permission(runB, 2), 6, 7), false},
		// The agent's later request ids count the request: the rule must
		// leave it out before they are numbered.
		{"a request after the tool's result", after, slices.Insert(withTurn2Permission(runB, 3), 10, drain(2, runB.s)), true},
		{"a request after a message chunk", after, slices.Insert(withTurn2Permission(runB, 3), 9, drain(2, runB.s)), false},
		{"two requests after the tool's result", after, slices.Insert(withTurn2Permission(runB, 4), 10, drain(2, runB.s), usage(runB.s, 9), drain(3, runB.s)), true},
		{"a notification", note, slices.Insert(withTurn2Permission(runB, 2), 3, progress(runB.s)), true},
		{"a notification, another kind of rule", last, slices.Insert(withTurn2Permission(runB, 2), 3, progress(runB.s)), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if d := Compare(transcriptOf(Options{}, recorded...), transcriptOf(Options{}, tt.live...)).Diff; d == nil {
				t.Fatal("without the rules: no difference")
			}
			opts := Options{Rules: mustRules(t, tt.rules)}
			for _, swap := range []bool{false, true} {
				want, got := transcriptOf(opts, recorded...), transcriptOf(opts, tt.live...)
				if swap {
					want, got = got, want
				}
				d := Compare(want, got).Diff
				switch {
				case tt.equal && d != nil:
					t.Errorf("with %s (swapped %v): difference in %s, value %d: %v", tt.rules, swap, d.Stream, d.Index, d.Mismatch)
				case !tt.equal && d == nil:
					t.Errorf("with %s (swapped %v): no difference", tt.rules, swap)
				}
			}
			// What the rules leave is left as it is by the rules.
			once := transcriptOf(opts, tt.live...).Values()
			lines := make([]string, len(once))
			for i, v := range once {
				lines[i] = string(v)
			}
			if twice := transcriptOf(opts, lines...).Values(); !slices.EqualFunc(once, twice, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
				t.Errorf("arranged twice:\n%s\nonce:\n%s", joinLines(twice), joinLines(once))
			}
		})
	}
}

// TestPresenceAfterKinds checks Stream.After: the kind of the frame before
// each request and response, state notifications and the value's own
// kind passed over (the answer comes after the plan).
func TestPresenceAfterKinds(t *testing.T) {
	lines := slices.Insert(runA.lines(), 10, drain(2, runA.s), usage(runA.s, 3), drain(3, runA.s))
	tr := transcriptOf(Options{}, lines...)
	var got []string
	for _, s := range tr.Turns[0].Streams {
		if s.Name == RequestsStream {
			got = s.After
		}
	}
	want := []string{"", "update tool_call pending", "request session/request_permission", "update tool_call_update completed", "update tool_call_update completed", "update plan"}
	if !slices.Equal(got, want) {
		t.Errorf("After = %q, want %q", got, want)
	}
}

func TestFrameKind(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{toolUpdate("s", "c", "completed"), "update tool_call_update completed"},
		{toolCall("s", "c", "t"), "update tool_call pending"},
		{msgChunk("s", "x"), "update agent_message_chunk"},
		{drain(1, "s"), "request _x/drain"},
		{progress("s"), "notification _x/progress"},
		{answer(1, "end_turn"), "response"},
		{`not json`, ""},
	} {
		if got := FrameKind([]byte(tt.line)); got != tt.want {
			t.Errorf("FrameKind(%s) = %q, want %q", tt.line, got, tt.want)
		}
	}
}

func TestParsePresenceRules(t *testing.T) {
	src := `[{"optional":"update tool_call_update completed","at":"last","comment":"c"},{"optional":"request _x/drain","after":"update tool_call_update completed"},{"optional":"notification _x/progress"},{"optional":"update tool_call_update","at":"last"}]`
	rules := mustRules(t, src)
	var printed []string
	for _, r := range rules {
		printed = append(printed, r.String())
	}
	want := []string{
		`{"at":"last","comment":"c","optional":"update tool_call_update completed"}`,
		`{"after":"update tool_call_update completed","optional":"request _x/drain"}`,
		`{"optional":"notification _x/progress"}`,
		`{"at":"last","optional":"update tool_call_update"}`,
	}
	if !slices.Equal(printed, want) {
		t.Errorf("printed\n%s\nwant\n%s", strings.Join(printed, "\n"), strings.Join(want, "\n"))
	}
	if what, at, after := rules[1].Optional(); what != "request _x/drain" || at != "" || after != "update tool_call_update completed" {
		t.Errorf("Optional() = %q, %q, %q", what, at, after)
	}
	if !OptionalRequest(rules, "_x/drain") || OptionalRequest(rules, "_x/progress") {
		t.Error("OptionalRequest: want _x/drain only")
	}
	again, err := ParseRules(FormatRules(rules))
	if err != nil || len(again) != len(rules) {
		t.Fatalf("FormatRules does not parse back: %v", err)
	}

	for _, tt := range []struct{ src, want string }{
		{`[{"optional":"update tool_call_update completed"}]`, `rules[0].at: missing: an optional update is "last" in its stream; the stream's first value is never optional`},
		{`[{"optional":"update usage_update","at":"last"}]`, `rules[0].optional: "update usage_update": a state notification counts by its value at a turn's end, never by its presence`},
		{`[{"optional":"request"}]`, `rules[0].optional: "request": want request METHOD`},
		{`[{"optional":"anything"}]`, `rules[0].optional: "anything": want request METHOD, notification METHOD, update KIND or update KIND STATUS`},
		{`[{"optional":"update plan done","at":"last"}]`, `rules[0].optional: "update plan done": only a tool_call or tool_call_update has a status`},
		{`[{"optional":"request x","at":"last"}]`, `rules[0].at: "last" is for updates, which have streams of their own`},
		{`[{"optional":"update plan","at":"first"}]`, `rules[0].at: "first": want "last"`},
		{`[{"optional":"notification x","after":"update plan"}]`, `rules[0].after: "after" is for requests`},
		{`[{"optional":"request x","after":"request x"}]`, `rules[0].after: names the optional frames themselves`},
		{`[{"optional":"request x","path":"$.a"}]`, `rules[0].path: belongs to a value rule; a presence rule names frames by their kind`},
		{`[{"regexp":"a","replace":"b","at":"last"}]`, `rules[0].at: belongs to a presence rule, which names its frames in optional`},
		{`[{"optional":"notification session/update"}]`, `rules[0].optional: "notification session/update": a session/update is named update KIND`},
	} {
		_, err := ParseRules([]byte(tt.src))
		if err == nil || !strings.HasSuffix(err.Error(), tt.want) {
			t.Errorf("ParseRules(%s) = %v, want ...%s", tt.src, err, tt.want)
		}
	}
}

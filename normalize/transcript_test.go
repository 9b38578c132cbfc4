package normalize

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/acptap/acptap/lane"
	"github.com/acptap/acptap/mismatch"
)

// Lines of a test agent's output; every run mints other ids.
func sessionUpdate(session, u string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + session + `","update":` + u + `}}`
}

func msgChunk(s, text string) string {
	return sessionUpdate(s, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+text+`"}}`)
}

func thoughtChunk(s, text string) string {
	return sessionUpdate(s, `{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"`+text+`"}}`)
}

func toolCall(s, id, title string) string {
	return sessionUpdate(s, `{"sessionUpdate":"tool_call","toolCallId":"`+id+`","title":"`+title+`","kind":"read","status":"pending"}`)
}

func toolUpdate(s, id, status string) string {
	return sessionUpdate(s, `{"sessionUpdate":"tool_call_update","toolCallId":"`+id+`","status":"`+status+`"}`)
}

func commands(s, name string) string {
	return sessionUpdate(s, `{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"`+name+`","description":"d"}]}`)
}

func usage(s string, used int) string {
	return sessionUpdate(s, fmt.Sprintf(`{"sessionUpdate":"usage_update","used":%d,"size":200000}`, used))
}

func planUpdate(s, status string) string {
	return sessionUpdate(s, `{"sessionUpdate":"plan","entries":[{"content":"Read a.go","priority":"high","status":"`+status+`"}]}`)
}

func answer(id int, reason string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"stopReason":"%s"}}`, id, reason)
}

func sessionNew(id int, s string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"sessionId":"%s"}}`, id, s)
}

func permission(id int, s, call string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":"%s","toolCall":{"toolCallId":"%s"}}}`, id, s, call)
}

func readFile(id int, s string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"fs/read_text_file","params":{"sessionId":"%s","path":"/w/a.go"}}`, id, s)
}

func transcriptOf(opts Options, lines ...string) *Transcript {
	frames := make([]lane.Line, len(lines))
	for i, l := range lines {
		frames[i] = lane.Line{Lane: lane.Agent, Data: []byte(l)}
	}
	return New(opts).Transcript(frames)
}

// session is a run of two turns: a tool call behind a permission request
// and an fs read, racing the answer's chunks, and a plain answer; ids are
// the run's own. Its streams are listed in the order recorded[] says.
type run struct {
	s, call string // the run's sessionId and toolCallId
}

func (r run) turn1() []string {
	return []string{
		sessionNew(1, r.s),
		commands(r.s, "review"),
		thoughtChunk(r.s, "Let me read it."),
		toolCall(r.s, r.call, "Read a.go"),
		permission(0, r.s, r.call),
		readFile(1, r.s),
		toolUpdate(r.s, r.call, "in_progress"),
		msgChunk(r.s, "The file "),
		msgChunk(r.s, "says hi."),
		toolUpdate(r.s, r.call, "completed"), // late: after the chunks
		planUpdate(r.s, "completed"),
		usage(r.s, 1317),
		answer(2, "end_turn"),
	}
}

func (r run) turn2() []string {
	return []string{
		usage(r.s, 0),
		msgChunk(r.s, "Bye."),
		usage(r.s, 1400),
		answer(3, "end_turn"),
	}
}

func (r run) lines() []string { return append(r.turn1(), r.turn2()...) }

var (
	runA = run{s: "sess_aaaaaaaaaaaa", call: "call_a1a1a1a1a1a1"}
	runB = run{s: "sess_bbbbbbbbbbbb", call: "call_b2b2b2b2b2b2"}
)

// move returns lines with line i moved to index j.
func move(lines []string, i, j int) []string {
	l := lines[i]
	out := slices.Delete(slices.Clone(lines), i, i+1)
	return slices.Insert(out, j, l)
}

// TestStreamsRace checks that runs that interleave their streams
// differently compare equal per stream, and differ under Strict, which
// reports the moved value as moved.
func TestStreamsRace(t *testing.T) {
	want := runA.lines()
	// The tool call's last update before the chunks; the thought after
	// the tool call; the plan first; the commands before the session/new
	// answer; the turn's usage after the answer.
	raced := runB.lines()
	raced = move(raced, 9, 7)
	raced = move(raced, 2, 3)
	raced = move(raced, 10, 2)
	raced = move(raced, 1, 0)
	raced = move(raced, 11, 12)
	if slices.Equal(raced, runB.lines()) {
		t.Fatal("the raced run is the run")
	}
	c := Compare(transcriptOf(Options{}, want...), transcriptOf(Options{}, raced...))
	if c.Diff != nil {
		t.Fatalf("per stream, the raced run differs: %+v", c.Diff)
	}
	if !slices.EqualFunc(c.Want, c.Got, sameJSON) {
		t.Errorf("equal transcripts listed apart:\n%s\n%s", joinLines(c.Want), joinLines(c.Got))
	}

	// Strict: the first line moved is the tool call's late update, which
	// stands two places earlier.
	strict := Options{Order: Strict}
	only := slices.Clone(runB.lines())
	only = move(only, 9, 7)
	c = Compare(transcriptOf(strict, want...), transcriptOf(strict, only...))
	d := c.Diff
	if d == nil {
		t.Fatal("under Strict, the raced run compares equal")
	}
	// Value 8 ($[7]): the chunks coalesced into one value in want, the
	// update in got, and the other way round at value 9.
	if d.Turn != 0 || d.Stream != "" || d.Index != 8 || d.Path != "$" || d.Flat != "$[7]" || d.MovedTo != 9 || d.MovedFrom != 9 {
		t.Errorf("strict difference %+v, want at value 8, whole, each side's value standing at 9 on the other", d)
	}
}

// TestWithinStreams checks that order still matters within a stream, and
// that each change is reported in its stream and place.
func TestWithinStreams(t *testing.T) {
	want := transcriptOf(Options{}, runA.lines()...)
	for _, tt := range []struct {
		name          string
		edit          func([]string) []string
		opts          Options
		stream        string
		index         int
		field         string
		av, bv        any
		movedTo, from int
		wantN, gotN   int
	}{
		{name: "two message chunks swapped", edit: func(l []string) []string { return move(l, 8, 7) },
			stream: "agent message", index: 1, field: "content.text", av: "The file says hi.", bv: "says hi.The file ", wantN: 1, gotN: 1},
		{name: "two message chunks swapped, not coalesced", edit: func(l []string) []string { return move(l, 8, 7) }, opts: Options{NoCoalesce: true},
			stream: "agent message", index: 1, field: "content.text", av: "The file ", bv: "says hi.", movedTo: 2, from: 2, wantN: 2, gotN: 2},
		{name: "in_progress after completed", edit: func(l []string) []string { return move(l, 6, 9) },
			stream: "tool call <toolCallId:1>", index: 2, field: "status", av: "in_progress", bv: "completed", movedTo: 3, from: 3, wantN: 3, gotN: 3},
		{name: "changed tool status", edit: func(l []string) []string {
			l[9] = toolUpdate(runB.s, runB.call, "failed")
			return l
		}, stream: "tool call <toolCallId:1>", index: 3, field: "status", av: "completed", bv: "failed", wantN: 3, gotN: 3},
		{name: "tool call missing", edit: func(l []string) []string {
			return slices.DeleteFunc(l, func(s string) bool {
				return strings.Contains(s, runB.call) && !strings.Contains(s, "request_permission")
			})
		}, stream: "tool call <toolCallId:1>", wantN: 3, gotN: 0},
		{name: "tool call added", edit: func(l []string) []string {
			return slices.Insert(l, 10, toolCall(runB.s, "call_c3c3c3c3c3c3", "Read b.go"), toolUpdate(runB.s, "call_c3c3c3c3c3c3", "completed"))
		}, stream: "tool call <toolCallId:2>", wantN: 0, gotN: 2},
		{name: "message changed", edit: func(l []string) []string {
			l[8] = msgChunk(runB.s, "says bye.")
			return l
		}, stream: "agent message", index: 1, field: "content.text", av: "The file says hi.", bv: "The file says bye.", wantN: 1, gotN: 1},
		{name: "plan changed", edit: func(l []string) []string {
			l[10] = planUpdate(runB.s, "pending")
			return l
		}, stream: "plan", index: 1, field: "entries[0].status", av: "completed", bv: "pending", wantN: 1, gotN: 1},
		{name: "permission request missing", edit: func(l []string) []string { return slices.Delete(l, 4, 5) },
			stream: RequestsStream, index: 2, av: map[string]any{"method": "session/request_permission"}, wantN: 4, gotN: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := want
			if tt.opts.NoCoalesce {
				w = transcriptOf(tt.opts, runA.lines()...)
			}
			d := Compare(w, transcriptOf(tt.opts, tt.edit(slices.Clone(runB.lines()))...)).Diff
			if d == nil {
				t.Fatal("no difference")
			}
			if d.Turn != 1 || !d.Answered || d.Stream != tt.stream || d.Index != tt.index || d.Field() != tt.field ||
				d.MovedTo != tt.movedTo || d.MovedFrom != tt.from || d.WantLen != tt.wantN || d.GotLen != tt.gotN {
				t.Errorf("difference %+v (field %q), want turn 1, %s, value %d, field %q, moved to %d, from %d, %d and %d values",
					d, d.Field(), tt.stream, tt.index, tt.field, tt.movedTo, tt.from, tt.wantN, tt.gotN)
			}
			if m, ok := tt.av.(map[string]any); ok {
				if got, _ := d.Recorded.(map[string]any); got["method"] != m["method"] {
					t.Errorf("want value %v, want method %v", d.Recorded, m["method"])
				}
			} else if tt.av != nil && !same(d.Recorded, tt.av) || tt.bv != nil && !same(d.Live, tt.bv) {
				t.Errorf("difference %#v vs %#v, want %#v vs %#v", d.Recorded, d.Live, tt.av, tt.bv)
			}
		})
	}
}

// TestTurnsStrict checks that turns keep their order: an update that
// moves into the next turn is a difference.
func TestTurnsStrict(t *testing.T) {
	lines := runB.lines()
	moved := move(lines, 8, 13) // the second chunk after the first answer
	d := Compare(transcriptOf(Options{}, runA.lines()...), transcriptOf(Options{}, moved...)).Diff
	if d == nil || d.Turn != 1 || d.Stream != "agent message" || d.Field() != "content.text" {
		t.Fatalf("difference %+v, want the first turn's message", d)
	}
}

// TestStateLastValue checks that a state notification counts by its
// value at the turn's end, and that Strict compares every value.
func TestStateLastValue(t *testing.T) {
	want := runA.lines()
	// An intermediate usage in the first turn, and the second turn's
	// first usage, 0 in one run and 1317 in the other, do not count.
	got := slices.Insert(runB.lines(), 7, usage(runB.s, 512))
	got[14] = usage(runB.s, 1317)
	if d := Compare(transcriptOf(Options{}, want...), transcriptOf(Options{}, got...)).Diff; d != nil {
		t.Errorf("intermediate values differ: %+v, want equal", d)
	}
	if d := Compare(transcriptOf(Options{Order: Strict}, want...), transcriptOf(Options{Order: Strict}, got...)).Diff; d == nil {
		t.Error("under Strict, intermediate values compare equal")
	}
	// The last value of a turn counts.
	got = runB.lines()
	got[11] = usage(runB.s, 1318)
	d := Compare(transcriptOf(Options{}, want...), transcriptOf(Options{}, got...)).Diff
	if d == nil || !d.State || d.Turn != 1 || d.Stream != "usage_update" || d.Session != "<sessionId:1>" || d.Field() != "used" || !same(d.Recorded, json.Number("1317")) || !same(d.Live, json.Number("1318")) {
		t.Errorf("a changed last usage_update: difference %+v, want it in turn 1", d)
	}
	// So does the state at the session's end.
	got = append(runB.lines(), commands(runB.s, "init"))
	d = Compare(transcriptOf(Options{}, want...), transcriptOf(Options{}, got...)).Diff
	if d == nil || !d.State || d.Turn != 3 || d.Answered || d.Stream != "available_commands_update" {
		t.Errorf("a new available_commands_update after the last answer: difference %+v, want it after turn 2", d)
	}
}

// TestStateRacesAnswer checks that a state notification may come on
// either side of the turn's answer, even when the next turn starts with a
// value of its kind that differs between runs.
func TestStateRacesAnswer(t *testing.T) {
	want := runA.lines()
	for name, got := range map[string][]string{
		"after the answer": move(runB.lines(), 11, 12),
		"after the answer, and the next turn's first of another value": func() []string {
			l := move(runB.lines(), 11, 12)
			l[13] = usage(runB.s, 1317)
			return l
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			if d := Compare(transcriptOf(Options{}, want...), transcriptOf(Options{}, got...)).Diff; d != nil {
				t.Errorf("difference %+v, want equal", d)
			}
		})
		t.Run(name+", in want", func(t *testing.T) {
			if d := Compare(transcriptOf(Options{}, got...), transcriptOf(Options{}, want...)).Diff; d != nil {
				t.Errorf("difference %+v, want equal", d)
			}
		})
	}
	// A changed value after the answer is still caught, and reported
	// with the value there rather than with none.
	got := move(runB.lines(), 11, 12)
	got[12] = usage(runB.s, 99)
	d := Compare(transcriptOf(Options{}, want...), transcriptOf(Options{}, got...)).Diff
	if d == nil || d.Turn != 1 || d.Stream != "usage_update" || !same(d.Live, json.Number("99")) {
		t.Errorf("a changed usage_update after the answer: difference %+v, want it in turn 1, 99", d)
	}
}

// TestValuesStream checks that Stream lists Transcript.Values, in the
// order Values promises.
func TestValuesStream(t *testing.T) {
	lines := runA.lines()
	frames := make([]lane.Line, len(lines))
	for i, l := range lines {
		frames[i] = lane.Line{Lane: lane.Agent, Data: []byte(l)}
	}
	stream := New(Options{}).Stream(frames)
	values := New(Options{}).Transcript(frames).Values()
	if !slices.EqualFunc(stream, values, sameJSON) {
		t.Errorf("Stream and Transcript.Values differ:\n%s\n%s", joinLines(stream), joinLines(values))
	}
	// Turn by turn: the requests but the answer, the other streams in
	// order of their first value, the state that changed, the answer.
	var kinds []string
	for _, v := range stream {
		kinds = append(kinds, kindOf(decodeValue(v)))
	}
	wantKinds := []string{
		"response", "request session/request_permission", "request fs/read_text_file",
		"notification session/update agent_thought_chunk",
		"notification session/update tool_call", "notification session/update tool_call_update", "notification session/update tool_call_update",
		"notification session/update agent_message_chunk",
		"notification session/update plan",
		"notification session/update available_commands_update", "notification session/update usage_update",
		"response",
		"notification session/update agent_message_chunk", "notification session/update usage_update", "response",
	}
	if !slices.Equal(kinds, wantKinds) {
		t.Errorf("Stream lists\n%q\nwant\n%q", kinds, wantKinds)
	}
}

func TestParseOrder(t *testing.T) {
	for s, want := range map[string]Order{"stream": ByStream, "strict": Strict} {
		if got, err := ParseOrder(s); err != nil || got != want {
			t.Errorf("ParseOrder(%q) = %v, %v; want %v", s, got, err, want)
		}
		if want.String() != s {
			t.Errorf("%v.String() = %q, want %q", want, want.String(), s)
		}
	}
	for _, s := range []string{"total", "", "Strict"} {
		if _, err := ParseOrder(s); !errors.Is(err, ErrOrder) || !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
			t.Errorf("ParseOrder(%q) error = %v, want ErrOrder naming it", s, err)
		}
	}
	if var0 := (Options{}).Order; var0 != ByStream {
		t.Errorf("the zero Options compare %v, want %v", var0, ByStream)
	}
}

func TestDifferenceField(t *testing.T) {
	for _, tt := range []struct{ stream, path, want string }{
		{"tool call <toolCallId:1>", "$.params.update.status", "status"},
		{"agent message", "$.params.update", ""},
		{"agent message", "$.params.updates", "params.updates"},
		{RequestsStream, "$.params.update.x", "params.update.x"},
		{RequestsStream, "$.result.stopReason", "result.stopReason"},
		{"plan", "$.params.update.entries[0].status", "entries[0].status"},
		{"", "$", ""},
	} {
		d := &Difference{Stream: tt.stream, Mismatch: mismatch.Mismatch{Path: tt.path}}
		if got := d.Field(); got != tt.want {
			t.Errorf("Field of %s in %q = %q, want %q", tt.path, tt.stream, got, tt.want)
		}
	}
}

// TestStatusFirst checks that a tool call update's status is reported
// before its other members, which sort first.
func TestStatusFirst(t *testing.T) {
	up := func(status, text string) string {
		return sessionUpdate("s", `{"sessionUpdate":"tool_call_update","toolCallId":"c","status":"`+status+`","content":[{"type":"content","content":{"type":"text","text":"`+text+`"}}]}`)
	}
	d := Compare(transcriptOf(Options{}, up("in_progress", "reading")), transcriptOf(Options{}, up("completed", "done"))).Diff
	if d == nil || d.Field() != "status" || d.Recorded != "in_progress" || d.Live != "completed" {
		t.Errorf("difference %+v, want the status first", d)
	}
	d = Compare(transcriptOf(Options{}, up("completed", "reading")), transcriptOf(Options{}, up("completed", "done"))).Diff
	if d == nil || d.Field() != "content[0].content.text" {
		t.Errorf("difference %+v, want the content when the status is the same", d)
	}
}

// TestCancelledTurnCutShort checks that in a turn both sides answered
// cancelled, the last run of message or thought chunks may go on for
// longer on either side, and nothing else may differ.
func TestCancelledTurnCutShort(t *testing.T) {
	turn := func(reason string, chunks ...string) []string {
		lines := append([]string{sessionNew(1, "sess_aaaaaaaaaaaa")}, chunks...)
		return append(lines, answer(2, reason))
	}
	s := "sess_aaaaaaaaaaaa"
	for _, tt := range []struct {
		name      string
		want, got []string
		equal     bool
	}{
		{"longer replayed", turn("cancelled", msgChunk(s, "Yo"), msgChunk(s, "u ")), turn("cancelled", msgChunk(s, "Yo"), msgChunk(s, "u "), msgChunk(s, "sa")), true},
		{"longer recorded", turn("cancelled", thoughtChunk(s, "Thinking about it")), turn("cancelled", thoughtChunk(s, "Think")), true},
		{"another text", turn("cancelled", msgChunk(s, "You ")), turn("cancelled", msgChunk(s, "Yes ")), false},
		{"not cancelled", turn("end_turn", msgChunk(s, "You ")), turn("end_turn", msgChunk(s, "You sa")), false},
		{"cancelled on one side", turn("cancelled", msgChunk(s, "You ")), turn("end_turn", msgChunk(s, "You sa")), false},
		{"another kind of content", turn("cancelled", msgChunk(s, "You ")),
			turn("cancelled", sessionUpdate(s, `{"sessionUpdate":"agent_message_chunk","content":{"type":"image","text":"You sa"}}`)), false},
		{"a run before the last", turn("cancelled", msgChunk(s, "You "), toolCall(s, "call_1", "Read"), msgChunk(s, "x")),
			turn("cancelled", msgChunk(s, "You sa"), toolCall(s, "call_1", "Read"), msgChunk(s, "x")), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Compare(transcriptOf(Options{}, tt.want...), transcriptOf(Options{}, tt.got...))
			if got := c.Diff == nil; got != tt.equal {
				t.Errorf("equal = %v, want %v (difference %+v)", got, tt.equal, c.Diff)
			}
		})
	}
}

// TestStateArrivesLate checks that a state notification kind's first
// value may come turns later on one side, and still must be the same.
func TestStateArrivesLate(t *testing.T) {
	s := "sess_aaaaaaaaaaaa"
	session := func(turn1, turn2 []string) []string {
		lines := append([]string{sessionNew(1, s)}, turn1...)
		lines = append(lines, answer(2, "end_turn"))
		lines = append(lines, turn2...)
		return append(lines, answer(3, "end_turn"))
	}
	early := session([]string{commands(s, "review"), msgChunk(s, "Hi.")}, []string{msgChunk(s, "Bye.")})
	for _, tt := range []struct {
		name      string
		want, got []string
		equal     bool
	}{
		{"in a later turn", early, session([]string{msgChunk(s, "Hi.")}, []string{msgChunk(s, "Bye."), commands(s, "review")}), true},
		{"recorded later", session([]string{msgChunk(s, "Hi.")}, []string{commands(s, "review"), msgChunk(s, "Bye.")}), early, true},
		{"later, another value", early, session([]string{msgChunk(s, "Hi.")}, []string{msgChunk(s, "Bye."), commands(s, "init")}), false},
		{"never", early, session([]string{msgChunk(s, "Hi.")}, []string{msgChunk(s, "Bye.")}), false},
		{"a change, later", session([]string{commands(s, "review")}, []string{commands(s, "init")}),
			session([]string{commands(s, "review")}, []string{msgChunk(s, "x")}), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Compare(transcriptOf(Options{}, tt.want...), transcriptOf(Options{}, tt.got...))
			if got := c.Diff == nil; got != tt.equal {
				t.Errorf("equal = %v, want %v (difference %+v)", got, tt.equal, c.Diff)
			}
		})
	}
}

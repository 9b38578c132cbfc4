package replay

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/acptap/acptap/mismatch"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay/driver"
	"github.com/acptap/acptap/replay/llmserver"
	"github.com/acptap/acptap/store"
)

// stream is an agent's output: a session/new answer with sessionID, then
// a message chunk saying text.
func stream(sessionID, text string) [][]byte {
	return [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"` + sessionID + `"}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sessionID + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`),
	}
}

func newNormalizer() *normalize.Normalizer { return normalize.New(normalize.Options{}) }

// judged judges ev twice, keeping the normalized streams and comparing
// digests first, and checks that both find the same: it returns the
// verdict that keeps them.
func judged(t *testing.T, ev evidence) verdict {
	t.Helper()
	ev.keep = true
	kept, err := judge(ev)
	if err != nil {
		t.Fatal(err)
	}
	ev.keep = false
	digested, err := judge(ev)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(digested.divergences, kept.divergences) || !reflect.DeepEqual(digested.warnings, kept.warnings) || digested.diff != kept.diff {
		t.Errorf("judged on digests first:\n%+v\n%s\nwant what the values give:\n%+v\n%s", digested.divergences, digested.diff, kept.divergences, kept.diff)
	}
	if kept.diff == "" && (digested.expected != nil || digested.actual != nil) {
		t.Errorf("equal on digests, yet %d expected and %d actual values listed", len(digested.expected), len(digested.actual))
	}
	return kept
}

func TestJudgeEqual(t *testing.T) {
	// Other ids, chunks cut elsewhere and a blank line: the same output.
	live := append(stream("ses_2", "Hel"), []byte(""), []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_2","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"lo"}}}}`))
	v := judged(t, evidence{recorded: memLines(stream("ses_1", "Hello")), live: memLines(live), normalizer: newNormalizer})
	if len(v.divergences) != 0 || len(v.warnings) != 0 || v.diff != "" {
		t.Errorf("verdict %+v, want no divergence, warning or diff", v)
	}
	if len(v.expected) != 2 || !slices.EqualFunc(v.expected, v.actual, slices.Equal) {
		t.Errorf("normalized streams differ:\n%s\n%s", v.expected, v.actual)
	}
}

func TestJudgeOutput(t *testing.T) {
	v := judged(t, evidence{recorded: memLines(stream("ses_1", "Hello")), live: memLines(stream("ses_2", "Bonjour")), normalizer: newNormalizer})
	want := Divergence{
		Kind: OutputDiffers, Lane: store.LaneAgent,
		Mismatch: mismatch.Mismatch{Path: "$[1].params.update.content.text", Recorded: "Hello", Live: "Bonjour"},
		Turn:     1, Stream: "agent message", Session: "<sessionId:1>", Index: 1, Field: "content.text",
		Message: `agent output differs in agent message, update 1: content.text: expected "Hello", got "Bonjour"`,
	}
	if len(v.divergences) != 1 || !reflect.DeepEqual(v.divergences[0], want) {
		t.Fatalf("divergences\n%#v\nwant\n%#v", v.divergences, want)
	}
	for _, line := range []string{"--- recorded\n+++ replayed\n@@ ", "\n-        \"text\": \"Hello\",\n", "\n+        \"text\": \"Bonjour\",\n"} {
		if !strings.Contains(v.diff, line) {
			t.Errorf("diff lacks %q:\n%s", line, v.diff)
		}
	}

	// A line the replay lacks: the recorded value, summed up, and
	// nothing.
	v = judged(t, evidence{recorded: memLines(stream("ses_1", "Hello")), live: memLines(stream("ses_2", "Hello")[:1]), normalizer: newNormalizer})
	if len(v.divergences) != 1 || v.divergences[0].Message != `agent output differs in agent message is missing (1 update recorded, the first agent_message_chunk "Hello")` {
		t.Errorf("missing line: divergences %v", v.divergences)
	}
}

// turnOutput is an agent's output of one turn, in the order of lines:
// "n" the session/new answer, "c1".."c3" message chunks, "p", "i", "d"
// the tool call's tool_call (pending), its in_progress and completed
// updates, "u" a usage_update, "a" the answer.
func turnOutput(sessionID, callID string, lines ...string) [][]byte {
	up := func(u string) []byte {
		return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sessionID + `","update":` + u + `}}`)
	}
	var out [][]byte
	for _, l := range lines {
		switch l {
		case "n":
			out = append(out, []byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"`+sessionID+`"}}`))
		case "c1", "c2", "c3":
			out = append(out, up(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+l+` "}}`))
		case "p":
			out = append(out, up(`{"sessionUpdate":"tool_call","toolCallId":"`+callID+`","title":"Read notes.txt","kind":"read","status":"pending"}`))
		case "i", "d":
			status := map[string]string{"i": "in_progress", "d": "completed"}[l]
			out = append(out, up(`{"sessionUpdate":"tool_call_update","toolCallId":"`+callID+`","status":"`+status+`"}`))
		case "u":
			out = append(out, up(`{"sessionUpdate":"usage_update","used":1317,"size":200000}`))
		case "a":
			out = append(out, []byte(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`))
		}
	}
	return out
}

// TestJudgeOrder checks the two orders on the same pair of runs: the
// tool call's last update and a usage_update racing the chunks and the
// answer are equal per stream, and a divergence under --order strict,
// reported as moved; and changes within a stream are named in it.
func TestJudgeOrder(t *testing.T) {
	recorded := turnOutput("ses_1", "call_1a2b3c4d5e6f", "n", "p", "i", "c1", "c2", "d", "u", "a")
	raced := turnOutput("ses_2", "call_9z8y7x6w5v4u", "n", "p", "i", "d", "c1", "c2", "a", "u")
	byStream := func() *normalize.Normalizer { return normalize.New(normalize.Options{}) }
	strict := func() *normalize.Normalizer { return normalize.New(normalize.Options{Order: normalize.Strict}) }
	if v := judged(t, evidence{recorded: memLines(recorded), live: memLines(raced), normalizer: byStream}); len(v.divergences) != 0 || v.diff != "" {
		t.Errorf("per stream: divergences %v, want none", messagesOf(v.divergences))
	}
	if v := judged(t, evidence{recorded: memLines(recorded), live: memLines(raced), normalizer: byStream}); !slices.EqualFunc(v.expected, v.actual, slices.Equal) {
		t.Errorf("per stream: equal streams listed apart:\n%s\n%s", v.expected, v.actual)
	}
	v := judged(t, evidence{recorded: memLines(recorded), live: memLines(raced), normalizer: strict})
	want := `agent output differs at $[3]: expected agent_message_chunk "c1 c2 ", got tool_call_update (completed); ` +
		`the recorded $[3] moved: it is $[4] in the replay; the replayed $[3] is $[4] in the recording`
	if len(v.divergences) != 1 || v.divergences[0].Message != want || v.diff == "" {
		t.Fatalf("strict: divergences %q, want %q and a diff", messagesOf(v.divergences), want)
	}
	if d := v.divergences[0]; d.Turn != 0 || d.Stream != "" || d.Index != 4 || d.MovedTo != 5 || d.MovedFrom != 5 || d.Path != "$[3]" {
		t.Errorf("strict: divergence %+v, want value 4 ($[3]), moved to and from 5", d)
	}

	for _, tc := range []struct {
		name, want string
		live       []string
	}{
		{"in_progress after completed", `agent output differs in turn 1, tool call <toolCallId:1>, update 2: status: expected "in_progress", got "completed"; ` +
			`the recorded update 2 moved: it is update 3 in the replay; the replayed update 2 is update 3 in the recording`,
			[]string{"n", "p", "d", "c1", "c2", "i", "u", "a"}},
		{"a changed status", `agent output differs in turn 1, tool call <toolCallId:1>, update 3: status: expected "completed", got "in_progress"; the replayed update 3 is update 2 in the recording`,
			[]string{"n", "p", "i", "c1", "c2", "i", "u", "a"}},
		{"two chunks swapped", `agent output differs in turn 1, agent message, update 1: content.text: expected "c1 c2 ", got "c2 c1 "`,
			[]string{"n", "p", "i", "c2", "c1", "d", "u", "a"}},
		{"the tool call missing", `agent output differs in turn 1, tool call <toolCallId:1> is missing (3 updates recorded, the first tool_call "Read notes.txt" (pending))`,
			[]string{"n", "c1", "c2", "u", "a"}},
		{"the usage missing", `agent output differs in turn 1, usage_update at the turn's end: expected usage_update {"size":200000,"used":1317}, got nothing`,
			[]string{"n", "p", "i", "c1", "c2", "d", "a"}},
		{"the answer missing", `agent output differs in turn 1, requests and responses, message 2: expected response {"stopReason":"end_turn"}, got nothing`,
			[]string{"n", "p", "i", "c1", "c2", "d", "u"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judged(t, evidence{recorded: memLines(recorded), live: memLines(turnOutput("ses_2", "call_9z8y7x6w5v4u", tc.live...)), normalizer: byStream})
			if len(v.divergences) != 1 || v.divergences[0].Message != tc.want {
				t.Errorf("divergences\n%q\nwant\n%q", messagesOf(v.divergences), tc.want)
			}
			if strings.Contains(v.divergences[0].Message, "expected nothing") {
				t.Errorf("%q says expected nothing where both sides have a value", v.divergences[0].Message)
			}
		})
	}
	// A tool call added is named in the replay's terms.
	v = judged(t, evidence{recorded: memLines(turnOutput("ses_1", "x", "n", "c1", "a")), live: memLines(turnOutput("ses_2", "call_9z8y7x6w5v4u", "n", "p", "c1", "a")), normalizer: byStream})
	if want := `agent output differs in turn 1, tool call <toolCallId:1> was added (1 update, the first tool_call "Read notes.txt" (pending))`; len(v.divergences) != 1 || v.divergences[0].Message != want {
		t.Errorf("a tool call added: divergences %q, want %q", messagesOf(v.divergences), want)
	}
}

func TestJudgeEverything(t *testing.T) {
	wait := &driver.WaitError{Frame: 3, Subject: "frame 3 (session/prompt id=2)", Missing: []string{"the response to editor request id=2 (session/prompt)"}, Err: driver.ErrTimeout}
	missing := &driver.MissingError{Method: "session/request_permission", N: 1}
	report := llmserver.Report{
		Unanswered: []llmserver.Request{{Method: "POST", URL: "https://api.example/v1/chat/completions", Queue: "POST /v1/chat/completions model title", Reason: "the lane was never recorded"}},
		Unrequested: []llmserver.Recorded{{Number: 2, Seq: 9, Exchange: &exchange.Exchange{
			Method: "POST", URL: "https://api.example/v1/chat/completions?key=sk-secret-0123456789",
		}}},
		Drift: []llmserver.Drift{{Number: 1, Mismatch: mismatch.Mismatch{Path: "$.body.model", Recorded: "gpt-5", Live: "gpt-4"}}},
	}
	ev := evidence{
		recorded:   memLines(stream("ses_1", "Hello")),
		live:       memLines(stream("ses_2", "Bonjour")),
		driveErr:   errors.Join(missing, wait),
		llm:        report,
		normalizer: newNormalizer,
	}
	wantKinds := []Kind{OutputDiffers, EditorFailed, EditorFailed, RequestUnanswered, ExchangeUnrequested}
	wantMessages := []string{
		`agent output differs in agent message, update 1: content.text: expected "Hello", got "Bonjour"`,
		"editor side: " + missing.Error(),
		"editor side: " + wait.Error(),
		"llm: POST https://api.example/v1/chat/completions: no recorded exchange for POST /v1/chat/completions model title (the lane was never recorded)",
		"llm #2 (POST https://api.example/v1/chat/completions?key=%5BREDACTED%5D) was recorded but never requested",
	}
	drift := Divergence{
		Kind: RequestDrift, Lane: store.LaneLLM, Exchange: 1, Mismatch: mismatch.Mismatch{Path: "$.body.model", Recorded: "gpt-5", Live: "gpt-4"},
		Message: `llm #1: the request differs from the recording at $.body.model: recorded "gpt-5", live "gpt-4"`,
	}
	for _, mode := range []RequestMode{RequestsWarn, RequestsFail} {
		ev.requests = mode
		v := judged(t, ev)
		kinds, messages := kinds(v.divergences), messagesOf(v.divergences)
		wantWarnings := []Divergence{drift}
		if mode == RequestsFail {
			kinds, messages = kinds[:len(kinds)-1], messages[:len(messages)-1]
			if last := v.divergences[len(v.divergences)-1]; !reflect.DeepEqual(last, drift) {
				t.Errorf("under RequestsFail, the last divergence is %+v, want %+v", last, drift)
			}
			wantWarnings = nil
		}
		if !slices.Equal(kinds, wantKinds) {
			t.Errorf("mode %d: kinds %v, want %v", mode, kinds, wantKinds)
		}
		if !slices.Equal(messages, wantMessages) {
			t.Errorf("mode %d: messages\n%q\nwant\n%q", mode, messages, wantMessages)
		}
		if !reflect.DeepEqual(v.warnings, wantWarnings) {
			t.Errorf("mode %d: warnings %+v, want %+v", mode, v.warnings, wantWarnings)
		}
		if d := v.divergences[2]; !errors.Is(d.Err, driver.ErrTimeout) || d.Lane != store.LaneEditor {
			t.Errorf("the timeout's divergence %+v, want its error and the editor lane", d)
		}
		if d := v.divergences[4]; d.Exchange != 2 || d.Lane != store.LaneLLM {
			t.Errorf("the unrequested exchange's divergence %+v, want llm #2 and the llm lane", d)
		}
	}
}

func messagesOf(ds []Divergence) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.String())
	}
	return out
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{
		OutputDiffers:       "output-differs",
		EditorFailed:        "editor-failed",
		RequestUnanswered:   "request-unanswered",
		ExchangeUnrequested: "exchange-unrequested",
		RequestDrift:        "request-drift",
		0:                   "Kind(0)",
		99:                  "Kind(99)",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

// TestOutputDiffersMessage: the agent's first difference shows two long
// strings around the place where they differ, in one line.
func TestOutputDiffersMessage(t *testing.T) {
	long := strings.Repeat("é", 100)
	for _, tc := range []struct {
		recorded, live any
		want           string
	}{
		{"You said: hi", "Something else", `agent output differs at $[1].x: x: expected "You said: hi", got "Something else"`},
		{normalize.Missing{}, map[string]any{"a": 1.0}, `agent output differs at $[1].x: x: expected (absent), got {"a":1}`},
		{long + "Process Group PGID: 17876, done", long + "Process Group PGID: 17901, done",
			`agent output differs at $[1].x: x, character 123: expected …"` + strings.Repeat("é", 18) + `Process Group PGID: 178` + `76, done", got …"` + strings.Repeat("é", 18) + `Process Group PGID: 17901, done"`},
	} {
		// Under --order strict: the place is the path in the whole output.
		d := &normalize.Difference{Index: 2, Mismatch: mismatch.Mismatch{Path: "$.x", Recorded: tc.recorded, Live: tc.live}, Flat: "$[1].x"}
		if got := outputDiffers(d).Message; got != tc.want {
			t.Errorf("message =\n%s\nwant\n%s", got, tc.want)
		}
	}
}

package replay

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

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

func TestJudgeEqual(t *testing.T) {
	// Other ids, chunks cut elsewhere and a blank line: the same output.
	live := append(stream("ses_2", "Hel"), []byte(""), []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_2","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"lo"}}}}`))
	v := judge(evidence{recorded: stream("ses_1", "Hello"), live: live, normalizer: newNormalizer})
	if len(v.divergences) != 0 || len(v.warnings) != 0 || v.diff != "" {
		t.Errorf("verdict %+v, want no divergence, warning or diff", v)
	}
	if len(v.expected) != 2 || !slices.EqualFunc(v.expected, v.actual, slices.Equal) {
		t.Errorf("normalized streams differ:\n%s\n%s", v.expected, v.actual)
	}
}

func TestJudgeOutput(t *testing.T) {
	v := judge(evidence{recorded: stream("ses_1", "Hello"), live: stream("ses_2", "Bonjour"), normalizer: newNormalizer})
	want := Divergence{
		Kind: OutputDiffers, Lane: store.LaneAgent,
		Path: "$[1].params.update.content.text", Recorded: "Hello", Live: "Bonjour",
		Message: `agent output differs at $[1].params.update.content.text: expected "Hello", got "Bonjour"`,
	}
	if len(v.divergences) != 1 || !reflect.DeepEqual(v.divergences[0], want) {
		t.Fatalf("divergences %+v, want %+v", v.divergences, want)
	}
	for _, line := range []string{"--- recorded\n+++ replayed\n@@ ", "\n-        \"text\": \"Hello\",\n", "\n+        \"text\": \"Bonjour\",\n"} {
		if !strings.Contains(v.diff, line) {
			t.Errorf("diff lacks %q:\n%s", line, v.diff)
		}
	}

	// A line the replay lacks: the recorded value, shortened, and nothing.
	v = judge(evidence{recorded: stream("ses_1", "Hello"), live: stream("ses_2", "Hello")[:1], normalizer: newNormalizer})
	if len(v.divergences) != 1 || v.divergences[0].Message != `agent output differs at $[1]: expected {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"<sessionId:1>","update":{"content":{"text":"Hello","type":"text"},"sessionUpdate":"agent_messa…, got nothing` {
		t.Errorf("missing line: divergences %v", v.divergences)
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
		Drift: []llmserver.Drift{{Number: 1, Path: "$.body.model", Recorded: "gpt-5", Live: "gpt-4"}},
	}
	ev := evidence{
		recorded:   stream("ses_1", "Hello"),
		live:       stream("ses_2", "Bonjour"),
		driveErr:   errors.Join(missing, wait),
		llm:        report,
		normalizer: newNormalizer,
	}
	wantKinds := []Kind{OutputDiffers, EditorFailed, EditorFailed, RequestUnanswered, ExchangeUnrequested}
	wantMessages := []string{
		`agent output differs at $[1].params.update.content.text: expected "Hello", got "Bonjour"`,
		"editor side: " + missing.Error(),
		"editor side: " + wait.Error(),
		"llm: POST https://api.example/v1/chat/completions: no recorded exchange for POST /v1/chat/completions model title (the lane was never recorded)",
		"llm #2 (POST https://api.example/v1/chat/completions?key=%5BREDACTED%5D) was recorded but never requested",
	}
	drift := Divergence{
		Kind: RequestDrift, Lane: store.LaneLLM, Exchange: 1, Path: "$.body.model", Recorded: "gpt-5", Live: "gpt-4",
		Message: `llm #1: the request differs from the recording at $.body.model: recorded "gpt-5", live "gpt-4"`,
	}
	for _, mode := range []RequestMode{RequestsWarn, RequestsFail} {
		ev.requests = mode
		v := judge(ev)
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
		{"You said: hi", "Something else", `agent output differs at $[1].x: expected "You said: hi", got "Something else"`},
		{normalize.Missing{}, map[string]any{"a": 1.0}, `agent output differs at $[1].x: expected nothing, got {"a":1}`},
		{long + "Process Group PGID: 17876, done", long + "Process Group PGID: 17901, done",
			`agent output differs at $[1].x, character 123: expected …"` + strings.Repeat("é", 18) + `Process Group PGID: 178` + `76, done", got …"` + strings.Repeat("é", 18) + `Process Group PGID: 17901, done"`},
	} {
		if got := outputDiffers("$[1].x", tc.recorded, tc.live).Message; got != tc.want {
			t.Errorf("message =\n%s\nwant\n%s", got, tc.want)
		}
	}
}

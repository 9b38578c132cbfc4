package replay

import (
	"fmt"
	"strings"

	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/mismatch"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay/llmserver"
	"github.com/acptap/acptap/store"
)

// A Kind says what diverged in a replay.
type Kind uint8

const (
	// OutputDiffers: the agent's normalized output differs from the
	// recorded.
	OutputDiffers Kind = iota + 1
	// EditorFailed: the replayed editor side could not follow the
	// recording: a wait for the agent timed out or the agent's output
	// ended, an agent request had no recorded answer, or the agent
	// skipped a recorded one (see the errors of package driver).
	EditorFailed
	// RequestUnanswered: the agent made an LLM request that the
	// recording cannot answer.
	RequestUnanswered
	// ExchangeUnrequested: a recorded LLM exchange was never requested.
	ExchangeUnrequested
	// RequestDrift: an LLM request differs, normalized, from its recorded
	// twin. It is a divergence under RequestsFail and a warning under
	// RequestsWarn.
	RequestDrift
	// HTTPUnanswered: the agent made an http request (not to its LLM:
	// wire.ClassHTTP) of a method and URL the recording has no
	// exchange of, and got a 502. A warning, and a divergence under
	// Options.StrictHTTP.
	HTTPUnanswered
	// HTTPUnrequested: a recorded http exchange was never requested.
	// Nothing, and a divergence under Options.StrictHTTP.
	HTTPUnrequested
	// RequestAmbiguous: with several sessions, an LLM request continued
	// two recorded conversations alike, and the replay could not tell
	// which exchange answers it (see llmserver's Matching).
	RequestAmbiguous
	// MCPUnanswered: the agent made a request of an MCP server that the
	// recording has no answer for (a tool call with other arguments, say);
	// its stand-in answered an error.
	MCPUnanswered
	// MCPUnrequested: a recorded call of an MCP server was never made.
	MCPUnrequested
	// MCPDrift: with Options.LiveMCP, an MCP server answered a request
	// otherwise than recorded.
	MCPDrift
)

var kindNames = [...]string{
	OutputDiffers:       "output-differs",
	EditorFailed:        "editor-failed",
	RequestUnanswered:   "request-unanswered",
	ExchangeUnrequested: "exchange-unrequested",
	RequestDrift:        "request-drift",
	HTTPUnanswered:      "http-unanswered",
	HTTPUnrequested:     "http-unrequested",
	RequestAmbiguous:    "request-ambiguous",
	MCPUnanswered:       "mcp-unanswered",
	MCPUnrequested:      "mcp-unrequested",
	MCPDrift:            "mcp-drift",
}

// String returns the kind's name, such as "output-differs", a word a
// report can use as a class or a key.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// A Divergence is one way in which a replay differs from its recording.
// Every report renders divergences from these fields: the text report and
// JUnit print Message, Updatable goes by Kind.
type Divergence struct {
	Kind Kind
	// Lane is the recorded stream concerned: store.LaneAgent for
	// OutputDiffers, store.LaneEditor for EditorFailed, store.LaneLLM for
	// the others.
	Lane store.Lane
	// Exchange is the recorded LLM exchange concerned, numbered as
	// `acptap show` numbers them (the 3 of "llm #3"), for
	// ExchangeUnrequested, RequestDrift and HTTPUnrequested; 0 for the
	// other kinds.
	Exchange int
	// Mismatch is the first differing value: for OutputDiffers its Path
	// in Result.Expected, the normalized agent output as a list of
	// values (in Result.Actual for a value only the replay has),
	// $[3].params.update.content.text; for RequestDrift in the normalized
	// request (see normalize.Normalizer.Request); "" for the other kinds.
	// Recorded and Live are the values there in the recording and in the
	// replay, decoded JSON (a line that is not JSON is its text);
	// normalize.Missing stands for a value one side does not have.
	mismatch.Mismatch

	// Turn, Stream, State and Index place an OutputDiffers divergence in
	// the comparison per stream (see normalize.Transcript): the turn,
	// from 1; the stream ("tool call <toolCallId:1>", "agent message",
	// normalize.RequestsStream, ...) of session Session, or with State
	// the kind of state notification whose value at the turn's end
	// differs; and the position of the value in the stream, from 1 (0
	// for the state, and for a stream one side lacks altogether). Under
	// Options.Order normalize.Strict, Turn is 0, Stream "" and Index the
	// position in the whole output. Zero for the other kinds.
	Turn    int
	Stream  string
	Session string
	State   bool
	Index   int
	// Field is the path inside the value at Index, as the report shows
	// it ("status", "content.text"); "" for the whole value.
	Field string
	// MovedTo is, when the recorded value at Index stands elsewhere in
	// the replay's stream (it moved), its position there, else 0;
	// MovedFrom is, when the replayed value at Index stands elsewhere in
	// the recording's stream, its position there.
	MovedTo, MovedFrom int

	// More is, for RequestDrift, how many other places of the request
	// differ; 0 for the other kinds.
	More int
	// Err is the editor side's error for EditorFailed: a
	// *driver.WaitError, *driver.MismatchError or *driver.MissingError,
	// or the error of a write to the agent; nil for the other kinds. A
	// WaitError's Subject names its frame as `acptap show` numbers it
	// (its Frame is the driver's index).
	Err error
	// Message describes the divergence in one line, as the reports print
	// it.
	Message string
}

// String returns d.Message.
func (d Divergence) String() string { return d.Message }

// outputDiffers is the divergence of the agent's normalized output where
// normalize.Compare found the first difference.
func outputDiffers(d *normalize.Difference) Divergence {
	div := Divergence{
		Kind: OutputDiffers, Lane: store.LaneAgent,
		Mismatch: mismatch.Mismatch{Path: d.Flat, Recorded: d.Recorded, Live: d.Live},
		Turn:     d.Turn, Stream: d.Stream, Session: d.Session, State: d.State, Index: d.Index,
		Field: d.Field(), MovedTo: d.MovedTo, MovedFrom: d.MovedFrom,
	}
	div.Message = "agent output differs " + outputMessage(d, &div)
	return div
}

// outputMessage says where and how the agent's output differs.
func outputMessage(d *normalize.Difference, div *Divergence) string {
	var b strings.Builder
	what := func() {
		_, recordedAbsent := div.Recorded.(normalize.Missing)
		_, liveAbsent := div.Live.(normalize.Missing)
		switch {
		case div.Field != "" && !recordedAbsent && !liveAbsent:
			// Two long strings are shown around where they differ.
			c := mismatch.Pair(div.Recorded, div.Live)
			fmt.Fprintf(&b, "%s%s: expected %s, got %s", div.Field, c.Where(), c.A, c.B)
		case div.Field != "":
			fmt.Fprintf(&b, "%s: expected %s, got %s", div.Field, member(div.Recorded), member(div.Live))
		default:
			fmt.Fprintf(&b, "expected %s, got %s", summary(div.Recorded), summary(div.Live))
		}
	}
	if d.Turn == 0 { // --order strict
		fmt.Fprintf(&b, "at %s: ", div.Path)
		what()
		if div.MovedTo > 0 {
			fmt.Fprintf(&b, "; the recorded $[%d] moved: it is $[%d] in the replay", div.Index-1, div.MovedTo-1)
		}
		if div.MovedFrom > 0 {
			fmt.Fprintf(&b, "; the replayed $[%d] is $[%d] in the recording", div.Index-1, div.MovedFrom-1)
		}
		return b.String()
	}
	b.WriteString("in ")
	switch {
	case d.Answered:
		fmt.Fprintf(&b, "turn %d, ", d.Turn)
	case d.Turn > 1:
		fmt.Fprintf(&b, "after turn %d, ", d.Turn-1)
	}
	stream := d.Stream
	if d.Session != "" && d.Session != "<sessionId:1>" {
		stream += " of " + d.Session
	}
	unit := "update"
	switch d.Stream {
	case normalize.RequestsStream:
		unit = "message"
	case normalize.JunkStream:
		unit = "line"
	}
	switch {
	case d.State && d.Answered:
		fmt.Fprintf(&b, "%s at the turn's end: ", stream)
	case d.State:
		fmt.Fprintf(&b, "%s at the session's end: ", stream)
	case d.Index == 0 && d.GotLen == 0:
		fmt.Fprintf(&b, "%s is missing (%d %s recorded, the first %s)", stream, d.WantLen, plural(d.WantLen, unit), summary(div.Recorded))
		return b.String()
	case d.Index == 0:
		fmt.Fprintf(&b, "%s was added (%d %s, the first %s)", stream, d.GotLen, plural(d.GotLen, unit), summary(div.Live))
		return b.String()
	default:
		fmt.Fprintf(&b, "%s, %s %d: ", stream, unit, d.Index)
	}
	what()
	if div.MovedTo > 0 {
		fmt.Fprintf(&b, "; the recorded %s %d moved: it is %s %d in the replay", unit, div.Index, unit, div.MovedTo)
	}
	if div.MovedFrom > 0 {
		fmt.Fprintf(&b, "; the replayed %s %d is %s %d in the recording", unit, div.Index, unit, div.MovedFrom)
	}
	return b.String()
}

func plural(n int, unit string) string {
	if n == 1 {
		return unit
	}
	return unit + "s"
}

// member formats a member's value for a one-line message: a member one
// side lacks is "(absent)".
func member(v any) string {
	if _, ok := v.(normalize.Missing); ok {
		return "(absent)"
	}
	return brief(v)
}

// summary describes a whole ACP message for a one-line message by what it
// is: "tool_call_update (completed)", "agent_message_chunk "Hello"",
// "session/request_permission request", "response {"stopReason":...}";
// "nothing" for a value one side lacks.
func summary(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return brief(v)
	}
	method, _ := m["method"].(string)
	_, isRequest := m["id"]
	switch {
	case method != "" && isRequest:
		return method + " request"
	case method == "session/update":
		params, _ := m["params"].(map[string]any)
		update, _ := params["update"].(map[string]any)
		kind, _ := update["sessionUpdate"].(string)
		rest := make(map[string]any, len(update))
		for k, v := range update {
			rest[k] = v
		}
		delete(rest, "sessionUpdate")
		switch kind {
		case "tool_call", "tool_call_update":
			out := kind
			if title, ok := update["title"].(string); ok {
				out += " " + brief(title)
			}
			if status, ok := update["status"].(string); ok {
				out += " (" + status + ")"
			}
			return out
		case "agent_message_chunk", "agent_thought_chunk", "user_message_chunk":
			if content, ok := update["content"].(map[string]any); ok && content["text"] != nil {
				return kind + " " + brief(content["text"])
			}
		}
		return kind + " " + brief(rest)
	case method != "":
		return method + " notification"
	}
	if e, ok := m["error"]; ok {
		return "error " + brief(e)
	}
	if r, ok := m["result"]; ok {
		return "response " + brief(r)
	}
	return brief(v)
}

// editorFailed is the divergence of an error of the editor side.
func editorFailed(err error) Divergence {
	return Divergence{Kind: EditorFailed, Lane: store.LaneEditor, Err: err, Message: "editor side: " + err.Error()}
}

// requestUnanswered is the divergence of an LLM request the recording
// could not answer.
func requestUnanswered(r llmserver.Request) Divergence {
	return Divergence{Kind: RequestUnanswered, Lane: store.LaneLLM, Message: "llm: " + r.String()}
}

// exchangeUnrequested is the divergence of a recorded LLM exchange that no
// request consumed.
func exchangeUnrequested(r llmserver.Recorded) Divergence {
	x := r.Exchange
	return Divergence{
		Kind: ExchangeUnrequested, Lane: store.LaneLLM, Exchange: r.Number,
		Message: fmt.Sprintf("llm #%d (%s %s) was recorded but never requested", r.Number, x.Method, redact.New(nil).URL(x.URL)),
	}
}

// mcpDivergence is the divergence of a request of MCP server server, as
// its stand-in summarized it.
func mcpDivergence(kind Kind, server, request string) Divergence {
	msg := fmt.Sprintf("MCP server %s: the agent asked %s, which the recording has no answer for", server, request)
	switch kind {
	case MCPUnrequested:
		msg = fmt.Sprintf("MCP server %s: the recorded %s was never asked", server, request)
	case MCPDrift:
		msg = fmt.Sprintf("MCP server %s: %s", server, request)
	}
	return Divergence{Kind: kind, Lane: store.LaneAgent, Message: msg}
}

// requestAmbiguous is the divergence of a request that continued two
// recorded conversations alike.
func requestAmbiguous(a llmserver.Ambiguity) Divergence {
	return Divergence{Kind: RequestAmbiguous, Lane: store.LaneLLM, Exchange: a.Numbers[0], Message: a.String()}
}

// requestDrift is the divergence, or the warning, of an LLM request that
// differs from its recorded twin.
func requestDrift(d llmserver.Drift) Divergence {
	return Divergence{
		Kind: RequestDrift, Lane: store.LaneLLM, Exchange: d.Number,
		Mismatch: d.Mismatch, More: d.More,
		Message: d.String(),
	}
}

// brief formats a value for a one-line message.
func brief(v any) string { return mismatch.Value(v) }

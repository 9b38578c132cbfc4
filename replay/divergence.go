package replay

import (
	"fmt"

	"github.com/acptap/acptap/internal/excerpt"
	"github.com/acptap/acptap/internal/redact"
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
	// exchange.ClassHTTP) of a method and URL the recording has no
	// exchange of, and got a 502. A warning, and a divergence under
	// Options.StrictHTTP.
	HTTPUnanswered
	// HTTPUnrequested: a recorded http exchange was never requested.
	// Nothing, and a divergence under Options.StrictHTTP.
	HTTPUnrequested
)

var kindNames = [...]string{
	OutputDiffers:       "output-differs",
	EditorFailed:        "editor-failed",
	RequestUnanswered:   "request-unanswered",
	ExchangeUnrequested: "exchange-unrequested",
	RequestDrift:        "request-drift",
	HTTPUnanswered:      "http-unanswered",
	HTTPUnrequested:     "http-unrequested",
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
	// Path is the JSON path of the first differing value, for
	// OutputDiffers in the normalized agent stream, an array of its
	// values ($[3].params.update.content.text), and for RequestDrift in
	// the normalized request (see normalize.Normalizer.Request); "" for
	// the other kinds.
	Path string
	// Recorded and Live are the values at Path in the recording and in
	// the replay, decoded JSON (a line that is not JSON is its text);
	// normalize.Missing stands for a value one side does not have.
	Recorded, Live any
	// More is, for RequestDrift, how many other places of the request
	// differ; 0 for the other kinds.
	More int
	// Err is the editor side's error for EditorFailed: a
	// *driver.WaitError, *driver.MismatchError or *driver.MissingError,
	// or the error of a write to the agent; nil for the other kinds.
	Err error
	// Message describes the divergence in one line, as the reports print
	// it.
	Message string
}

// String returns d.Message.
func (d Divergence) String() string { return d.Message }

// outputDiffers is the divergence of the agent's normalized output at
// path.
func outputDiffers(path string, recorded, live any) Divergence {
	c := excerpt.Pair(recorded, live)
	return Divergence{
		Kind: OutputDiffers, Lane: store.LaneAgent,
		Path: path, Recorded: recorded, Live: live,
		Message: fmt.Sprintf("agent output differs at %s%s: expected %s, got %s", path, c.Where(), c.A, c.B),
	}
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

// requestDrift is the divergence, or the warning, of an LLM request that
// differs from its recorded twin.
func requestDrift(d llmserver.Drift) Divergence {
	return Divergence{
		Kind: RequestDrift, Lane: store.LaneLLM, Exchange: d.Number,
		Path: d.Path, Recorded: d.Recorded, Live: d.Live, More: d.More,
		Message: d.String(),
	}
}

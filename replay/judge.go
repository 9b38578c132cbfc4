package replay

import (
	"encoding/json"
	"errors"

	"github.com/acptap/acptap/internal/textdiff"
	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay/driver"
	"github.com/acptap/acptap/replay/llmserver"
	"github.com/acptap/acptap/replay/mcpstandin"
)

// evidence is what a replay's verdict is drawn from.
type evidence struct {
	// recorded and live are the frames in the recording and in the
	// replay, blank lines left out: the agent's stdout lines, and the
	// editor's, which the comparison reads to know which request each of
	// the agent's answers and to which session it belongs (see
	// normalize.Options.OmitEditor).
	recorded, live lane.Lines
	// keep asks for the normalized streams in the verdict, whether they
	// differ or not; without, they are compared on digests first and
	// listed only when they differ.
	keep bool
	// driveErr is the editor side's error (see agentRun), nil if none.
	driveErr error
	// llm is the LLM server's report.
	llm llmserver.Report
	// requests says whether request drift is a divergence or a warning.
	requests RequestMode
	// strictHTTP makes the http exchanges' misses divergences.
	strictHTTP bool
	// normalizer returns a fresh Normalizer for each stream.
	normalizer func() *normalize.Normalizer
	// rules are the normalizer's rules: of the editor side's errors, those
	// of an agent request a presence rule makes optional are none.
	rules []normalize.Rule
	// mcp are what the MCP servers' stand-ins saw, by server.
	mcp []mcpstandin.Report
}

// verdict is the outcome of a replay's comparison.
type verdict struct {
	// divergences are, in this order: the agent's output
	// (OutputDiffers), the editor side's errors, the LLM requests the
	// recording could not answer, the recorded exchanges never
	// requested, the requests that continued two recorded conversations
	// alike, and request drift under RequestsFail.
	divergences []Divergence
	// warnings are request drift under RequestsWarn.
	warnings []Divergence
	// diff is the unified diff of the pretty normalized streams, "" when
	// the agent's output is the same.
	diff             string
	expected, actual []json.RawMessage // the normalized streams, listed for the diff (normalize.Comparison); nil if equal unless evidence.keep
	// transcripts are the normalized streams, recorded and replayed, per
	// turn and stream; nil if equal unless evidence.keep.
	transcripts [2]*normalize.Transcript
}

// judge compares the agent's normalized output with the recorded and
// collects every divergence, first the agent's output's, which the
// reports show first. It fails only if the lines cannot be read.
func judge(ev evidence) (verdict, error) {
	var v verdict
	c, transcripts, err := compareOutput(ev.normalizer, ev.recorded, ev.live, ev.keep)
	if err != nil {
		return verdict{}, err
	}
	v.expected, v.actual, v.transcripts = c.Want, c.Got, transcripts
	if c.Diff != nil {
		v.divergences = append(v.divergences, outputDiffers(c.Diff))
		v.diff = textdiff.Unified("recorded", "replayed", textdiff.Pretty(v.expected), textdiff.Pretty(v.actual))
	}
	if ev.driveErr != nil {
		for _, e := range unjoin(ev.driveErr) {
			if optionalRequest(ev.rules, e) {
				continue
			}
			v.divergences = append(v.divergences, editorFailed(e))
		}
	}
	for _, u := range ev.llm.Unanswered {
		v.divergences = append(v.divergences, requestUnanswered(u))
	}
	for _, u := range ev.llm.Unrequested {
		v.divergences = append(v.divergences, exchangeUnrequested(u))
	}
	for _, a := range ev.llm.Ambiguous {
		v.divergences = append(v.divergences, requestAmbiguous(a))
	}
	for _, r := range ev.mcp {
		for _, u := range r.Unanswered {
			v.divergences = append(v.divergences, mcpDivergence(MCPUnanswered, r.Server, u))
		}
		for _, u := range r.Unrequested {
			v.divergences = append(v.divergences, mcpDivergence(MCPUnrequested, r.Server, u))
		}
		for _, d := range r.Drift {
			v.divergences = append(v.divergences, mcpDivergence(MCPDrift, r.Server, d))
		}
	}
	for _, d := range ev.llm.Drift {
		if ev.requests == RequestsFail {
			v.divergences = append(v.divergences, requestDrift(d))
		} else {
			v.warnings = append(v.warnings, requestDrift(d))
		}
	}
	v.judgeHTTP(ev.llm, ev.strictHTTP)
	return v, nil
}

// optionalRequest reports whether err, an error of the editor side, is
// an agent request missing or extra (a *driver.MissingError or
// *driver.MismatchError) of a method a presence rule of rules makes
// optional: the comparison of the agent's output, which the rule places,
// judges it.
func optionalRequest(rules []normalize.Rule, err error) bool {
	var missing *driver.MissingError
	if errors.As(err, &missing) {
		return normalize.OptionalRequest(rules, missing.Method)
	}
	var extra *driver.MismatchError
	if errors.As(err, &extra) {
		return normalize.OptionalRequest(rules, extra.Method)
	}
	return false
}

// compareOutput compares two agent streams, each normalized by a fresh
// normalizer, reading their lines a turn at a time. Unless keep, it
// compares their digests first (normalize.DigestTranscript), which holds
// 24 bytes per value, and returns an empty Comparison when they are
// equal; else, and when they differ, it compares the values, for the
// diff, and returns the two transcripts too.
func compareOutput(normalizer func() *normalize.Normalizer, recorded, live lane.Lines, keep bool) (normalize.Comparison, [2]*normalize.Transcript, error) {
	var none [2]*normalize.Transcript
	if !keep {
		want, err := normalizer().DigestTranscript(recorded)
		if err != nil {
			return normalize.Comparison{}, none, err
		}
		got, err := normalizer().DigestTranscript(live)
		if err != nil {
			return normalize.Comparison{}, none, err
		}
		if normalize.Compare(want, got).Diff == nil {
			return normalize.Comparison{}, none, nil
		}
	}
	want, err := normalizer().ReadTranscript(recorded)
	if err != nil {
		return normalize.Comparison{}, none, err
	}
	got, err := normalizer().ReadTranscript(live)
	if err != nil {
		return normalize.Comparison{}, none, err
	}
	return normalize.Compare(want, got), [2]*normalize.Transcript{want, got}, nil
}

// unjoin splits an errors.Join error.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

package replay

import (
	"bytes"
	"encoding/json"

	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay/llmserver"
)

// evidence is what a replay's verdict is drawn from.
type evidence struct {
	// recorded and live are the agent's stdout lines in the recording
	// and in the replay.
	recorded, live [][]byte
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
}

// verdict is the outcome of a replay's comparison.
type verdict struct {
	// divergences are, in this order: the agent's output
	// (OutputDiffers), the editor side's errors, the LLM requests the
	// recording could not answer, the recorded exchanges never
	// requested, and request drift under RequestsFail.
	divergences []Divergence
	// warnings are request drift under RequestsWarn.
	warnings []Divergence
	// diff is the unified diff of the pretty normalized streams, "" when
	// the agent's output is the same.
	diff             string
	expected, actual []json.RawMessage // the normalized streams, listed for the diff (normalize.Comparison)
}

// judge compares the agent's normalized output with the recorded and
// collects every divergence, first the agent's output's, which the
// reports show first.
func judge(ev evidence) verdict {
	var v verdict
	want := transcript(ev.normalizer(), ev.recorded)
	ev.recorded = nil // normalized: the lines can go, if the caller let go of them
	c := normalize.Compare(want, transcript(ev.normalizer(), ev.live))
	v.expected, v.actual = c.Want, c.Got
	if c.Diff != nil {
		v.divergences = append(v.divergences, outputDiffers(c.Diff))
		v.diff = unifiedDiff("recorded", "replayed", pretty(v.expected), pretty(v.actual))
	}
	if ev.driveErr != nil {
		for _, e := range unjoin(ev.driveErr) {
			v.divergences = append(v.divergences, editorFailed(e))
		}
	}
	for _, u := range ev.llm.Unanswered {
		v.divergences = append(v.divergences, requestUnanswered(u))
	}
	for _, u := range ev.llm.Unrequested {
		v.divergences = append(v.divergences, exchangeUnrequested(u))
	}
	for _, d := range ev.llm.Drift {
		if ev.requests == RequestsFail {
			v.divergences = append(v.divergences, requestDrift(d))
		} else {
			v.warnings = append(v.warnings, requestDrift(d))
		}
	}
	v.judgeHTTP(ev.llm, ev.strictHTTP)
	return v
}

// transcript normalizes agent stdout lines (blank lines dropped: they
// carry nothing and agents differ in emitting them) and arranges them for
// comparison.
func transcript(n *normalize.Normalizer, lines [][]byte) *normalize.Transcript {
	frames := make([]normalize.Frame, 0, len(lines))
	for _, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		frames = append(frames, normalize.Frame{Side: normalize.Agent, Line: l})
	}
	return n.Transcript(frames)
}

// pretty renders a normalized stream as indented JSON, one value after
// the other, for the diff.
func pretty(msgs []json.RawMessage) string {
	var b bytes.Buffer
	for _, m := range msgs {
		// No index markers: after an insertion they would all differ and
		// bury the real change; the first divergence names the index.
		if err := json.Indent(&b, m, "", "  "); err != nil {
			b.Write(m)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// unjoin splits an errors.Join error.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

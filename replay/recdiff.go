package replay

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/textdiff"
	"github.com/acptap/acptap/internal/wire"
	"github.com/acptap/acptap/mismatch"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay/llmserver"
	"github.com/acptap/acptap/store"
)

// DiffOptions configure Diff. The zero value compares with the default
// normalization, per stream, chunks joined.
type DiffOptions struct {
	// Rules are user normalization rules, applied before the rules
	// `acptap calibrate` stored with either recording.
	Rules      []normalize.Rule
	NoCoalesce bool
	Order      normalize.Order
	// LabelA and LabelB name the two recordings in the result and its
	// report ("previous", "new"). If empty, their names.
	LabelA, LabelB string
}

// A DiffResult is how two recordings compare: their agent streams as a
// replay compares a recording with its replay, A in the recording's place
// and B in the replay's, and their LLM requests in order.
type DiffResult struct {
	A, B string
	// Divergences are the agent streams' first difference
	// (OutputDiffers), then each LLM request that differs (RequestDrift,
	// Exchange the request's number in A, or in B for a request only B
	// has); empty when the two compare equal.
	Divergences []Divergence
	// Diff is the unified diff of the normalized agent streams, as
	// Result.Diff; Expected and Actual are the streams of A and B.
	Diff             string
	Expected, Actual []json.RawMessage
	// Requests are the LLM requests (wire.ClassLLM) of A and B,
	// normalized, pair by pair in order, Number counting them from 1; a
	// request one side lacks is normalize.Missing there.
	Requests []RequestPair
}

// Equal reports whether the two recordings compare equal.
func (r *DiffResult) Equal() bool { return len(r.Divergences) == 0 }

// Diff compares recordings a and b of st with the normalization and the
// per-stream comparison of a replay: paths under either recording's
// directories are alike, and the rules calibrate stored with either
// apply. It fails only when a recording cannot be read.
func Diff(st *store.Store, a, b string, opts DiffOptions) (*DiffResult, error) {
	return DiffStores(st, a, st, b, opts)
}

// DiffStores is Diff of recording a of store sa and recording b of store
// sb: a recording and its new version kept in another store (acptap
// rerecord), say. The names may be the same.
func DiffStores(sa *store.Store, a string, sb *store.Store, b string, opts DiffOptions) (*DiffResult, error) {
	ra, err := load(sa, a)
	if err != nil {
		return nil, err
	}
	defer ra.close()
	rb, err := load(sb, b)
	if err != nil {
		return nil, err
	}
	defer rb.close()
	rules := slices.Clip(opts.Rules)
	for _, src := range []struct {
		st   *store.Store
		name string
	}{{sa, a}, {sb, b}} {
		stored, err := StoredRules(src.st, src.name)
		if err != nil {
			return nil, err
		}
		rules = append(rules, stored...)
	}
	norms := normalizersOf(normalize.Options{
		Cwd:        nonEmpty(slices.Concat(ra.cwds, []string{ra.meta.Cwd}, rb.cwds, []string{rb.meta.Cwd})...),
		Home:       nonEmpty(ra.meta.Home, rb.meta.Home),
		Tmp:        nonEmpty(ra.meta.Tmp, rb.meta.Tmp),
		Rules:      rules,
		NoCoalesce: opts.NoCoalesce,
		OmitEditor: true,
		Order:      opts.Order,
	})
	// From here on a and b are what the report calls the recordings.
	a, b = cmp.Or(opts.LabelA, a), cmp.Or(opts.LabelB, b)
	res := &DiffResult{A: a, B: b}
	c, _, err := compareOutput(norms.new, ra.acpLines(), rb.acpLines(), true)
	if err != nil {
		return nil, err
	}
	res.Expected, res.Actual = c.Want, c.Got
	if c.Diff != nil {
		res.Divergences = append(res.Divergences, outputDiffers(c.Diff))
		res.Diff = textdiff.Unified(a, b, textdiff.Pretty(c.Want), textdiff.Pretty(c.Got))
	}
	la, lb := llmExchanges(ra), llmExchanges(rb)
	for i := range max(len(la), len(lb)) {
		p := RequestPair{Number: i + 1, Recorded: normalize.Missing{}, Live: normalize.Missing{}}
		var xa, xb *exchange.Exchange
		if i < len(la) {
			if xa, err = ra.load(la[i]); err != nil {
				return nil, err
			}
		}
		if i < len(lb) {
			if xb, err = rb.load(lb[i]); err != nil {
				return nil, err
			}
		}
		switch {
		case xa == nil:
			p.Live = norms.new().Request(xb.Method, xb.URL, xb.RequestHeaders, xb.RequestBody)
			res.Divergences = append(res.Divergences, Divergence{
				Kind: RequestDrift, Lane: store.LaneLLM, Exchange: i + 1, Mismatch: mismatch.Mismatch{Path: "$", Recorded: p.Recorded, Live: p.Live},
				Message: fmt.Sprintf("llm request %d (%s %s) is in %s only", i+1, xb.Method, xb.URL, b),
			})
		case xb == nil:
			p.Recorded = norms.new().Request(xa.Method, xa.URL, xa.RequestHeaders, xa.RequestBody)
			res.Divergences = append(res.Divergences, Divergence{
				Kind: RequestDrift, Lane: store.LaneLLM, Exchange: i + 1, Mismatch: mismatch.Mismatch{Path: "$", Recorded: p.Recorded, Live: p.Live},
				Message: fmt.Sprintf("llm request %d (%s %s) is in %s only", i+1, xa.Method, xa.URL, a),
			})
		default:
			p.Recorded, p.Live = norms.requests(xa, xb)
			if d, ok := drift(p.Recorded, p.Live); ok {
				d.Number = i + 1
				div := requestDrift(d)
				div.Message = driftMessage(d, a, b)
				res.Divergences = append(res.Divergences, div)
			}
		}
		res.Requests = append(res.Requests, p)
	}
	return res, nil
}

// llmExchanges returns the exchanges of rec that went to its LLM, in
// order: the http ones (registries, telemetry) are the agent's business.
func llmExchanges(rec *recording) []llmserver.Recorded {
	var out []llmserver.Recorded
	for _, r := range rec.exchanges {
		if wire.ClassOfExchange(r.Exchange) == wire.ClassLLM {
			out = append(out, r)
		}
	}
	return out
}

// driftMessage is a request drift's line, in replay's words with the
// recordings' names in place of recorded and live.
func driftMessage(d llmserver.Drift, a, b string) string {
	return fmt.Sprintf("llm request %d differs %s", d.Number, d.Between(a, b))
}

// WriteDiffReport writes the outcome of Diff in the words of a replay's
// report (WriteReport): a SAME or DIFFERENT line with the first
// difference, the others after "also:", then the diff of the agent
// streams. Of opts, only Paint applies; DIFFERENT is painted as FAIL and
// SAME as PASS.
func WriteDiffReport(w io.Writer, res *DiffResult, opts ReportOptions) error {
	paint := opts.Paint
	if paint == nil {
		paint = func(_ Part, s string) string { return s }
	}
	var b strings.Builder
	if res.Equal() {
		fmt.Fprintf(&b, "%s %s %s (%d agent values, %d LLM requests)\n", paint(PartPass, "SAME"), res.A, res.B, len(res.Expected), len(res.Requests))
	} else {
		fmt.Fprintf(&b, "%s %s %s: %s\n", paint(PartFail, "DIFFERENT"), res.A, res.B, res.Divergences[0].Message)
		for _, d := range res.Divergences[1:] {
			fmt.Fprintf(&b, "  also: %s\n", d.Message)
		}
		writeDiff(&b, res.Diff, paint)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Package calibrate learns an agent's noise: it replays a recording several times with the recorded agent and generalises the values that vary between the runs into normalization rules, which later replays apply.
//
// normalize applies rules; calibrate makes them. Learn is the learning,
// from samples of values the runs produced (learn.go), and Run the
// replays that give it samples; both report the places no narrow rule
// covers as one Conflict type.
//
// A replay already normalizes what every agent varies (ids, times, paths
// under the session's directories; see package normalize). What is left
// is the agent's own: a temporary directory it makes for each run, a
// token in a field no default rule knows, a process group id in a tool's
// output. Run replays the recording Options.Runs times, with the rules
// stored by an earlier calibration left out, and compares the normalized
// agent output, LLM requests and MCP calls (with the servers served from
// the recording, or live ones' answers) of the runs, and of the
// recording. Where a stream of the output has frames some runs lack,
// learnPresence makes presence rules of them (a tool call's last update,
// an agent request of one method after a frame of one kind), and the runs
// are made again with those rules, which number what follows alike.
// Then, frame by frame and request by request in their order: where they
// differ only in strings and numbers, Learn makes rules of the values;
// where they differ in more (a frame missing or extra that no presence
// rule describes, a different tool call, a request more, an editor side
// that could not follow), or where every run differs from the recording
// the same way (a rare behaviour the recording caught, or a change: not
// noise), the Result has Conflicts and Save refuses it. Save stores the
// rules with the recording (store.RulesBlob), replacing those of an
// earlier calibration; replay.Run applies them.
package calibrate

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/acptap/acptap/mismatch"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/store"
)

// DefaultRuns is how many times Run replays a recording by default.
const DefaultRuns = 3

// Options configure Run. The zero value replays DefaultRuns times with
// replay's defaults.
type Options struct {
	// Runs is how many times to replay the recording. If zero,
	// DefaultRuns.
	Runs int
	// Replay are the options of each replay: the agent command, its
	// environment and workspace, the wait, the user's rules. Run leaves
	// out the rules stored with the recording, keeps the requests, and
	// makes request drift a warning. It must inject no faults.
	Replay replay.Options
}

// Result is what Run learned from one recording.
type Result struct {
	Name string
	Runs int // replays made: Options.Runs, or fewer when one diverged in more than the agent's output, or twice as many when frames some runs lack were learned
	// Rules are the rules learned, in the order they apply, presence
	// rules first (their Sample is -1 and their Path the stream); empty
	// when nothing varies. Meaningful only when Conflicts is empty.
	Rules []Learned
	// Conflicts are the ways the runs differ in more than values: the
	// divergences of the first replay that diverged in more than the
	// agent's output (the replays stop there), or the first frame more
	// or fewer, or one per frame or request that differs in more;
	// nothing is learned when there are any.
	Conflicts []Conflict
}

// Calibrated reports whether the runs differ in values only, so that the
// rules cover all they differ in.
func (r *Result) Calibrated() bool { return len(r.Conflicts) == 0 }

// A Kind says how runs differ in more than values.
type Kind uint8

const (
	// Diverged: a replay diverged in more than the agent's output: the
	// editor side could not follow the recording, or an LLM request had
	// no recorded answer, or a recorded one was never requested.
	Diverged Kind = iota + 1
	// Structure: a frame or a request differs in more than a value: a
	// member, an element or a whole frame one side lacks, values of
	// different types.
	Structure
	// Steady: every run has the same value there, or the same frames,
	// and the recording another: the recording caught a rare behaviour
	// (replay --update takes the usual one), or the agent changed.
	Steady
	// Shapeless: the values vary in a way no narrow rule describes.
	Shapeless
)

var kindNames = [...]string{Diverged: "diverged", Structure: "structure", Steady: "steady", Shapeless: "shapeless"}

// String returns the kind's name: "diverged", "structure", "steady" or
// "shapeless".
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// A Conflict is one way in which the runs differ in more than values.
type Conflict struct {
	Kind Kind
	// Run is the 1-based replay that differs from the recording (the
	// first of them for Steady).
	Run int
	// Mismatch is the place, its Path rooted at the agent's normalized
	// output ("agent output $[7].params.update.status") or at a
	// normalized request ("llm #2 $.body.messages[1]"), and the values
	// there (normalize.Missing for a missing one); zero for Diverged.
	mismatch.Mismatch
	// Divergence is the replay's, for Diverged.
	Divergence *replay.Divergence
}

// String describes c in one line.
func (c Conflict) String() string {
	if c.Kind == Diverged {
		return fmt.Sprintf("run %d diverged in more than the agent's output: %s", c.Run, c.Divergence.Message)
	}
	values := c.Mismatch.String()
	switch c.Kind {
	case Steady:
		return fmt.Sprintf("every run differs from the recording the same way, which is no noise: the recording caught a rare behaviour, or the agent changed since; at %s", values)
	case Shapeless:
		return fmt.Sprintf("run %d varies in a way no narrow rule describes at %s", c.Run, values)
	}
	return fmt.Sprintf("run %d differs from the recording in more than values at %s", c.Run, values)
}

// Run replays recording name of st opts.Runs times and learns the rules
// that make the runs and the recording compare equal. It fails as
// replay.Run fails, when a replay cannot run, or with ErrRuns or
// ErrFaults; how the runs differ is in the Result.
func Run(ctx context.Context, st *store.Store, name string, opts Options) (*Result, error) {
	runs := opts.Runs
	switch {
	case runs == 0:
		runs = DefaultRuns
	case runs < 0:
		return nil, fmt.Errorf("%w: %d, want 1 or more", ErrRuns, runs)
	}
	if r := opts.Replay; len(r.Faults) > 0 || len(r.MCPFaults) > 0 || len(r.StdioFaults) > 0 {
		return nil, fmt.Errorf("%w: %d LLM, %d MCP and %d stdio faults given; calibrate with none", ErrFaults, len(r.Faults), len(r.MCPFaults), len(r.StdioFaults))
	}
	ro := opts.Replay
	ro.Uncalibrated = true
	ro.KeepRequests = true
	ro.MCPCalls = true
	ro.Requests = replay.RequestsWarn
	out := &Result{Name: name}
	// The first runs learn which frames some runs lack; runs with those
	// rules then number the rest alike (an agent request one run lacks
	// shifts the ids of the next) and learn the values.
	var presence []Learned
	for round := 1; ; round++ {
		results, err := replays(ctx, st, name, ro, runs, out)
		if err != nil || len(out.Conflicts) > 0 {
			return out, err
		}
		more, conflicts := learnPresence(results)
		if len(conflicts) == 0 {
			conflicts = unexplained(results, append(slices.Clone(presence), more...), ro.Rules)
		}
		if len(conflicts) > 0 {
			out.Conflicts = conflicts
			return out, nil
		}
		if len(more) > 0 {
			if round == maxRounds {
				out.Conflicts = []Conflict{{Kind: Structure, Run: 1, Mismatch: mismatch.Mismatch{
					Path: more[0].Path, Recorded: "the frames of the rules learned before", Live: more[0].Rule.String()}}}
				return out, nil
			}
			presence = append(presence, more...)
			ro.Rules = slices.Clip(ro.Rules)
			for _, l := range more {
				ro.Rules = append(ro.Rules, l.Rule)
			}
			continue
		}
		samples, conflicts := agentSamples(results)
		more2, c := requestSamples(results)
		samples, conflicts = append(samples, more2...), append(conflicts, c...)
		more2, c = mcpSamples(results)
		samples, conflicts = append(samples, more2...), append(conflicts, c...)
		if len(conflicts) > 0 {
			out.Conflicts = conflicts
			return out, nil
		}
		learned, lc := Learn(samples)
		out.Conflicts = lc
		if len(out.Conflicts) == 0 {
			out.Rules = append(presence, learned...)
		}
		return out, nil
	}
}

// maxRounds bounds the rounds of runs of Run: the first learns which
// frames some runs lack, the next the values, or frames lacking that the
// first did not see.
const maxRounds = 3

// replays replays recording name of st runs times with ro, counting them
// in out.Runs, and returns their results. A replay that diverged in more
// than the agent's output adds a Diverged conflict to out and ends the
// replays, unless it is an agent request missing or extra, which
// learnPresence judges from the output.
func replays(ctx context.Context, st *store.Store, name string, ro replay.Options, runs int, out *Result) ([]*replay.Result, error) {
	results := make([]*replay.Result, 0, runs)
	for i := range runs {
		res, err := replay.Run(ctx, st, name, ro)
		if err == nil {
			// A replay cut short learns nothing, and the runs left
			// would start only to be stopped.
			err = ctx.Err()
		}
		if err != nil {
			return nil, err
		}
		out.Runs++
		results = append(results, res)
		for _, d := range res.Divergences {
			if _, ok := presenceError(d); d.Kind != replay.OutputDiffers && !ok {
				out.Conflicts = append(out.Conflicts, Conflict{Kind: Diverged, Run: i + 1, Divergence: &d})
			}
		}
		if len(out.Conflicts) > 0 {
			// Nothing can be learned: the runs left would tell no more.
			return results, nil
		}
	}
	return results, nil
}

// unexplained returns a Diverged conflict for each agent request missing
// or extra in a run (see presenceError) of a method no presence rule of
// learned or of rules makes optional.
func unexplained(results []*replay.Result, learned []Learned, rules []normalize.Rule) []Conflict {
	all := slices.Clone(rules)
	for _, l := range learned {
		all = append(all, l.Rule)
	}
	var conflicts []Conflict
	for i, res := range results {
		for _, d := range res.Divergences {
			if method, ok := presenceError(d); ok && !normalize.OptionalRequest(all, method) {
				conflicts = append(conflicts, Conflict{Kind: Diverged, Run: i + 1, Divergence: &d})
			}
		}
	}
	return conflicts
}

// agentSamples returns the frames of the normalized agent output, one
// sample per frame of the recording and each run, or the places where a
// run has a frame more or fewer.
//
// A run whose output replay judged equal to the recording's has nothing
// to teach, and its values are taken as the recording's: replay's
// comparison places a state notification by its value at the turn's end
// and lets its first one come a turn later, so the streams it lists may
// differ in length and order where it found them equal (codex-acp's
// available_commands_update, racing its first turn), which is no conflict.
// The recording's values are those of the first run that differs, as that
// comparison listed them.
func agentSamples(results []*replay.Result) ([]Sample, []Conflict) {
	first := slices.IndexFunc(results, outputDiffers)
	if first < 0 {
		return nil, nil // every run as recorded: nothing to learn
	}
	expected := results[first].Expected
	actual := func(res *replay.Result) []json.RawMessage {
		if outputDiffers(res) {
			return res.Actual
		}
		return expected
	}
	for i, res := range results {
		if got := actual(res); len(got) != len(expected) {
			c := frameMoreOrFewer(expected, got)
			c.Run = i + 1
			return nil, []Conflict{c}
		}
	}
	samples := make([]Sample, len(expected))
	for k, frame := range expected {
		values := make([]any, 0, 1+len(results))
		values = append(values, frame)
		for _, res := range results {
			values = append(values, actual(res)[k])
		}
		samples[k] = Sample{Name: fmt.Sprintf("agent output $[%d]", k), Values: values}
	}
	return samples, nil
}

// outputDiffers reports whether replay found the run's agent output
// different from the recording's.
func outputDiffers(res *replay.Result) bool {
	return slices.ContainsFunc(res.Divergences, func(d replay.Divergence) bool { return d.Kind == replay.OutputDiffers })
}

// frameMoreOrFewer returns the place where one of two streams of
// different lengths has a frame more or fewer: the first difference in
// more than a string or a number, as a frame of another kind in its
// place, or else the first frame past the shorter.
func frameMoreOrFewer(expected, actual []json.RawMessage) Conflict {
	for k := range min(len(expected), len(actual)) {
		for _, d := range normalize.Mismatches(expected[k], actual[k]) {
			if !sameScalarType(d.Recorded, d.Live) {
				return Conflict{Kind: Structure, Mismatch: mismatch.Mismatch{Path: fmt.Sprintf("agent output $[%d]%s", k, d.Path[1:]), Recorded: d.Recorded, Live: d.Live}}
			}
		}
	}
	k := min(len(expected), len(actual))
	c := Conflict{Kind: Structure, Mismatch: mismatch.Mismatch{Path: fmt.Sprintf("agent output $[%d]", k), Recorded: normalize.Missing{}, Live: normalize.Missing{}}}
	if k < len(expected) {
		c.Recorded = expected[k]
	} else {
		c.Live = actual[k]
	}
	return c
}

// requestSamples returns the normalized LLM requests, one sample per
// recorded exchange with the recorded request and each run's, or the
// places where a run made another number of requests of one.
func requestSamples(results []*replay.Result) ([]Sample, []Conflict) {
	type pairs struct {
		recorded any
		live     [][]any // by run
	}
	byNumber := map[int]*pairs{}
	for i, res := range results {
		for _, p := range res.Requests {
			e := byNumber[p.Number]
			if e == nil {
				e = &pairs{recorded: p.Recorded, live: make([][]any, len(results))}
				byNumber[p.Number] = e
			}
			e.live[i] = append(e.live[i], p.Live)
		}
	}
	var samples []Sample
	var conflicts []Conflict
	for _, n := range slices.Sorted(maps.Keys(byNumber)) {
		e := byNumber[n]
		values := []any{e.recorded}
		for i, live := range e.live {
			if len(live) != 1 {
				// A retry, or a request missing: the replay reports an
				// unrequested exchange in that case, but a retry
				// consumes nothing.
				conflicts = append(conflicts, Conflict{Kind: Structure, Run: i + 1, Mismatch: mismatch.Mismatch{
					Path: fmt.Sprintf("llm #%d $", n), Recorded: "1 request", Live: fmt.Sprintf("%d requests", len(live))}})
				break
			}
			values = append(values, live[0])
		}
		samples = append(samples, Sample{Name: fmt.Sprintf("llm #%d $", n), Values: values})
	}
	return samples, conflicts
}

// mcpSamples returns the MCP calls the runs made of the servers served
// from the recording, and the live servers' answers, one sample per
// recorded call (or answer) with the recorded one and each run's, or the
// places where a run made a call another number of times.
func mcpSamples(results []*replay.Result) ([]Sample, []Conflict) {
	type key struct {
		server  string
		request int
		answer  bool
	}
	type pairs struct {
		recorded any
		live     [][]any // by run
	}
	var order []key
	byKey := map[key]*pairs{}
	for i, res := range results {
		for _, c := range res.MCPCalls {
			k := key{c.Server, c.Request, c.Answer}
			e := byKey[k]
			if e == nil {
				e = &pairs{recorded: c.Recorded, live: make([][]any, len(results))}
				byKey[k] = e
				order = append(order, k)
			}
			e.live[i] = append(e.live[i], c.Live)
		}
	}
	var samples []Sample
	var conflicts []Conflict
	for _, k := range order {
		e := byKey[k]
		name := fmt.Sprintf("mcp %s call %d $", k.server, k.request)
		if k.answer {
			name = fmt.Sprintf("mcp %s answer %d $", k.server, k.request)
		}
		values := []any{e.recorded}
		for i, live := range e.live {
			if len(live) != 1 {
				conflicts = append(conflicts, Conflict{Kind: Structure, Run: i + 1, Mismatch: mismatch.Mismatch{
					Path: name, Recorded: "1 call", Live: fmt.Sprintf("%d calls", len(live))}})
				break
			}
			values = append(values, live[0])
		}
		samples = append(samples, Sample{Name: name, Values: values})
	}
	return samples, conflicts
}

// Save stores the rules of res with the recording, replacing those of an
// earlier calibration, as a rules file (see normalize.ParseRules): an
// empty one when nothing varies. It refuses a Result that is not
// Calibrated with ErrNotCalibrated. The store must be writable.
func Save(st *store.Store, res *Result) error {
	if !res.Calibrated() {
		return fmt.Errorf("%w: %s", ErrNotCalibrated, res.Conflicts[0])
	}
	rules := make([]normalize.Rule, len(res.Rules))
	for i, l := range res.Rules {
		rules[i] = l.Rule
	}
	return st.PutBlob(res.Name, store.RulesBlob, normalize.FormatRules(rules))
}

// Package replay re-runs a recorded agent session offline and says whether the agent's ACP output changed.
//
// A replay runs in phases. It loads the recording; builds the agent's
// sandbox (a fresh workspace, HOME and TMPDIR, and an environment of the
// recorded one's shape, see sandboxEnv); starts the LLM side, a loopback
// proxy.Tap whose transport is an llmserver.Server answering from the
// recording, which
// the agent reaches the way the recording says it reached the LLM
// (rewritten base-URL variables, HTTPS_PROXY with the interception CA, or
// both); runs the agent with a driver.Driver playing the recorded editor
// side; and judges: the agent's output is normalized and compared with the
// recorded output, and every way the replay diverged is a Divergence.
package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/replay/driver"
	"github.com/acptap/acptap/replay/llmserver"
	"github.com/acptap/acptap/replay/mcpstandin"
	"github.com/acptap/acptap/stdiotap"
	"github.com/acptap/acptap/store"
)

// RequestMode says what a drifted LLM request does to the verdict.
type RequestMode uint8

const (
	RequestsWarn   RequestMode = iota // report drift, keep the verdict (the default)
	RequestsIgnore                    // do not compare requests
	RequestsFail                      // drift is a divergence
)

// ParseRequestMode reads --requests.
func ParseRequestMode(s string) (RequestMode, error) {
	switch s {
	case "warn", "":
		return RequestsWarn, nil
	case "ignore":
		return RequestsIgnore, nil
	case "fail":
		return RequestsFail, nil
	}
	return 0, fmt.Errorf("%w: %q (want ignore, warn or fail)", ErrRequestMode, s)
}

// A LoopbackMode says whether the replayed agent's loopback destinations
// go through the replay's tap (see proxy.EnvOptions). It matters only for
// a recording whose agent had the proxy variables.
type LoopbackMode uint8

const (
	// LoopbackAsRecorded does what the recording did
	// (store.Recording.LoopbackDirect): recordings made with record
	// --proxy-loopback, or before acptap had it, send loopback through the
	// tap; others leave it out (the default).
	LoopbackAsRecorded LoopbackMode = iota
	// LoopbackProxied sends loopback through the tap, whatever the
	// recording did: replay --proxy-loopback.
	LoopbackProxied
	// LoopbackDirect leaves loopback out of the tap, whatever the
	// recording did: replay --proxy-loopback=false.
	LoopbackDirect
)

// Options configure Run. The zero value replays the recording's own
// command with the defaults below.
type Options struct {
	// Argv overrides the recorded agent command. If nil, the recorded one.
	Argv []string
	// Workspace seeds the sandbox workspace (copied). If empty, the
	// workspace is restored from the recording's snapshot (record
	// --snapshot), or starts empty if it has none.
	Workspace string
	// Env adds K=V pairs to the agent's environment, over the recorded
	// and the allowlist's values.
	Env []string
	// Speed scales recorded LLM timing: 0 no waits, N recorded/N.
	Speed float64
	// Faults are LLM faults by exchange number.
	Faults map[int]llmserver.Fault
	// Requests says what request drift does.
	Requests RequestMode
	// Timeout bounds each wait for the agent. If zero, 30s.
	Timeout time.Duration
	// Grace is how long the agent may take to exit after its stdin
	// closes. If zero, 3s.
	Grace time.Duration
	// Rules are user normalization rules. They come before the rules
	// `acptap calibrate` stored with the recording (see StoredRules),
	// which apply too unless Uncalibrated.
	Rules []normalize.Rule
	// Uncalibrated leaves out the rules stored with the recording, as
	// calibrate's own replays do.
	Uncalibrated bool
	// KeepRequests keeps every LLM request and its recorded twin,
	// normalized, in Result.Requests, whatever Requests says.
	KeepRequests bool
	// NoCoalesce keeps message chunks apart in the comparison.
	NoCoalesce bool
	// Loopback says whether the agent's loopback destinations go through
	// the tap.
	Loopback LoopbackMode
	// StrictHTTP makes the agent's http exchanges (wire.ClassHTTP)
	// as strict as its LLM ones: a request the recording has no answer
	// for, and a recorded one never requested, are divergences rather
	// than a warning and nothing.
	StrictHTTP bool
	// Order is how the agent's output is compared: per stream within a
	// turn (normalize.ByStream, the default) or in its total order
	// (normalize.Strict).
	Order normalize.Order
	// Discard leaves out of the Result what grows with the session: Live,
	// Timeline, Expected and Actual (Diff is still made when the output
	// differs), and Update cannot use it. A replay always spools the
	// recording's frames and the agent's output to temporary files and
	// reads them back as it plays and compares them; with Discard it
	// holds neither in memory and compares digests first, so that what it
	// holds grows with the frames of the largest turn (an index of some
	// bytes per frame) and the largest value, not with the bytes of the
	// frames. The recorded LLM exchanges are spooled either way, and held
	// one at a time, while served and compared. Plain
	// `acptap replay` sets it; --update and --html do not.
	Discard bool
	// CA intercepts TLS for agents that reach the LLM by HTTPS_PROXY. If
	// nil, the tap's default (proxy.Config.CA).
	CA *proxy.CA
	// Stderr receives the agent's stderr. If nil, it is discarded.
	Stderr io.Writer
	// MCPStandIn, if not "", is the program the agent is to run in place
	// of each stdio MCP server of the recording (record.Options.MCPRelay
	// recorded them), with mcpstandin.Command and its plan: acptap
	// itself, whose main calls mcpstandin.Main for that command. The
	// servers are then served from the recording, and a call it cannot
	// answer, or a recorded call never made, is a divergence. If "", the
	// agent starts the recorded servers' commands, as its frames say.
	MCPStandIn string
	// MCPFaults are failures the stand-ins inject into the recorded MCP
	// servers' tool calls, by server name. A name the recording has no
	// server of fails the replay before the agent starts.
	MCPFaults []MCPFault
	// StdioFaults break recorded editor frames on their way to the
	// agent, one fault a frame (see StdioFault): the agent's reaction is
	// the output compared, and Result.StdioFaults says which were
	// applied. A fault that names no editor frame of the recording fails
	// the replay with ErrStdioFault before the agent starts. A replay
	// with stdio faults cannot Update its recording. Nil for none.
	StdioFaults []StdioFault
	// MCPCalls keeps, for calibrate, every tools/call the agent makes
	// of an MCP server served from the recording, and every live
	// server's answer with LiveMCP, each with its recorded twin
	// (Result.MCPCalls): a call whose arguments have no recorded twin
	// is paired with, and answered as, the first recorded call of its
	// tool not yet made, and a live answer that differs is no
	// divergence.
	MCPCalls bool
	// LiveMCP has the stand-ins run the recorded servers' own commands,
	// pass their answers on, and compare each with the recorded one: an
	// answer that differs is a divergence (MCPDrift). It needs
	// MCPStandIn.
	LiveMCP bool
}

// An MCPCall is a tools/call the agent made of MCP server Server, or
// the live server's answer to it, and its recorded twin (see
// Options.MCPCalls).
type MCPCall struct {
	Server string
	mcpstandin.Pair
}

// An MCPFault is a failure to inject into a tool call of the recorded MCP
// server named Server (see mcpstandin.Fault).
type MCPFault struct {
	Server string
	mcpstandin.Fault
}

// Result is the outcome of one replay.
type Result struct {
	Name string
	// Divergences are the reasons the replay is not equal, in this
	// order: the agent's output (OutputDiffers), the editor side's
	// errors, the LLM requests the recording could not answer, the
	// recorded exchanges never requested, request drift under
	// RequestsFail, and under StrictHTTP the http requests without a
	// recorded answer and the recorded http exchanges never requested.
	// Empty when the replay is equal.
	Divergences []Divergence
	// Warnings are reported but do not fail the replay: request drift
	// (RequestDrift) under RequestsWarn, and without StrictHTTP the http
	// requests the recording had no answer for (HTTPUnanswered).
	Warnings []Divergence
	// Diff is a unified diff of the normalized expected and actual agent
	// streams, pretty JSON; empty when they are equal.
	Diff string
	// Expected and Actual are the normalized agent streams, as lists of
	// values arranged for the diff (see normalize.Comparison); nil with
	// Options.Discard.
	Expected, Actual []json.RawMessage
	// Transcripts are the same streams, recorded and replayed, per turn
	// and stream (see normalize.Transcript), for calibrate to learn which
	// frames some runs lack; nil with Options.Discard.
	Transcripts [2]*normalize.Transcript
	// Requests are the LLM requests and their recorded twins, normalized,
	// by exchange Number, with Options.KeepRequests; nil without.
	Requests []RequestPair
	// MCPCalls are, with Options.MCPCalls, the MCP calls and live
	// answers paired with their recorded twins, by server, in the order
	// made.
	MCPCalls []MCPCall
	// Live is every line the agent wrote on stdout, in order; nil with
	// Options.Discard.
	Live [][]byte
	// Timeline is the order in which the replay sent the recorded editor
	// frames and received the lines of Live, each line once (see Step);
	// nil with Options.Discard.
	Timeline []Step
	// Exit is how the agent ended.
	Exit stdiotap.Exit
	// LLM is the LLM server's report.
	LLM      llmserver.Report
	Frames   int // recorded editor and agent frames
	Duration time.Duration
	// StdioFaults are Options.StdioFaults, in the order given, with the
	// frames they named and whether they were applied.
	StdioFaults []StdioFaultOutcome

	editors   int                          // recorded editor frames
	restore   func(i int, l []byte) []byte // Live[i] in the recording's terms; see Update
	discarded bool                         // made with Options.Discard
}

// Equal reports whether the replay matched the recording.
func (r *Result) Equal() bool { return len(r.Divergences) == 0 }

// testLoaded, if not nil, is called by Run with each recording it loads;
// tests watch what it serves.
var testLoaded func(rec *recording)

// Run replays recording name of st. It returns an error when the replay
// could not run: ErrNoCommand, ErrWorkspace, ErrEnv, ErrStart, ErrSpool
// or ErrStdioFault wrapped, one of st's (store.ErrNotFound for a missing recording), or an
// *llmserver.LoadError for a recorded exchange that could not be read
// back to be served. How the agent behaved, however badly, is in the
// Result.
func Run(ctx context.Context, st *store.Store, name string, opts Options) (*Result, error) {
	started := time.Now()
	rec, err := load(st, name)
	if err != nil {
		return nil, err
	}
	defer rec.close()
	if testLoaded != nil {
		testLoaded(rec)
	}
	if !opts.Uncalibrated {
		if rec.rules, err = StoredRules(st, name); err != nil {
			return nil, err
		}
	}
	stdioFaults, faultOutcomes, err := rec.stdioFaults(opts.StdioFaults)
	if err != nil {
		return nil, err
	}
	argv, err := rec.command(opts.Argv)
	if err != nil {
		return nil, err
	}
	sb, err := newSandbox(st, rec, opts.Workspace, opts.Env)
	if err != nil {
		return nil, err
	}
	defer sb.remove()

	norms := newNormalizers(rec, sb, &opts)
	var compare func(number int, recorded, live *exchange.Exchange) (llmserver.Drift, bool)
	if opts.Requests != RequestsIgnore {
		compare = norms.compareRequests
	}
	var kept *requestLog
	if opts.KeepRequests {
		kept = newRequestLog(norms, opts.Requests != RequestsIgnore)
		compare = kept.compare
	}
	// Several sessions may call one model at once: their requests are
	// matched by the conversation they continue.
	var conversation func(*exchange.Exchange) []string
	if rec.sessions > 1 {
		conversation = norms.conversation
	}
	llm, err := startLLM(rec, argv, sb.env, &opts, compare, norms.httpKey, conversation)
	if err != nil {
		return nil, err
	}
	defer llm.close()

	mcp, err := rec.standIns(sb, standInOptions{program: opts.MCPStandIn, live: opts.LiveMCP, calibrating: opts.MCPCalls, faults: opts.MCPFaults, rules: norms.opts.Rules, secret: llm.secret})
	if err != nil {
		return nil, err
	}
	defer mcp.close()
	run, err := runAgent(ctx, agentConfig{
		rewrite:   mcp.rewrite(),
		faults:    stdioFaults,
		frameName: rec.frameName,
		argv:      llm.argv,
		dir:       sb.work,
		env:       llm.env,
		stderr:    opts.Stderr,
		grace:     opts.Grace,
		frames:    rec.frames,
		timeout:   opts.Timeout,
		pathMap:   sb.pathMap(rec),
		mcpMatching: driver.MCPMatching{
			Cwd:   nonEmpty(append(slices.Clone(rec.cwds), rec.meta.Cwd, sb.work)...),
			Home:  nonEmpty(rec.meta.Home, sb.home),
			Tmp:   nonEmpty(rec.meta.Tmp, sb.tmp),
			Rules: mcpRules(norms.opts.Rules),
		},
		keep: !opts.Discard,
		mask: llm.mask,
	})
	if err != nil {
		return nil, rec.startError(argv, opts.Argv != nil, err)
	}
	defer run.live.close()

	report := llm.server.Report()
	if len(report.LoadErrors) > 0 {
		// The agent was answered 502 where the recording has an answer:
		// the replay says nothing of the agent.
		return nil, report.LoadErrors[0]
	}
	for i := range faultOutcomes {
		faultOutcomes[i].Applied = slices.Contains(run.drive.Faulted, faultOutcomes[i].frame)
	}
	res := &Result{
		Name:        name,
		Requests:    kept.pairs(),
		Live:        run.kept,
		Exit:        run.exit,
		LLM:         report,
		StdioFaults: faultOutcomes,
		Frames:      rec.frames.Len(),
		editors:     rec.editors,
		discarded:   opts.Discard,
	}
	if !opts.Discard {
		res.timeline(rec, sb, &run.drive)
	}
	// The MCP servers the recorded editor hosted over ACP are answered
	// by the driver, and reported as the stdio servers' stand-ins are.
	acpReports := run.drive.MCP
	run.drive = driver.Result{}
	mcpReports, err := mcp.reports()
	if err != nil {
		return nil, err
	}
	mcpReports = append(mcpReports, acpReports...)
	for _, r := range mcpReports {
		for _, p := range r.Pairs {
			res.MCPCalls = append(res.MCPCalls, MCPCall{Server: r.Server, Pair: p})
		}
	}
	v, err := judge(evidence{
		mcp:        mcpReports,
		recorded:   rec.acpLines(),
		live:       spooledLines{s: run.live, index: run.compared},
		keep:       !opts.Discard,
		driveErr:   run.driveErr,
		llm:        report,
		requests:   opts.Requests,
		strictHTTP: opts.StrictHTTP,
		normalizer: norms.new,
		rules:      norms.opts.Rules,
	})
	if err != nil {
		return nil, err
	}
	res.Divergences, res.Warnings, res.Diff = v.divergences, v.warnings, v.diff
	if !opts.Discard {
		res.Expected, res.Actual, res.Transcripts = v.expected, v.actual, v.transcripts
	}
	res.Duration = time.Since(started)
	return res, nil
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/internal/gcfloor"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/record"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/replay/driver"
	"github.com/acptap/acptap/replay/llmserver"
	"github.com/acptap/acptap/replay/mcpstandin"
	"github.com/acptap/acptap/stdiotap"
	"github.com/acptap/acptap/store"
)

type replayOptions struct {
	IO        *IO
	StorePath string
	Names     []string
	All       bool
	Argv      []string // after --; nil for the recorded command
	Replay    replay.Options
	CADir     string
	Verbose   bool // pass the agent's stderr through
	Color     bool
	Update    bool   // rewrite the expected agent stream of diverged recordings
	JUnit     string // write a JUnit XML report to this file
	HTML      string // write a page per recording and an index into this directory
	Select    selection
	// Parallel is how many recordings replay at once (at least 1).
	Parallel int
	// Progress shows a live progress line on IO.Err (a terminal).
	Progress bool
}

func replayCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "replay",
		Usage:     "re-run recorded agents offline and diff their ACP output",
		ArgsUsage: "[NAME... | --all] [-- AGENT [ARGS...]]",
		Description: "Serves the LLM side from the recording, plays the editor side, normalizes and diffs\n" +
			"the agent's output. Exit 0 when every recording replays equal, 1 on any divergence,\n" +
			"2 on a usage or environment error.\n\n" +
			"With --update, a recording whose only divergence is the agent's output is rewritten to\n" +
			"expect this replay's output (UPDATED, which counts as passed); its editor frames, stderr\n" +
			"and LLM exchanges stay as recorded. --junit FILE writes a JUnit XML report for CI.",
		Flags: append([]cli.Flag{
			storeFlag(storeReadUsage),
			&cli.BoolFlag{Name: "all", Usage: "replay every recording in the store"},
			&cli.StringFlag{Name: "run", Usage: "replay only the recordings whose name matches `REGEXP` (of the names given, or of all)"},
			&cli.IntFlag{Name: "parallel", Value: runtime.NumCPU(), DefaultText: "the number of CPUs", Usage: "replay up to `N` recordings at once, each in its own sandbox; reports still come out whole, in order"},
			&cli.StringFlag{Name: "shard", Usage: "replay only part `I/N` of a stable partition by name, for job I of a CI matrix of N"},
			&cli.Float64Flag{Name: "speed", Usage: "0 serves the LLM side without waits; a `FACTOR` N divides the recorded timing by N"},
			&cli.StringSliceFlag{Name: "fault", Usage: "inject `N=SPEC` into LLM exchange N (as show numbers them): status:CODE[:retry-after=S], hang, cut:K, reset, malformed; or mcp:NAME:N=error|hang|crash into the N-th tool call of MCP server NAME; repeatable"},
			&cli.StringSliceFlag{Name: "stdio-fault", Usage: "break editor frame FRAME (its number in show, or METHOD#N for the N-th of METHOD) on its way to the agent, `FRAME=ACTION` with ACTION drop, dup, delay:DURATION, split:BYTES, sever, garbage or close; repeatable, one per frame; not with --update"},
			&cli.StringFlag{Name: "requests", Value: "warn", Usage: "what a changed LLM request does, a `MODE`: ignore, warn or fail"},
			&cli.StringFlag{Name: "order", Value: "stream", Usage: "how the agent's output is compared within a turn, a `MODE`: stream (each stream on its own: each tool call, the message, the thoughts, the plan, the state at the turn's end) or strict (the total order)"},
			&cli.BoolFlag{Name: "strict-http", Usage: "fail the replay on an http request (not to the LLM) the recording has no answer for, and on a recorded one never requested; by default the first is a warning and the second nothing"},
		}, append(runFlags(),
			&cli.BoolFlag{Name: "update", Usage: "when the agent's output diverges, rewrite the recording's expected agent stream with it (never the LLM exchanges nor the editor frames)"},
			&cli.StringFlag{Name: "junit", Usage: "write a JUnit XML report to `FILE`"},
			&cli.StringFlag{Name: "html", Usage: "write an HTML page of each replay, and index.html, into `DIR`"},
		)...),
		Action: func(c *cli.Context) error {
			opts, err := newReplayOptions(c, stdio)
			if err != nil {
				return err
			}
			return runReplay(opts)
		},
	}
}

// newReplayOptions turns replay's flags into options, checking them all.
func newReplayOptions(c *cli.Context, stdio *IO) (*replayOptions, error) {
	opts := &replayOptions{
		IO:        stdio,
		StorePath: c.String("store"),
		Names:     c.Args().Slice(), // names come before --, the agent command after it
		All:       c.Bool("all"),
		CADir:     c.String("ca-dir"),
		Verbose:   c.Bool("verbose"),
		Color:     colorFor(stdio.Out),
		Update:    c.Bool("update"),
		JUnit:     c.String("junit"),
		HTML:      c.String("html"),
	}
	if opts.All && len(opts.Names) > 0 {
		return nil, usageErrorf("both --all and names given; pass one or the other")
	}
	sel, err := parseSelection(c.String("run"), c.String("shard"))
	if err != nil {
		return nil, err
	}
	opts.Select = sel
	if opts.Parallel = c.Int("parallel"); opts.Parallel < 1 {
		return nil, usageErrorf("--parallel %d: want 1 or more recordings at once (1 replays one after another)", opts.Parallel)
	}
	opts.Progress = isTerminal(stdio.Err) && (opts.All || len(opts.Names) > 1)
	if sel.any() && len(opts.Names) == 0 {
		opts.All = true // --run and --shard select from every recording
	}
	if !opts.All && len(opts.Names) == 0 {
		return nil, usageErrorf("no recording named; usage: acptap replay NAME... or acptap replay --all")
	}
	argv, err := agentAfterDashDash(stdio, "acptap replay [NAME...] [-- AGENT [ARGS...]]")
	if err != nil {
		return nil, err
	}
	opts.Argv = argv
	if opts.Replay, err = newRunOptions(c); err != nil {
		return nil, err
	}
	mode, err := replay.ParseRequestMode(c.String("requests"))
	if err != nil {
		return nil, usageErrorf("--requests: %v", err)
	}
	order, err := normalize.ParseOrder(c.String("order"))
	if err != nil {
		return nil, usageErrorf("--order %q: want stream or strict", c.String("order"))
	}
	faults, mcpFaults, err := parseFaults(c.StringSlice("fault"))
	if err != nil {
		return nil, err
	}
	stdioFaults, err := parseStdioFaults(c.StringSlice("stdio-fault"))
	if err != nil {
		return nil, err
	}
	if len(stdioFaults) > 0 && opts.Update {
		return nil, usageErrorf("--update with --stdio-fault: a replay with a broken editor side is never stored as the expected output; replay without --stdio-fault to update")
	}
	if sp := c.Float64("speed"); sp != 0 && !(sp >= minSpeed && sp <= maxSpeed) {
		return nil, usageErrorf("--speed %v: want 0 (no waits) or from %v (%v times slower than recorded) to %v", sp, minSpeed, 1/minSpeed, maxSpeed)
	}
	opts.Replay.Speed = c.Float64("speed")
	opts.Replay.Faults = faults
	opts.Replay.MCPFaults = mcpFaults
	opts.Replay.StdioFaults = stdioFaults
	opts.Replay.Requests = mode
	opts.Replay.StrictHTTP = c.Bool("strict-http")
	opts.Replay.Order = order
	opts.Replay.KeepRequests = opts.HTML != "" // for the pages' request drift
	return opts, nil
}

// The range of --speed other than 0: recorded waits divided by more than
// a million are no waits, and multiplied by more than a thousand (a
// second's pause taking a quarter of an hour) make no sense.
const (
	minSpeed = 0.001
	maxSpeed = 1e6
)

// runFlags are the flags of how one replay runs, which replay and
// calibrate share.
func runFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "timeout", Value: driver.DefaultTimeout, Usage: "the longest `DURATION` to wait for the agent's output"},
		graceFlag(),
		&cli.StringFlag{Name: "workspace", Usage: "seed the sandbox workspace from `DIR` (copied)"},
		&cli.StringSliceFlag{Name: "env", Usage: "add `K=V` to the agent's environment; repeatable"},
		&cli.StringFlag{Name: "rules", Usage: "normalization rules `FILE` (JSON), applied before the rules calibrate stored"},
		&cli.BoolFlag{Name: "no-coalesce", Usage: "compare message chunks one by one instead of joined"},
		&cli.BoolFlag{Name: "live-mcp", Usage: "run the recorded stdio MCP servers and reach the recorded Streamable HTTP ones instead of serving them from the recording, and compare what they answer with the recording"},
		caDirFlag(),
		proxyLoopbackFlag(),
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "pass the agent's stderr through"},
	}
}

// newRunOptions turns the flags of runFlags into the options of a
// replay, checking them all.
func newRunOptions(c *cli.Context) (replay.Options, error) {
	timeout, err := positiveDuration(c, "timeout")
	if err != nil {
		return replay.Options{}, err
	}
	grace, err := positiveDuration(c, "grace")
	if err != nil {
		return replay.Options{}, err
	}
	opts := replay.Options{
		Workspace:  c.String("workspace"),
		Env:        c.StringSlice("env"),
		Timeout:    timeout,
		Grace:      grace,
		NoCoalesce: c.Bool("no-coalesce"),
		Loopback:   loopbackMode(c),
		MCPStandIn: mcpRelay(),
		LiveMCP:    c.Bool("live-mcp"),
	}
	if f := c.String("rules"); f != "" {
		rules, err := normalize.LoadRules(f)
		if err != nil {
			return replay.Options{}, usageErrorf("--rules: %v; fix the rules file", err)
		}
		opts.Rules = rules
	}
	if ws := opts.Workspace; ws != "" {
		if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
			return replay.Options{}, usageErrorf("--workspace %s is not a directory; pass a directory to copy into the sandbox", ws)
		}
	}
	for _, kv := range opts.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return replay.Options{}, usageErrorf("--env %q: want K=V", kv)
		}
	}
	return opts, nil
}

// prepareRun completes the options of replays: the interception CA of
// caDir, the agent command argv (nil for the recorded one), and the
// agent's stderr on stdio's if verbose.
func prepareRun(opts *replay.Options, caDir string, argv []string, verbose bool, stdio *IO) error {
	ca, err := proxy.LoadOrCreateCA(caDir)
	if errors.Is(err, proxy.ErrCAMismatch) {
		return usageErrorf("interception CA: %v; %s", err, caMismatchFix)
	}
	if err != nil {
		return usageErrorf("interception CA: %v; pass another --ca-dir", err)
	}
	opts.CA = ca
	opts.Argv = argv
	if verbose {
		opts.Stderr = stdio.Err
	}
	return nil
}

// loopbackMode reads replay's --proxy-loopback: unset, loopback goes the
// way it went when recording; --proxy-loopback and --proxy-loopback=false
// say otherwise.
func loopbackMode(c *cli.Context) replay.LoopbackMode {
	switch {
	case !c.IsSet("proxy-loopback"):
		return replay.LoopbackAsRecorded
	case c.Bool("proxy-loopback"):
		return replay.LoopbackProxied
	}
	return replay.LoopbackDirect
}

func parseFaults(specs []string) (map[int]llmserver.Fault, []replay.MCPFault, error) {
	faults := map[int]llmserver.Fault{}
	var mcpFaults []replay.MCPFault
	for _, s := range specs {
		if rest, ok := strings.CutPrefix(s, "mcp:"); ok {
			f, err := parseMCPFault(s, rest)
			if err != nil {
				return nil, nil, err
			}
			for _, g := range mcpFaults {
				if g.Server == f.Server && g.Call == f.Call {
					return nil, nil, usageErrorf("--fault mcp:%s:%d given twice; give one fault per call", f.Server, f.Call)
				}
			}
			mcpFaults = append(mcpFaults, f)
			continue
		}
		n, spec, ok := strings.Cut(s, "=")
		num, err := strconv.Atoi(n)
		if !ok || err != nil || num < 1 {
			return nil, nil, usageErrorf("--fault %q: want N=SPEC with N an exchange number from acptap show, e.g. --fault 1=status:429:retry-after=1", s)
		}
		if _, dup := faults[num]; dup {
			return nil, nil, usageErrorf("--fault %d given twice; give one fault per exchange", num)
		}
		f, err := llmserver.ParseFault(spec)
		if err != nil {
			return nil, nil, usageErrorf("--fault %q: %v", s, err)
		}
		faults[num] = f
	}
	return faults, mcpFaults, nil
}

// parseStdioFaults reads the --stdio-fault specs; whether each names an
// editor frame is the replay's to check, recording by recording.
func parseStdioFaults(specs []string) ([]replay.StdioFault, error) {
	var out []replay.StdioFault
	for _, s := range specs {
		f, err := replay.ParseStdioFault(s)
		if err != nil {
			return nil, usageErrorf("--stdio-fault %q: %v; e.g. --stdio-fault session/prompt#1=dup", s, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// parseMCPFault reads the fault s of an MCP server, rest being what
// follows "mcp:": NAME:N=KIND.
func parseMCPFault(s, rest string) (replay.MCPFault, error) {
	bad := func() (replay.MCPFault, error) {
		return replay.MCPFault{}, usageErrorf("--fault %q: want mcp:NAME:N=KIND with NAME an MCP server of the recording, N its tool call from 1 and KIND %s, e.g. --fault mcp:notes:1=error", s, strings.Join(mcpstandin.FaultKinds, ", "))
	}
	target, kind, ok := strings.Cut(rest, "=")
	i := strings.LastIndexByte(target, ':')
	if !ok || i <= 0 {
		return bad()
	}
	n, err := strconv.Atoi(target[i+1:])
	if err != nil || n < 1 || !slices.Contains(mcpstandin.FaultKinds, kind) {
		return bad()
	}
	return replay.MCPFault{Server: target[:i], Fault: mcpstandin.Fault{Call: n, Kind: kind}}, nil
}

// replayHeapFloor is the heap a replay lets grow before it collects
// (gcfloor.Set): it holds the recorded LLM exchanges one at a time, a few
// MiB, and makes as much garbage with each it serves.
const replayHeapFloor = 64 << 20

func runReplay(opts *replayOptions) error {
	defer gcfloor.Set(replayHeapFloor)()
	report, err := openJUnit(opts.JUnit)
	if err != nil {
		return err
	}
	defer report.close()
	pages, err := newHTMLPages(opts.HTML)
	if err != nil {
		return err
	}
	if err := prepareRun(&opts.Replay, opts.CADir, opts.Argv, opts.Verbose, opts.IO); err != nil {
		return err
	}

	src, err := openSource(opts.StorePath, opts.Names) // every recording of a directory with --all
	if err != nil {
		return err
	}
	// The store's file is locked only for each read (and, with --update,
	// write) of it: recorders record into it while the replays run.
	defer src.Close()
	if opts.Update {
		// The read-only open said whether there is a store; --update
		// writes to it.
		if err := src.writable(); err != nil {
			return err
		}
	}
	names, err := replayNames(src.st, opts)
	if err != nil {
		return err // a usage error leaves no report
	}
	if len(names) == 0 {
		return report.write() // an empty shard's report says so
	}
	loopbackNotices(src.st, names, opts.IO)
	// SIGINT, SIGTERM and SIGHUP stop the replays: the running agents
	// are stopped and their sandboxes removed, the report of what ran is
	// written, and acptap exits 128+n.
	ctx, interrupted := interruptible()
	defer interrupted.stop()
	// From here the replays stop on a signal, and the deferred Close
	// removes a directory's temporary store.
	src.signalsHandled()
	progress := newProgress(opts.IO.Err, len(names), opts.Progress, colorFor(opts.IO.Err))
	defer progress.stop()
	t := &replayTally{opts: opts, names: names, st: src.st, report: report, pages: pages, progress: progress}
	inOrder(names, opts.Parallel, func(name string) outcome {
		progress.started(name)
		return replayOne(ctx, src, name, opts)
	}, t.take)
	progress.stop()
	return t.finish(interrupted.signal())
}

// replayNames returns the recordings a replay replays: those named, or
// all with --all, of the shard --shard and --run select. Every name is
// checked first, so that a typo is a usage error, not a divergence. A
// selection that leaves none says so on stdout, and returns none.
func replayNames(st *store.Store, opts *replayOptions) ([]string, error) {
	names := opts.Names
	if opts.All {
		var err error
		if names, err = allNames(st, opts.StorePath); err != nil {
			return nil, err
		}
	}
	for _, name := range names {
		rec, err := st.Get(name)
		if errors.Is(err, store.ErrDamaged) && len(names) > 1 {
			continue // not a typo: among others, it gets its ERROR line
		}
		if err != nil {
			return nil, recordingError(err, opts.StorePath)
		}
		if opts.Update && rec.Live && !rec.Done {
			return nil, usageErrorf("recording %q in %s is being recorded; replay --update it once its acptap record has ended", name, opts.StorePath)
		}
	}
	if opts.Select.any() {
		picked, matched, err := opts.Select.pick(names)
		if err != nil {
			return nil, err
		}
		if len(picked) == 0 {
			fmt.Fprintf(opts.IO.Out, "no recordings in shard %s (of %d selected)\n", opts.Select.shard, matched)
		}
		names = picked
	}
	return names, nil
}

// A replayTally counts the outcomes of a replay's recordings as they
// come, reports each, and says at the end how the run ended.
type replayTally struct {
	opts     *replayOptions
	names    []string
	st       *store.Store
	report   *junitReport
	pages    *htmlPages
	progress *progress

	failed, updated, emitted int
	// A recording that cannot be replayed at all (its agent does not
	// start, say) stops a replay of one; of several, it is reported as
	// an ERROR, a JUnit error case, and the run goes on.
	errored []string
	stopErr error // what stopped the run
}

// take reports an outcome and says whether the run goes on.
func (t *replayTally) take(o outcome) bool {
	opts := t.opts
	if o.interrupted {
		return false
	}
	t.emitted++
	if o.err != nil {
		t.report.addError(o.name, o.duration, o.err)
		if len(t.names) == 1 || o.cause == nil {
			t.stopErr = o.err
			return false
		}
		t.errored = append(t.errored, o.name)
		t.progress.report(o.name, true, func() {
			fmt.Fprintf(opts.IO.Out, "%s %s: %v\n", painter(opts.Color).paint(colorRed, "ERROR"), o.name, o.cause)
		})
		return true
	}
	switch {
	case o.up != nil && o.up.err == nil:
		t.updated++
	case !o.res.Equal():
		t.failed++
	}
	t.report.add(o.res, o.up)
	if err := t.pages.add(t.st, o.res, o.up); err != nil {
		t.stopErr = err
		return false
	}
	t.progress.report(o.name, !o.res.Equal() && (o.up == nil || o.up.err != nil), func() {
		printResult(opts.IO.Out, o.res, o.up, opts.Color)
	})
	return true
}

// finish writes the reports, prints the summary of several recordings,
// and returns how the run ended: interrupted by sig (if not nil), stopped
// by an error, some recordings not replayed, a divergence, or nil.
func (t *replayTally) finish(sig os.Signal) error {
	opts, n := t.opts, len(t.names)
	if sig != nil {
		if err := t.report.write(); err != nil {
			return err
		}
		ss := sig.(syscall.Signal)
		return &exitError{code: 128 + int(ss), err: fmt.Errorf("interrupted by %s after %d of %d recordings, whose reports are complete", stdiotap.SignalName(ss), t.emitted, n)}
	}
	if t.stopErr != nil {
		return errors.Join(t.stopErr, t.report.write())
	}
	switch {
	case len(t.errored) > 0:
		fmt.Fprintf(opts.IO.Out, "%d passed, %d failed, %d could not be replayed\n", n-t.failed-t.updated-len(t.errored), t.failed, len(t.errored))
	case n > 1 && opts.Update:
		fmt.Fprintf(opts.IO.Out, "%d passed, %d updated, %d failed\n", n-t.failed-t.updated, t.updated, t.failed)
	case n > 1:
		fmt.Fprintf(opts.IO.Out, "%d passed, %d failed\n", n-t.failed, t.failed)
	}
	if err := t.report.write(); err != nil {
		return err
	}
	if err := t.pages.write(); err != nil {
		return err
	}
	switch {
	case len(t.errored) > 0:
		return usageErrorf("%d of %d recordings could not be replayed (%s); see their ERROR lines", len(t.errored), n, strings.Join(t.errored, ", "))
	case t.failed > 0:
		return exitCode(ExitDiverged)
	}
	return nil
}

// An outcome is how the replay of one recording ended.
type outcome struct {
	name  string
	res   *replay.Result
	up    *updateOutcome // what --update did; nil without it or when equal
	err   error          // an environment error: the replay could not run
	cause error          // err without the recording's name, for an ERROR line; nil if err concerns the whole run
	// interrupted says that a signal stopped the replay: it has no
	// verdict.
	interrupted bool
	duration    time.Duration
}

// replayOne replays one recording and, with --update, updates it.
func replayOne(ctx context.Context, src *source, name string, opts *replayOptions) (o outcome) {
	st := src.st
	o = outcome{name: name}
	started := time.Now()
	defer func() { o.duration = time.Since(started) }()
	ro := opts.Replay
	// Only --update and --html use the agent's lines and the normalized
	// streams: without them a replay keeps none, and its memory does not
	// grow with the recording.
	ro.Discard = !opts.Update && opts.HTML == ""
	res, err := replay.Run(ctx, st, name, ro)
	if ctx.Err() != nil {
		// Stopped by a signal: neither a verdict nor an error.
		o.interrupted = true
		return o
	}
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			o.err = recordingError(err, opts.StorePath)
			return o
		}
		var nf *replay.AgentNotFoundError
		switch {
		case errors.Is(err, replay.ErrNoCommand):
			err = fmt.Errorf("%w; pass -- AGENT [ARGS...]", err)
		case errors.Is(err, replay.ErrMCPFault):
			err = fmt.Errorf("%w; name a server as acptap show lists them", err)
		case errors.Is(err, replay.ErrSpool):
			err = fmt.Errorf("%w; set TMPDIR to a writable directory with room for the recording", err)
		case errors.As(err, &nf) && nf.Recorded == "":
			err = fmt.Errorf("%w; pass an agent that exists after --", err)
		case errors.As(err, &nf) && nf.Recorded != nf.Program:
			err = fmt.Errorf("%w; pass -- AGENT [ARGS...] to replay another", err)
		case errors.As(err, &nf):
			err = fmt.Errorf("%w; install it, or pass -- AGENT [ARGS...] to replay another", err)
		}
		o.cause = err
		o.err = &exitError{code: ExitUsage, err: fmt.Errorf("replay %s: %w", name, err)}
		return o
	}
	o.res = res
	if opts.Update && !res.Equal() {
		o.up = &updateOutcome{}
		o.up.frames, o.up.err = replay.Update(st, res)
		if o.up.err == nil {
			// A directory gets its recording's files rewritten.
			o.up.err = src.save(name)
		}
		if o.up.err != nil && !errors.Is(o.up.err, replay.ErrNotUpdatable) {
			// The store could not be written: an environment error,
			// which stops the run.
			o.err = &exitError{code: ExitUsage, err: fmt.Errorf("replay %s: --update: %w", name, o.up.err)}
		}
	}
	return o
}

// updateOutcome is what --update did to a diverged recording.
type updateOutcome struct {
	frames int   // agent frames written
	err    error // why it was not updated; nil if it was
}

func (u *updateOutcome) summary() string {
	return replay.UpdateSummary(u.frames)
}

// printResult prints the outcome of one replay; up is what --update did,
// nil without --update or when the replay was equal.
func printResult(w io.Writer, res *replay.Result, up *updateOutcome, color bool) {
	var opts replay.ReportOptions
	if up != nil && up.err == nil {
		opts.Updated, opts.UpdatedFrames = true, up.frames
	} else if up != nil {
		opts.NotUpdated = up.err
	}
	if color {
		opts.Paint = func(part replay.Part, s string) string { return painter(true).paint(partColors[part], s) }
	}
	replay.WriteReport(w, res, opts)
}

// partColors are the colours of a replay report's parts.
var partColors = map[replay.Part]string{
	replay.PartPass:    colorGreen,
	replay.PartFail:    colorRed,
	replay.PartUpdated: colorYellow,
	replay.PartWarning: colorYellow,
	replay.PartAdded:   colorGreen,
	replay.PartRemoved: colorRed,
	replay.PartHunk:    colorCyan,
}

// loopbackNotices says, before the replays run, of each recording that
// has the agent's messages but no LLM exchange while its agent connected
// to other programs on loopback, that its LLM may have gone unrecorded
// (record.LoopbackNotice): the replay's diff, with the agent's LLM calls
// failing, would not say why. A recording that does not read is left to
// its replay to report.
func loopbackNotices(st *store.Store, names []string, stdio *IO) {
	for _, name := range names {
		rec, err := st.Get(name)
		if err != nil {
			continue
		}
		n, err := record.LoopbackNotice(st, rec)
		if err != nil || n == "" || !hasAgentMessage(st, name) {
			continue
		}
		fmt.Fprintf(stdio.Err, "acptap: replay %s: the recording has %s\n", name, n)
	}
}

// hasAgentMessage says whether the recording name of st has an
// agent_message_chunk of the agent.
func hasAgentMessage(st *store.Store, name string) bool {
	errFound := errors.New("found")
	err := st.Events(name, func(e store.Event) error {
		if e.Lane == store.LaneAgent && bytes.Contains(e.Data, []byte("agent_message_chunk")) && acp.Parse(e.Data).UpdateKind == "agent_message_chunk" {
			return errFound
		}
		return nil
	})
	return errors.Is(err, errFound)
}

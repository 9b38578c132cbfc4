package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/replay/driver"
	"github.com/acptap/acptap/replay/llmserver"
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
			storeFlag(),
			&cli.BoolFlag{Name: "all", Usage: "replay every recording in the store"},
			&cli.Float64Flag{Name: "speed", Usage: "0: serve the LLM side without waits; N: recorded timing divided by N"},
			&cli.StringSliceFlag{Name: "fault", Usage: "inject `N=SPEC` into LLM exchange N (as show numbers them): status:CODE[:retry-after=S], hang, cut:K, reset, malformed; repeatable"},
			&cli.StringFlag{Name: "requests", Value: "warn", Usage: "what a changed LLM request does: ignore, warn or fail"},
			&cli.StringFlag{Name: "order", Value: "stream", Usage: "how the agent's output is compared within a turn: stream (each stream on its own: each tool call, the message, the thoughts, the plan, the state at the turn's end) or strict (the total order)"},
			&cli.BoolFlag{Name: "strict-http", Usage: "fail the replay on an http request (not to the LLM) the recording has no answer for, and on a recorded one never requested; by default the first is a warning and the second nothing"},
		}, append(runFlags(),
			&cli.BoolFlag{Name: "update", Usage: "when the agent's output diverges, rewrite the recording's expected agent stream with it (never the LLM exchanges nor the editor frames)"},
			&cli.StringFlag{Name: "junit", Usage: "write a JUnit XML report to `FILE`"},
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
	}
	if opts.All && len(opts.Names) > 0 {
		return nil, usageErrorf("both --all and names given; pass one or the other")
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
	faults, err := parseFaults(c.StringSlice("fault"))
	if err != nil {
		return nil, err
	}
	if c.Float64("speed") < 0 {
		return nil, usageErrorf("--speed must be 0 or positive, got %v", c.Float64("speed"))
	}
	opts.Replay.Speed = c.Float64("speed")
	opts.Replay.Faults = faults
	opts.Replay.Requests = mode
	opts.Replay.StrictHTTP = c.Bool("strict-http")
	opts.Replay.Order = order
	return opts, nil
}

// runFlags are the flags of how one replay runs, which replay and
// calibrate share.
func runFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "timeout", Value: driver.DefaultTimeout, Usage: "longest wait for the agent's output"},
		graceFlag(),
		&cli.StringFlag{Name: "workspace", Usage: "seed the sandbox workspace from `DIR` (copied)"},
		&cli.StringSliceFlag{Name: "env", Usage: "add `K=V` to the agent's environment; repeatable"},
		&cli.StringFlag{Name: "rules", Usage: "normalization rules `FILE` (JSON), applied before the rules calibrate stored"},
		&cli.BoolFlag{Name: "no-coalesce", Usage: "compare message chunks one by one instead of joined"},
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

func parseFaults(specs []string) (map[int]llmserver.Fault, error) {
	faults := map[int]llmserver.Fault{}
	for _, s := range specs {
		n, spec, ok := strings.Cut(s, "=")
		num, err := strconv.Atoi(n)
		if !ok || err != nil || num < 1 {
			return nil, usageErrorf("--fault %q: want N=SPEC with N an exchange number from acptap show, e.g. --fault 1=status:429:retry-after=1", s)
		}
		if _, dup := faults[num]; dup {
			return nil, usageErrorf("--fault %d given twice; give one fault per exchange", num)
		}
		f, err := llmserver.ParseFault(spec)
		if err != nil {
			return nil, usageErrorf("--fault %q: %v", s, err)
		}
		faults[num] = f
	}
	return faults, nil
}

func runReplay(opts *replayOptions) error {
	report, err := openJUnit(opts.JUnit)
	if err != nil {
		return err
	}
	defer report.close()
	if err := prepareRun(&opts.Replay, opts.CADir, opts.Argv, opts.Verbose, opts.IO); err != nil {
		return err
	}

	st, err := openStore(opts.StorePath, true)
	if err != nil {
		return err
	}
	if opts.Update {
		// The read-only open said whether there is a store; --update
		// writes to it.
		st.Close()
		if st, err = openStore(opts.StorePath, false); err != nil {
			return err
		}
	}
	names := opts.Names
	if opts.All {
		recs, err := st.List()
		if err != nil {
			st.Close()
			return usageErrorf("%v", err)
		}
		for _, r := range recs {
			names = append(names, r.Name)
		}
		if len(names) == 0 {
			st.Close()
			return usageErrorf("no recordings in %s; record one with acptap record", opts.StorePath)
		}
	}
	// Check every name first: a typo is a usage error, not a divergence.
	for _, name := range names {
		rec, err := st.Get(name)
		if err != nil {
			st.Close()
			return recordingError(err, opts.StorePath)
		}
		if opts.Update && rec.Live && !rec.Done {
			st.Close()
			return usageErrorf("recording %q in %s is being recorded; replay --update it once its acptap record has ended", name, opts.StorePath)
		}
	}
	// The store's file is locked only for each read (and, with --update,
	// write) of it: recorders record into it while the replays run.
	defer st.Close()
	failed, updated := 0, 0
	for _, name := range names {
		started := time.Now()
		res, err := replay.Run(context.Background(), st, name, opts.Replay)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return recordingError(err, opts.StorePath)
			}
			if errors.Is(err, replay.ErrNoCommand) {
				err = fmt.Errorf("%w; pass -- AGENT [ARGS...]", err)
			}
			err = fmt.Errorf("replay %s: %w", name, err)
			report.addError(name, time.Since(started), err)
			return errors.Join(&exitError{code: ExitUsage, err: err}, report.write())
		}
		var up *updateOutcome
		if opts.Update && !res.Equal() {
			up = &updateOutcome{}
			up.frames, up.err = replay.Update(st, res)
			if up.err != nil && !errors.Is(up.err, replay.ErrNotUpdatable) {
				// The store could not be written: an environment error.
				err := fmt.Errorf("replay %s: --update: %w", name, up.err)
				report.addError(name, time.Since(started), err)
				return errors.Join(&exitError{code: ExitUsage, err: err}, report.write())
			}
		}
		switch {
		case up != nil && up.err == nil:
			updated++
		case !res.Equal():
			failed++
		}
		report.add(res, up)
		printResult(opts.IO.Out, res, up, opts.Color, len(names) > 1)
	}
	if len(names) > 1 {
		if opts.Update {
			fmt.Fprintf(opts.IO.Out, "%d passed, %d updated, %d failed\n", len(names)-failed-updated, updated, failed)
		} else {
			fmt.Fprintf(opts.IO.Out, "%d passed, %d failed\n", len(names)-failed, failed)
		}
	}
	if err := report.write(); err != nil {
		return err
	}
	if failed > 0 {
		return exitCode(ExitDiverged)
	}
	return nil
}

// updateOutcome is what --update did to a diverged recording.
type updateOutcome struct {
	frames int   // agent frames written
	err    error // why it was not updated; nil if it was
}

func (u *updateOutcome) summary() string {
	return fmt.Sprintf("expected agent stream rewritten: %d frames", u.frames)
}

// printResult prints the outcome of one replay; up is what --update did,
// nil without --update or when the replay was equal.
func printResult(w io.Writer, res *replay.Result, up *updateOutcome, color, summaryOnly bool) {
	paint := painter(color).paint
	stats := fmt.Sprintf("%d frames, %d LLM exchanges served, %s", res.Frames, res.LLM.Served, res.Duration.Round(time.Millisecond))
	isUpdated := up != nil && up.err == nil
	switch {
	case res.Equal():
		fmt.Fprintf(w, "%s %s (%s)\n", paint(colorGreen, "PASS"), res.Name, stats)
	case isUpdated:
		fmt.Fprintf(w, "%s %s (%s)\n", paint(colorYellow, "UPDATED"), res.Name, up.summary())
	default:
		fmt.Fprintf(w, "%s %s: %s\n", paint(colorRed, "FAIL"), res.Name, res.Divergences[0].Message)
	}
	for _, warn := range res.Warnings {
		fmt.Fprintf(w, "  %s %s\n", paint(colorYellow, "warning:"), warn.Message)
	}
	if res.Equal() {
		return
	}
	if !isUpdated {
		for _, d := range res.Divergences[1:] {
			fmt.Fprintf(w, "  also: %s\n", d.Message)
		}
		if up != nil {
			fmt.Fprintf(w, "  not updated: %v\n", up.err)
		}
	}
	if summaryOnly && res.Diff == "" {
		return
	}
	for _, line := range strings.SplitAfter(res.Diff, "\n") {
		switch {
		case strings.HasPrefix(line, "+"):
			fmt.Fprint(w, paint(colorGreen, strings.TrimSuffix(line, "\n"))+"\n")
		case strings.HasPrefix(line, "-"):
			fmt.Fprint(w, paint(colorRed, strings.TrimSuffix(line, "\n"))+"\n")
		case strings.HasPrefix(line, "@@"):
			fmt.Fprint(w, paint(colorCyan, strings.TrimSuffix(line, "\n"))+"\n")
		default:
			fmt.Fprint(w, line)
		}
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/calibrate"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/stdiotap"
	"github.com/acptap/acptap/store"
)

type calibrateOptions struct {
	IO        *IO
	StorePath string
	Names     []string
	Argv      []string // after --; nil for the recorded command
	Runs      int
	Replay    replay.Options
	CADir     string
	Verbose   bool // pass the agent's stderr through
	Color     bool
}

const calibrateUsage = "acptap calibrate [--runs N] NAME... [-- AGENT [ARGS...]]"

func calibrateCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "calibrate",
		Usage:     "learn the values an agent varies from run to run, and store rules for them with the recording",
		ArgsUsage: "NAME... [-- AGENT [ARGS...]]",
		Description: "Replays each recording --runs times (default: 3) with the recorded agent and compares the runs\n" +
			"and the recording, normalized, frame by frame and request by request. Each value that varies\n" +
			"between them becomes a rule (its JSON path, and a regexp over the part that varies), stored with\n" +
			"the recording in place of an earlier calibration's and printed; later replays apply the rules.\n" +
			"A frame some runs send and others do not (a tool call's last update, an agent request of one\n" +
			"method) becomes a presence rule, and the runs are made again with it. Runs that differ in more\n" +
			"(another tool call, a frame every run lacks against the recording) are not noise: calibrate\n" +
			"names the place and learns nothing from that recording.\n\n" +
			"Exit 0 when every recording is calibrated (or nothing varies), 1 when runs differ in more than\n" +
			"values, 2 on a usage or environment error.",
		Flags: append([]cli.Flag{
			storeFlag(storeReadUsage),
			&cli.IntFlag{Name: "runs", Value: calibrate.DefaultRuns, Usage: "replay each recording `N` times"},
			&cli.Float64Flag{Name: "speed", Usage: "as replay's: 0 serves the LLM side without waits; a `FACTOR` N divides the recorded timing by N"},
		}, runFlags()...),
		Action: func(c *cli.Context) error {
			opts, err := newCalibrateOptions(c, stdio)
			if err != nil {
				return err
			}
			return runCalibrate(opts)
		},
	}
}

// newCalibrateOptions turns calibrate's flags into options, checking them
// all.
func newCalibrateOptions(c *cli.Context, stdio *IO) (*calibrateOptions, error) {
	opts := &calibrateOptions{
		IO:        stdio,
		StorePath: c.String("store"),
		Names:     c.Args().Slice(),
		Runs:      c.Int("runs"),
		CADir:     c.String("ca-dir"),
		Verbose:   c.Bool("verbose"),
		Color:     colorFor(stdio.Out),
	}
	if len(opts.Names) == 0 {
		return nil, usageErrorf("no recording named; usage: %s", calibrateUsage)
	}
	if opts.Runs < 1 {
		return nil, usageErrorf("--runs must be 1 or more, got %d", opts.Runs)
	}
	argv, err := agentAfterDashDash(stdio, calibrateUsage)
	if err != nil {
		return nil, err
	}
	opts.Argv = argv
	if opts.Replay, err = newRunOptions(c); err != nil {
		return nil, err
	}
	// An agent whose runs depend on the recorded timing (a notification
	// racing a turn's end) is calibrated at the pace it is replayed at.
	if sp := c.Float64("speed"); sp != 0 && !(sp >= minSpeed && sp <= maxSpeed) {
		return nil, usageErrorf("--speed %v: want 0 (no waits) or from %v (%v times slower than recorded) to %v", sp, minSpeed, 1/minSpeed, maxSpeed)
	}
	opts.Replay.Speed = c.Float64("speed")
	return opts, nil
}

func runCalibrate(opts *calibrateOptions) error {
	if err := prepareRun(&opts.Replay, opts.CADir, opts.Argv, opts.Verbose, opts.IO); err != nil {
		return err
	}
	// Read-only for the replays, with a shared lock; writable, which
	// locks other processes out, only to store the rules.
	src, err := openSource(opts.StorePath, opts.Names)
	if err != nil {
		return err
	}
	defer src.Close()
	// SIGINT, SIGTERM and SIGHUP stop the runs as they stop replay's: the
	// running agent is stopped, its sandbox and its tap's files removed,
	// and acptap says so and exits 128+n.
	ctx, interrupted := interruptible()
	defer interrupted.stop()
	// From here the deferred Close removes a directory's temporary store.
	src.signalsHandled()
	results, err := calibrateAll(ctx, src.st, opts)
	if sig := interrupted.signal(); sig != nil {
		// What the runs of a recording learned is only known once they
		// have all run: nothing is stored, not even the rules of the
		// recordings done, so that a calibration is never half kept.
		ss := sig.(syscall.Signal)
		return &exitError{code: 128 + int(ss), err: fmt.Errorf("interrupted by %s after %d of %d recordings; no rules stored", stdiotap.SignalName(ss), len(results), len(opts.Names))}
	}
	if err != nil {
		return err
	}
	failed := 0
	var calibrated []*calibrate.Result
	for _, res := range results {
		if res.Calibrated() {
			calibrated = append(calibrated, res)
		} else {
			failed++
		}
	}
	if len(calibrated) > 0 {
		if err := src.writable(); err != nil {
			return err
		}
		for _, res := range calibrated {
			if err := calibrate.Save(src.st, res); err != nil {
				return usageErrorf("calibrate %s: storing the rules: %w", res.Name, err)
			}
			// A directory gets the rules file of its recording written.
			if err := src.save(res.Name); err != nil {
				return usageErrorf("calibrate %s: storing the rules: %w", res.Name, err)
			}
		}
	}
	for _, res := range results {
		printCalibration(opts.IO.Out, res, opts.Color)
	}
	if len(opts.Names) > 1 {
		fmt.Fprintf(opts.IO.Out, "%d calibrated, %d failed\n", len(opts.Names)-failed, failed)
	}
	if failed > 0 {
		return exitCode(ExitDiverged)
	}
	return nil
}

// calibrateAll calibrates each named recording of st.
// A signal (ctx done) stops it after the recording under way, whose
// result it drops, with the results of those before.
func calibrateAll(ctx context.Context, st *store.Store, opts *calibrateOptions) ([]*calibrate.Result, error) {
	// Check every name first: a typo is a usage error, not a failure.
	for _, name := range opts.Names {
		rec, err := st.Get(name)
		if err != nil {
			return nil, recordingError(err, opts.StorePath)
		}
		if rec.Live && !rec.Done {
			// Its rules could not be stored: say so before the runs.
			return nil, usageErrorf("recording %q in %s is being recorded; calibrate it once its acptap record has ended", name, opts.StorePath)
		}
	}
	var results []*calibrate.Result
	for _, name := range opts.Names {
		res, err := calibrate.Run(ctx, st, name, calibrate.Options{Runs: opts.Runs, Replay: opts.Replay})
		if ctx.Err() != nil {
			// Stopped by a signal: neither a calibration nor an error.
			return results, ctx.Err()
		}
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil, recordingError(err, opts.StorePath)
			}
			if errors.Is(err, replay.ErrNoCommand) {
				err = fmt.Errorf("%w; pass -- AGENT [ARGS...]", err)
			}
			return nil, usageErrorf("calibrate %s: %w", name, err)
		}
		results = append(results, res)
	}
	return results, nil
}

// maxAlso bounds the conflicts printed after the first.
const maxAlso = 3

// printCalibration prints what calibrate learned from one recording, or
// why it learned nothing.
func printCalibration(w io.Writer, res *calibrate.Result, color bool) {
	paint := painter(color).paint
	runs := fmt.Sprintf("%d runs", res.Runs)
	if res.Runs == 1 {
		runs = "1 run"
	}
	switch {
	case !res.Calibrated():
		fmt.Fprintf(w, "%s %s: %s; nothing learned\n", paint(colorRed, "FAIL"), res.Name, res.Conflicts[0])
		if res.Conflicts[0].Kind == calibrate.Steady {
			fmt.Fprintf(w, "  fix: acptap replay --update %s takes the runs' behaviour as the expected one; or record the session again\n", res.Name)
		}
		more := res.Conflicts[1:]
		for i, c := range more {
			if i == maxAlso {
				fmt.Fprintf(w, "  and %d more\n", len(more)-i)
				break
			}
			fmt.Fprintf(w, "  also: %s\n", c)
		}
		return
	case len(res.Rules) == 0:
		fmt.Fprintf(w, "%s %s (%s): nothing varies; no rules\n", paint(colorGreen, "CALIBRATED"), res.Name, runs)
		return
	}
	n := fmt.Sprintf("%d rules", len(res.Rules))
	if len(res.Rules) == 1 {
		n = "1 rule"
	}
	fmt.Fprintf(w, "%s %s (%s): %s stored with the recording\n", paint(colorGreen, "CALIBRATED"), res.Name, runs, n)
	for _, l := range res.Rules {
		fmt.Fprintf(w, "  %s\n", strings.TrimPrefix(l.Rule.Comment(), "calibrate: "))
		fmt.Fprintf(w, "    %s\n", l.Rule.WithComment(""))
	}
}

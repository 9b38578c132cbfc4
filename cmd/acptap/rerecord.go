package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/fixture"
	"github.com/acptap/acptap/record"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/rerecord"
	"github.com/acptap/acptap/stdiotap"
	"github.com/acptap/acptap/store"
)

const rerecordUsage = "acptap rerecord [flags] NAME... | --all | --review [NAME...] [-- AGENT [ARGS...]]"

type rerecordOptions struct {
	IO        *IO
	StorePath string
	Names     []string
	All       bool
	// Argv is the agent command after --; nil runs the recorded one.
	Argv []string
	// BaseURLs replace the recorded upstreams of their variables.
	BaseURLs   []record.BaseURL
	Accept     bool
	Review     bool
	Timeout    time.Duration
	Grace      time.Duration
	UpstreamCA string
	CADir      string
}

func rerecordCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "rerecord",
		Usage:     "record recordings again against the live LLM, keeping the previous version until accepted",
		ArgsUsage: "NAME... | --all | --review [NAME...] [-- AGENT [ARGS...]]",
		Description: "Runs the agent of each recording again, with its LLM traffic going to the live upstreams it\n" +
			"was recorded with (or --base-url VAR=UPSTREAM) and the editor side played as acptap plays it:\n" +
			"a scenario's recording (record --scenario) by running its scenario file again (the stored copy\n" +
			"when the file is gone), an editor-made one from its recorded editor frames, permissions\n" +
			"answered by kind. Each new version is kept in STORE.pending, and what changed against the\n" +
			"previous version is printed as replay reports it; --accept replaces the previous version at\n" +
			"once, --review goes through the kept versions one at a time (accept, skip, quit). The agent\n" +
			"needs its keys: rerecord refuses, naming them, when a secret variable the recording had is unset.",
		Flags: []cli.Flag{
			storeFlag(storeReadUsage),
			&cli.BoolFlag{Name: "all", Usage: "every recording in the store"},
			&cli.BoolFlag{Name: "accept", Usage: "replace each recording with its new version at once"},
			&cli.BoolFlag{Name: "review", Usage: "go through the new versions kept in STORE.pending: accept, skip or quit, one at a time"},
			&cli.StringSliceFlag{Name: "base-url", Usage: "send the agent's variable `VAR=UPSTREAM` to UPSTREAM instead of the recorded upstream; repeatable"},
			&cli.DurationFlag{Name: "timeout", Value: 5 * time.Minute, Usage: "how long the agent may stay silent while the editor side waits for it (the live LLM thinks), a `DURATION`"},
			graceFlag(),
			&cli.StringFlag{Name: "upstream-ca", Usage: "PEM `FILE` of extra CA certificates trusted for upstream TLS"},
			caDirFlag(),
		},
		Action: func(c *cli.Context) error {
			opts, err := newRerecordOptions(c, stdio)
			if err != nil {
				return err
			}
			return runRerecord(opts)
		},
	}
}

func newRerecordOptions(c *cli.Context, stdio *IO) (*rerecordOptions, error) {
	if err := checkStore(c); err != nil {
		return nil, err
	}
	opts := &rerecordOptions{
		IO: stdio, StorePath: c.String("store"), Names: c.Args().Slice(), All: c.Bool("all"),
		Accept: c.Bool("accept"), Review: c.Bool("review"), Timeout: c.Duration("timeout"), Grace: c.Duration("grace"),
		UpstreamCA: c.String("upstream-ca"), CADir: c.String("ca-dir"),
	}
	if stdio.dashDash {
		opts.Argv = stdio.agentArgv
		if len(opts.Argv) == 0 {
			return nil, usageErrorf("nothing after --; pass the agent command to run, or leave -- out for the recorded one")
		}
	}
	switch {
	case opts.Review && opts.Accept:
		return nil, usageErrorf("--review and --accept: pick one (--review asks for each recording, --accept takes every new version)")
	case opts.Review && (opts.All || opts.Argv != nil || c.IsSet("base-url")):
		return nil, usageErrorf("--review goes through the versions kept already and runs no agent; drop --all, --base-url and the agent command")
	case opts.Review:
	case opts.All && len(opts.Names) > 0:
		return nil, usageErrorf("both --all and recording names; pass one or the other")
	case !opts.All && len(opts.Names) == 0:
		return nil, usageErrorf("no recording named; usage: %s", rerecordUsage)
	}
	if opts.Timeout <= 0 {
		return nil, usageErrorf("--timeout %v: want a positive duration, such as 5m", opts.Timeout)
	}
	for _, spec := range c.StringSlice("base-url") {
		name, upstream, ok := strings.Cut(spec, "=")
		if !ok || name == "" || upstream == "" {
			return nil, usageErrorf("--base-url %q: want VAR=UPSTREAM, e.g. --base-url OPENAI_BASE_URL=https://api.openai.com/v1", spec)
		}
		if err := checkBaseURL(name, upstream); err != nil {
			return nil, err
		}
		opts.BaseURLs = append(opts.BaseURLs, record.BaseURL{Var: name, Upstream: upstream})
	}
	return opts, nil
}

// rerecord is how the re-recordings run.
func (opts *rerecordOptions) rerecord() rerecord.Options {
	return rerecord.Options{
		Argv:       opts.Argv,
		BaseURLs:   opts.BaseURLs,
		Timeout:    opts.Timeout,
		Grace:      opts.Grace,
		UpstreamCA: opts.UpstreamCA,
		CADir:      opts.CADir,
		Stderr:     opts.IO.Err,
		Logf:       notices(opts.IO),
		TapProcess: tapProcess(),
		MCPRelay:   mcpRelay(),
		Version:    version(),
	}
}

// rerecordError turns an error that kept a re-recording from running into
// a usage error that says how to fix it.
func rerecordError(err error) error {
	switch {
	case errors.Is(err, rerecord.ErrNoAgent):
		return usageErrorf("%v after --", err)
	case errors.Is(err, rerecord.ErrScenario), errors.Is(err, rerecord.ErrWorkspace):
		return usageErrorf("%v", err)
	}
	return recordError(err, record.Options{})
}

// pendingPath is where rerecord keeps the new versions of the recordings
// of the store at path until they are accepted: a store file beside it.
func pendingPath(path string) string {
	return strings.TrimRight(filepath.Clean(path), string(filepath.Separator)) + ".pending"
}

func runRerecord(opts *rerecordOptions) error {
	src, err := openSource(opts.StorePath, opts.Names)
	if err != nil {
		return err
	}
	defer src.Close()
	if opts.Review {
		return runReview(opts, src)
	}
	names := opts.Names
	if opts.All {
		if names, err = allNames(src.st, opts.StorePath); err != nil {
			return err
		}
	}
	metas := make([]store.Recording, len(names))
	for i, name := range names {
		if metas[i], err = src.st.Get(name); err != nil {
			return recordingError(err, opts.StorePath)
		}
		if err := rerecord.CheckKeys(metas[i], nil); err != nil {
			return usageErrorf("%v", err)
		}
	}
	if err := src.writable(); err != nil {
		return err
	}
	pending, err := openStore(pendingPath(opts.StorePath), false)
	if err != nil {
		return err
	}
	defer closePending(pending)
	ctx, interrupted := interruptible()
	defer interrupted.stop()
	src.signalsHandled()
	var failed, kept int
	for _, name := range names {
		if ctx.Err() != nil {
			break
		}
		res, err := rerecord.Run(ctx, src.st, name, pending, opts.rerecord())
		switch {
		case err != nil:
			return rerecordError(err)
		case res.Err != nil:
			failed++
			fmt.Fprintf(opts.IO.Out, "FAILED %s: %v; the new version is kept in %s, the previous one unchanged\n", name, res.Err, pendingPath(opts.StorePath))
			continue
		}
		diff, err := replay.DiffStores(src.st, name, pending, name, replay.DiffOptions{LabelA: "previous", LabelB: "new"})
		if err != nil {
			return usageErrorf("comparing %s with its new version: %v", name, err)
		}
		reportRerecord(opts.IO, name, diff, res.Elapsed)
		if opts.Accept {
			if err := acceptPending(src, pending, name); err != nil {
				return err
			}
			fmt.Fprintf(opts.IO.Out, "  accepted: %s is the new version\n", name)
		} else {
			kept++
		}
	}
	if sig := interrupted.signal(); sig != nil {
		ss := sig.(syscall.Signal)
		return &exitError{code: 128 + int(ss), err: fmt.Errorf("interrupted by %s; the new versions recorded before are kept in %s", stdiotap.SignalName(ss), pendingPath(opts.StorePath))}
	}
	if kept > 0 {
		fmt.Fprintf(opts.IO.Out, "the new versions are kept in %s; accept them with: acptap rerecord --store %s --review\n", pendingPath(opts.StorePath), opts.StorePath)
	}
	if failed > 0 {
		return exitCode(1)
	}
	return nil
}

// reportRerecord prints what changed between a recording and its new
// version, in replay's words.
func reportRerecord(stdio *IO, name string, diff *replay.DiffResult, elapsed time.Duration) {
	if diff.Equal() {
		fmt.Fprintf(stdio.Out, "RERECORDED %s in %s: no change against the previous version (%d agent values, %d LLM requests)\n",
			name, elapsed.Round(time.Millisecond), len(diff.Expected), len(diff.Requests))
		return
	}
	fmt.Fprintf(stdio.Out, "RERECORDED %s in %s: changed against the previous version\n", name, elapsed.Round(time.Millisecond))
	printDiffResult(stdio.Out, diff, colorFor(stdio.Out))
}

// acceptPending makes the new version of name in pending the recording
// in src (written back to its directory for an exported one) and removes
// it from pending.
func acceptPending(src *source, pending *store.Store, name string) error {
	rec, err := fixture.FromStore(pending, name)
	if err != nil {
		return usageErrorf("reading the new version of %s: %v", name, err)
	}
	if err := fixture.Put(context.Background(), src.st, name, rec, true); err != nil {
		return usageErrorf("replacing %s with its new version: %v; the previous version is unchanged", name, err)
	}
	if err := src.save(name); err != nil {
		return usageErrorf("%v", err)
	}
	if err := pending.Delete(name); err != nil {
		return usageErrorf("removing the accepted version of %s from %s: %v", name, pending.Path(), err)
	}
	return nil
}

// runReview goes through the new versions kept in the pending store, one
// at a time: the change printed, then a question on stdin.
func runReview(opts *rerecordOptions, src *source) error {
	path := pendingPath(opts.StorePath)
	if _, err := os.Stat(path); err != nil {
		return usageErrorf("no new versions to review: %s does not exist; record some with: acptap rerecord NAME", path)
	}
	if err := src.writable(); err != nil {
		return err
	}
	pending, err := openStore(path, false)
	if err != nil {
		return err
	}
	defer closePending(pending)
	recs, err := pending.List()
	if err != nil {
		return usageErrorf("reading %s: %v", path, err)
	}
	var names []string
	for _, r := range recs {
		if r.Damage == nil && r.Done && (len(opts.Names) == 0 || slices.Contains(opts.Names, r.Name)) {
			names = append(names, r.Name)
		}
	}
	for _, n := range opts.Names {
		if !slices.Contains(names, n) {
			return usageErrorf("no new version of %s in %s; record one with: acptap rerecord %s", n, path, n)
		}
	}
	in := bufio.NewReader(opts.IO.In)
	var accepted, skipped int
	for i, name := range names {
		if _, err := src.st.Get(name); err != nil {
			fmt.Fprintf(opts.IO.Out, "%s: new recording (no previous version)\n", name)
		} else {
			diff, err := replay.DiffStores(src.st, name, pending, name, replay.DiffOptions{LabelA: "previous", LabelB: "new"})
			if err != nil {
				return usageErrorf("comparing %s with its new version: %v", name, err)
			}
			fmt.Fprintf(opts.IO.Out, "[%d/%d] ", i+1, len(names))
			reportRerecord(opts.IO, name, diff, 0)
		}
		fmt.Fprintf(opts.IO.Out, "accept the new version of %s? [a]ccept, [s]kip, [q]uit: ", name)
		answer, err := in.ReadString('\n')
		answer = strings.ToLower(strings.TrimSpace(answer))
		switch {
		case answer == "a" || answer == "accept":
			if err := acceptPending(src, pending, name); err != nil {
				return err
			}
			accepted++
			fmt.Fprintf(opts.IO.Out, "accepted %s\n", name)
			continue
		case answer == "s" || answer == "skip":
			skipped++
			fmt.Fprintf(opts.IO.Out, "skipped %s: its new version stays in %s\n", name, path)
			continue
		case answer == "q" || answer == "quit" || errors.Is(err, io.EOF) && answer == "":
		default:
			return usageErrorf("answer %q to the question about %s: want a, s or q; %d accepted so far", answer, name, accepted)
		}
		break
	}
	fmt.Fprintf(opts.IO.Out, "%d accepted, %d skipped, %d left to review\n", accepted, skipped, len(names)-accepted-skipped)
	return nil
}

// closePending closes the pending store and removes it once it holds
// nothing.
func closePending(pending *store.Store) {
	recs, err := pending.List()
	path := pending.Path()
	pending.Close()
	if err == nil && len(recs) == 0 {
		os.Remove(path)
	}
}

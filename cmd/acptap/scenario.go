package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/internal/stale"
	"github.com/acptap/acptap/record"
	"github.com/acptap/acptap/scenario"
	"github.com/acptap/acptap/stdiotap"
	"github.com/acptap/acptap/store"
)

// loadScenarios reads what --scenario names, checked whole before
// anything starts: a file, or a directory's *.json files in name order,
// those --run matches.
func loadScenarios(c *cli.Context) ([]*scenario.Scenario, error) {
	path := c.String("scenario")
	if path == "" {
		for _, f := range []string{"run", "parallel"} {
			if c.IsSet(f) {
				return nil, usageErrorf("--%s applies to --scenario DIR; add --scenario or drop --%s", f, f)
			}
		}
		return nil, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, usageErrorf("--scenario %s: %v; pass a scenario file or a directory of them", path, errors.Unwrap(err))
	}
	if n := c.Int("parallel"); n < 1 {
		return nil, usageErrorf("--parallel %d: want 1 or more scenarios at once", n)
	}
	files := []string{path}
	if fi.IsDir() {
		if c.IsSet("name") {
			return nil, usageErrorf("--name names one recording; with --scenario DIR each scenario names its own (its \"name\", else its file's name)")
		}
		if files, err = filepath.Glob(filepath.Join(path, "*.json")); err != nil {
			return nil, usageErrorf("--scenario %s: %v", path, err)
		}
		slices.Sort(files)
		if len(files) == 0 {
			return nil, usageErrorf("--scenario %s: no *.json scenario files in the directory", path)
		}
	} else {
		for _, f := range []string{"run", "parallel"} {
			if c.IsSet(f) {
				return nil, usageErrorf("--%s applies to --scenario DIR, not to one file; drop --%s", f, f)
			}
		}
	}
	var run *regexp.Regexp
	if expr := c.String("run"); expr != "" {
		if run, err = regexp.Compile(expr); err != nil {
			return nil, usageErrorf("--run %q: not a regular expression: %v", expr, err)
		}
	}
	var out []*scenario.Scenario
	seen := map[string]string{}
	for _, f := range files {
		sc, err := scenario.Load(f)
		if err != nil {
			return nil, usageErrorf("%v", err)
		}
		if c.IsSet("name") {
			sc.Name = c.String("name")
		}
		if err := store.ValidName(sc.Name); err != nil {
			return nil, usageErrorf("scenario %s: recording name %q: %v; give the scenario a \"name\" or rename the file", f, sc.Name, err)
		}
		if other, ok := seen[sc.Name]; ok {
			return nil, usageErrorf("scenarios %s and %s both name the recording %q; give one of them another \"name\"", other, f, sc.Name)
		}
		seen[sc.Name] = f
		if run == nil || run.MatchString(sc.Name) {
			out = append(out, sc)
		}
	}
	if len(out) == 0 {
		return nil, usageErrorf("--run %q matches none of the %d scenarios in %s", c.String("run"), len(files), path)
	}
	return out, nil
}

// scenarioOutcome is how recording one scenario went.
type scenarioOutcome struct {
	name string
	res  *scenario.Result
	// err is the scenario's failure (the agent did not play its part, or
	// the timeout ran out); the recording is kept.
	err error
	// fatal is record's own failure: nothing, or not all, was recorded.
	fatal   error
	exit    stdiotap.Exit
	elapsed time.Duration
}

// runScenarios records each scenario of opts, opts.Parallel at once, and
// prints one line per scenario on stdout, in order.
func runScenarios(opts *recordOptions) error {
	ro := opts.Record
	ro.StorePath = opts.StorePath
	ro.Version = version()
	ro.Logf = notices(opts.IO)
	ro.TapProcess = tapProcess()
	ro.MCPRelay = mcpRelay()
	// The agent runs in a copy of the workspace: a relative program path
	// is the user's, from here.
	if strings.ContainsRune(ro.Argv[0], os.PathSeparator) && !filepath.IsAbs(ro.Argv[0]) {
		if abs, err := filepath.Abs(ro.Argv[0]); err == nil {
			ro.Argv = slices.Clone(ro.Argv)
			ro.Argv[0] = abs
		}
	}
	st, err := openStore(opts.StorePath, false)
	if err != nil {
		return err
	}
	defer st.Close()
	// The names are checked before the first agent starts: a scenario
	// whose recording exists fails alone otherwise, late.
	if !ro.Force {
		for _, sc := range opts.Scenarios {
			if _, err := st.Get(sc.Name); err == nil {
				return usageErrorf("recording %q already exists; pass --force to record its scenario again", sc.Name)
			}
		}
	}
	ctx, interrupted := interruptible()
	defer interrupted.stop()
	byName := map[string]*scenario.Scenario{}
	var names []string
	for _, sc := range opts.Scenarios {
		byName[sc.Name] = sc
		names = append(names, sc.Name)
	}
	var failed, fatal int
	var firstFatal error
	inOrder(names, opts.Parallel, func(name string) scenarioOutcome {
		return recordScenario(ctx, st, ro, byName[name])
	}, func(o scenarioOutcome) bool {
		switch {
		case o.fatal != nil:
			fatal++
			if firstFatal == nil {
				firstFatal = o.fatal
			}
			fmt.Fprintf(opts.IO.Out, "ERROR %s: %v\n", o.name, o.fatal)
		case o.err != nil:
			failed++
			fmt.Fprintf(opts.IO.Out, "FAILED %s: %v (%s); the recording is kept: acptap show %s\n", o.name, o.err, summarize(o.res), o.name)
		default:
			fmt.Fprintf(opts.IO.Out, "RECORDED %s (%s) in %s\n", o.name, summarize(o.res), o.elapsed.Round(time.Millisecond))
		}
		if o.exit.Code != 0 && o.fatal == nil {
			ro.Logf("%s: the agent exited with status %d", o.name, o.exit.Code)
		}
		return ctx.Err() == nil
	})
	if sig := interrupted.signal(); sig != nil {
		ss := sig.(syscall.Signal)
		return &exitError{code: 128 + int(ss), err: fmt.Errorf("interrupted by %s; what was recorded is kept", stdiotap.SignalName(ss))}
	}
	switch {
	case fatal > 0:
		return recordError(firstFatal, ro)
	case failed > 0:
		return exitCode(1)
	}
	return nil
}

// recordScenario records one scenario: the agent started by record in a
// fresh copy of the scenario's workspace, its stdio the scenario's player
// instead of an editor.
func recordScenario(ctx context.Context, st *store.Store, ro record.Options, sc *scenario.Scenario) scenarioOutcome {
	start := time.Now()
	o := scenarioOutcome{name: sc.Name}
	stale.Remove(os.TempDir(), stale.ScenarioPrefix)
	dir, err := os.MkdirTemp("", stale.Dir(stale.ScenarioPrefix))
	if err != nil {
		o.fatal = fmt.Errorf("making the scenario's workspace: %w", err)
		return o
	}
	defer os.RemoveAll(dir)
	// The directory's own name is the workspace's, as a user's would be.
	cwd := filepath.Join(dir, "workspace")
	if sc.Workspace != "" {
		err = os.CopyFS(cwd, os.DirFS(sc.Workspace))
	} else {
		err = os.Mkdir(cwd, 0o755)
	}
	if err != nil {
		o.fatal = fmt.Errorf("copying the workspace %s: %w", sc.Workspace, err)
		return o
	}
	ro.Name = sc.Name
	ro.Dir = cwd
	ro.Snapshot = true
	ro.Scenario = sc.Source
	if abs, err := filepath.Abs(sc.Path); err == nil {
		ro.ScenarioPath = abs
	}
	d, err := record.RunDriven(ctx, st, ro, func(stdin io.WriteCloser, stdout io.Reader) error {
		var err error
		o.res, err = scenario.Play(ctx, sc, stdin, stdout, scenario.Options{Cwd: cwd, Version: version()})
		return err
	})
	o.fatal, o.err = err, d.DriverErr
	if d.Result != nil {
		o.exit = d.Result.Exit
	}
	o.elapsed = time.Since(start)
	return o
}

// summarize says what a scenario's sessions did: "2 turns: end_turn,
// cancelled", per session when there are several.
func summarize(res *scenario.Result) string {
	if res == nil || len(res.Sessions) == 0 {
		return "no session"
	}
	var parts []string
	for _, s := range res.Sessions {
		var reasons []string
		for _, t := range s.Turns {
			r := t.StopReason
			if r == "" {
				r = "unfinished"
			}
			reasons = append(reasons, r)
		}
		parts = append(parts, fmt.Sprintf("%s: %s", plural(len(s.Turns), "turn"), strings.Join(reasons, ", ")))
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return fmt.Sprintf("%d sessions; %s", len(parts), strings.Join(parts, "; "))
}

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/internal/bytesize"
	"github.com/acptap/acptap/internal/snapshot"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/record"
	"github.com/acptap/acptap/scenario"
	"github.com/acptap/acptap/store"
)

const recordUsage = "acptap record [flags] -- AGENT [ARGS...]"

type recordOptions struct {
	IO        *IO
	StorePath string
	Record    record.Options
	// Scenarios, with --scenario, drive the agent instead of an editor.
	Scenarios []*scenario.Scenario
	// Parallel is how many scenarios record at once.
	Parallel int
}

func recordCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "record",
		Usage:     "run an agent, pass its stdio through and record it",
		ArgsUsage: "-- AGENT [ARGS...]",
		Description: "Put `acptap record --store PATH -- my-agent --acp` where the editor's agent settings say\n" +
			"`my-agent --acp`: each session is a recording, named after the agent and the time (a fixed\n" +
			"--name would be taken by the first); acptap show lists them, the newest last, and acptap mv\n" +
			"renames one. stdin and stdout stay the agent's, byte for byte; acptap's own\n" +
			"messages go to stderr; the exit status is the agent's. The HTTP tap serves the agent\n" +
			"only: the proxy and base-URL variables it gets carry a secret of this run, and other\n" +
			"requests get 407 or 404.",
		Flags: []cli.Flag{
			storeFlag(storeCreateUsage),
			&cli.StringFlag{Name: "name", Usage: "recording `NAME` (default: generated and printed to stderr)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing recording of the same name"},
			graceFlag(),
			&cli.StringSliceFlag{Name: "base-url", Usage: "set env `VAR[=UPSTREAM]` of the agent to a loopback URL of the HTTP tap that forwards to UPSTREAM (without one: VAR's value, else the public endpoint of a well-known VAR); repeatable"},
			&cli.StringFlag{Name: "upstream-ca", Usage: "PEM `FILE` of extra CA certificates trusted for upstream TLS"},
			caDirFlag(),
			&cli.BoolFlag{Name: "no-proxy-env", Usage: "do not set HTTPS_PROXY/HTTP_PROXY/ALL_PROXY and the CA variables for the agent"},
			proxyLoopbackFlag(),
			&cli.BoolFlag{Name: "snapshot", Usage: "store the working directory (minus .gitignore'd files and .git) in the recording; replay restores it as the agent's workspace"},
			&cli.GenericFlag{Name: "snapshot-max", Value: &sizeValue{snapshot.DefaultMaxBytes}, Usage: "largest `SIZE` of the files of a --snapshot, such as 64MiB or 1GiB"},
			&cli.IntFlag{Name: "snapshot-max-files", Value: snapshot.DefaultMaxFiles, Usage: "the most files, directories and symlinks in a --snapshot, a number `N`"},
			&cli.StringFlag{Name: "scenario", Usage: "drive the agent from the scenario `FILE` (or every *.json of a DIR) instead of passing an editor's stdio through (docs/scenarios.md)"},
			&cli.StringFlag{Name: "run", Usage: "with --scenario DIR, record only the scenarios whose names match `REGEXP`"},
			&cli.IntFlag{Name: "parallel", Value: 1, Usage: "with --scenario DIR, record up to `N` scenarios at once"},
			&cli.StringFlag{Name: "max-backlog", Value: fmt.Sprintf("%dMiB", record.DefaultMaxBacklog>>20), Usage: "most memory `SIZE` that the agent's stdio forwarded but not yet recorded may take when recording falls behind (half of it stdio not yet framed); forwarding waits once it is full (" + backlogRange + ")"},
		},
		Action: func(c *cli.Context) error {
			opts, err := newRecordOptions(c, stdio)
			if err != nil {
				return err
			}
			if opts.Scenarios != nil {
				return runScenarios(opts)
			}
			return runRecord(opts)
		},
	}
}

// newRecordOptions turns record's flags into options, checking them.
func newRecordOptions(c *cli.Context, stdio *IO) (*recordOptions, error) {
	if err := noArgsBeforeAgent(c, recordUsage); err != nil {
		return nil, err
	}
	argv, err := agentAfterDashDash(stdio, recordUsage)
	if err != nil {
		return nil, err
	}
	grace, err := positiveDuration(c, "grace")
	if err != nil {
		return nil, err
	}
	if c.Bool("proxy-loopback") && c.Bool("no-proxy-env") {
		return nil, usageErrorf("--proxy-loopback has no effect with --no-proxy-env: the agent gets no proxy to send loopback through; drop one of them")
	}
	if n := c.Int("snapshot-max-files"); n < 1 {
		return nil, usageErrorf("--snapshot-max-files %d: want 1 or more files", n)
	}
	backlog, err := maxBacklog(c.String("max-backlog"))
	if err != nil {
		return nil, err
	}
	var routes []record.BaseURL
	for _, spec := range c.StringSlice("base-url") {
		name, upstream, _ := strings.Cut(spec, "=")
		if name == "" || strings.ContainsAny(name, " \t") {
			return nil, usageErrorf("--base-url %q: want VAR or VAR=UPSTREAM, e.g. --base-url OPENAI_BASE_URL", spec)
		}
		if err := checkBaseURL(name, upstream); err != nil {
			return nil, err
		}
		routes = append(routes, record.BaseURL{Var: name, Upstream: upstream})
	}
	if c.IsSet("name") && c.String("name") == "" {
		return nil, usageErrorf("--name is empty; pass a name, or leave --name out for a generated one")
	}
	scenarios, err := loadScenarios(c)
	if err != nil {
		return nil, err
	}
	return &recordOptions{
		IO:        stdio,
		StorePath: c.String("store"),
		Scenarios: scenarios,
		Parallel:  c.Int("parallel"),
		Record: record.Options{
			Argv:             argv,
			Name:             c.String("name"),
			Force:            c.Bool("force"),
			Stdin:            stdio.In,
			Stdout:           stdio.Out,
			Stderr:           stdio.Err,
			Grace:            grace,
			ForwardSignals:   true,
			BaseURLs:         routes,
			UpstreamCA:       c.String("upstream-ca"),
			CADir:            c.String("ca-dir"),
			NoProxyEnv:       c.Bool("no-proxy-env"),
			ProxyLoopback:    c.Bool("proxy-loopback"),
			Snapshot:         c.Bool("snapshot"),
			SnapshotMaxBytes: c.Generic("snapshot-max").(*sizeValue).n,
			SnapshotMaxFiles: c.Int("snapshot-max-files"),
			MaxBacklog:       backlog,
		},
	}, nil
}

// checkBaseURL refuses, before anything starts, an upstream of
// --base-url VAR=UPSTREAM (or VAR's value) that no tap could forward to:
// an explicit one that is neither a URL nor HOST:PORT (OLLAMA_HOST's
// form), and a port outside 1 to 65535. The scheme and the host are
// record's to check (record.Prepare).
func checkBaseURL(name, upstream string) error {
	explicit := upstream != ""
	if !explicit {
		upstream = os.Getenv(name)
	}
	if upstream == "" {
		return nil
	}
	shown := hideUserinfo(upstream)
	if !strings.Contains(upstream, "://") {
		if host, _, err := net.SplitHostPort(upstream); explicit && (err != nil || host == "") {
			return usageErrorf("--base-url %s=%s: not a URL; pass an http or https URL, e.g. %s=https://api.example.com/v1, or HOST:PORT", name, shown, name)
		}
		upstream = "http://" + upstream
	}
	u, err := url.Parse(upstream)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without url.Parse's echo of the URL
		}
		return usageErrorf("--base-url %s=%s: not a URL: %v; pass an http or https URL, e.g. %s=https://api.example.com/v1", name, shown, err, name)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return usageErrorf("--base-url %s=%s: port %s is out of range; use a port from 1 to 65535", name, shown, p)
		}
	}
	return nil
}

// hideUserinfo masks what comes before an '@' of an upstream (user:pw
// of https://user:pw@host) in the errors that quote it.
func hideUserinfo(upstream string) string {
	scheme, rest, ok := strings.Cut(upstream, "://")
	if !ok {
		scheme, rest = "", upstream
	}
	host := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		host = rest[:i]
	}
	i := strings.LastIndex(host, "@")
	if i < 0 {
		return upstream
	}
	if ok {
		scheme += "://"
	}
	return scheme + "xxxxx" + rest[i:]
}

// maxMaxBacklog is the largest --max-backlog: more is a typo rather than
// a plan (the bound is memory the recorder may take), and it must fit in
// an int, whose 32-bit kind holds 1 GiB of whole GiBs.
const maxMaxBacklog = min(16<<30, math.MaxInt>>30<<30)

// backlogRange is what --max-backlog accepts, for its help and errors.
var backlogRange = fmt.Sprintf("%dKiB to %dGiB", record.MinMaxBacklog>>10, int64(maxMaxBacklog)>>30)

// maxBacklog reads --max-backlog, refusing sizes outside backlogRange:
// below it the bound would not be kept as given (see
// record.MinMaxBacklog).
func maxBacklog(v string) (int, error) {
	n, err := bytesize.Parse(v)
	if err != nil || n < record.MinMaxBacklog || n > maxMaxBacklog {
		return 0, usageErrorf("--max-backlog %q: want a size from %s, e.g. 64MiB or 1GiB", v, backlogRange)
	}
	return int(n), nil
}

func runRecord(opts *recordOptions) error {
	ro := opts.Record
	ro.StorePath = opts.StorePath
	ro.Version = version()
	ro.Logf = notices(opts.IO)
	ro.TapProcess = tapProcess()
	ro.MCPRelay = mcpRelay()
	if len(ro.Argv) == 0 {
		return usageErrorf("no agent command; usage: %s", recordUsage)
	}
	// Prepare before the store opens: a mistake records nothing and
	// creates no store.
	plan, err := record.Prepare(ro)
	if err != nil {
		return recordError(err, ro)
	}
	st, err := openStore(opts.StorePath, false)
	if err != nil {
		return err
	}
	defer st.Close()
	login, isLogin, err := plan.TerminalLogin(st)
	if err != nil {
		return usageErrorf("%w", err)
	}
	if isLogin {
		ro.Logf("%s", login)
		return runTerminalLogin(ro)
	}
	res, err := plan.Run(context.Background(), st)
	if err != nil {
		return recordError(err, ro)
	}
	if res.AgentErr != nil {
		ro.Logf("agent: %v", res.AgentErr)
	}
	return exitCode(res.Exit.Code)
}

// tapProcessCommand, as acptap's only argument, makes it the HTTP tap's
// own process of an acptap record (record.TapMain). It is no command of
// the CLI: the process serves its parent on its stdin, stdout and fd 3.
const tapProcessCommand = "__tap-process"

// tapProcess is how acptap record starts its HTTP tap's own process: this
// program again, named acptap (the name by which a test binary standing
// in for acptap knows to run Main), with tapProcessCommand. Where the
// program cannot be found the tap runs in-process (nil).
func tapProcess() *record.TapProcess {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return &record.TapProcess{Path: exe, Args: []string{"acptap", tapProcessCommand}}
}

// mcpRelay is the program acptap record has the agent run in place of an
// MCP server (record.Options.MCPRelay): this program, by the path it was
// started as, so that it starts under its own name (a test binary
// standing in for acptap knows to run Main by it); "" where it cannot be
// found, and the servers are not recorded.
func mcpRelay() string {
	path, err := exec.LookPath(os.Args[0])
	if err != nil {
		return ""
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return ""
}

// notices prints a library's notices on stderr, one line each, with the
// program's name.
func notices(stdio *IO) func(format string, args ...any) {
	return func(format string, args ...any) {
		fmt.Fprintf(stdio.Err, "acptap: "+format+"\n", args...)
	}
}

// recordError turns an error of package record into a usage error that
// says how to fix it.
func recordError(err error, opts record.Options) error {
	switch {
	case errors.Is(err, record.ErrNoCommand):
		return usageErrorf("%v; usage: %s", err, recordUsage)
	case errors.Is(err, record.ErrAgentNotFound):
		return usageErrorf("%v; check the command after -- (is it installed and on PATH?)", err)
	case errors.Is(err, record.ErrAgent):
		// The recording of an agent that never ran is not kept.
		return usageErrorf("%v (nothing recorded); check the command after --", err)
	case errors.Is(err, record.ErrName):
		return usageErrorf("%v; pass another --name", err)
	case errors.Is(err, store.ErrExists):
		return usageErrorf("%v; pass --force to replace it, or another --name", err)
	case errors.Is(err, store.ErrBusy):
		return usageErrorf("%v; pass another --name", err)
	}
	var bu *record.BaseURLError
	if errors.As(err, &bu) {
		switch {
		case errors.Is(err, record.ErrBaseURLTwice):
			return usageErrorf("--base-url %s given twice; give each variable once", bu.Var)
		case errors.Is(err, record.ErrBaseURLUnknown):
			return usageErrorf("--base-url %s: %s is not set and is not a well-known variable; pass --base-url %s=UPSTREAM", bu.Var, bu.Var, bu.Var)
		case errors.Is(err, record.ErrBaseURLUpstream):
			return usageErrorf("--base-url %v; pass an http or https URL without credentials, query or fragment (the agent sends its key itself)", err)
		}
		return usageErrorf("--base-url %v", err)
	}
	switch {
	case errors.Is(err, record.ErrUpstreamCA):
		return usageErrorf("--upstream-ca: %v; pass a readable PEM file of CA certificates", err)
	case errors.Is(err, proxy.ErrCAMismatch):
		return usageErrorf("%v; %s", err, caMismatchFix)
	case errors.Is(err, record.ErrCA):
		return usageErrorf("%v; pass another --ca-dir", err)
	case errors.Is(err, snapshot.ErrTooLarge):
		return usageErrorf("--snapshot: %v; add what the agent does not need to .gitignore, or raise --snapshot-max", err)
	case errors.Is(err, snapshot.ErrTooManyFiles):
		return usageErrorf("--snapshot: %v; add what the agent does not need to .gitignore, or raise --snapshot-max-files", err)
	case errors.Is(err, record.ErrSnapshot):
		return usageErrorf("--snapshot: %v; make it readable, add it to .gitignore, or record without --snapshot", err)
	case errors.Is(err, record.ErrSave):
		if fix, ok := fileSystemFix(err, "", "--store"); ok {
			return usageErrorf("%v; what was committed before the failure is kept; %s", err, fix)
		}
		return usageErrorf("%v; what was committed before the failure is kept", err)
	}
	return usageErrorf("%v", err)
}

// runTerminalLogin runs a terminal login's command (see
// record.TerminalLogin) as it is, on record's own stdio, the terminal the
// editor opened for it, and returns its exit status; SIGINT and SIGTERM
// reach it.
func runTerminalLogin(ro record.Options) error {
	cmd := exec.Command(ro.Argv[0], ro.Argv[1:]...)
	cmd.Env = ro.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ro.Stdin, ro.Stdout, ro.Stderr
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	if err := cmd.Start(); err != nil {
		return usageErrorf("the terminal login %q: %v", strings.Join(ro.Argv, " "), err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-signals:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return exitCode(128 + int(ws.Signal()))
		}
		return exitCode(exit.ExitCode())
	case err != nil:
		return usageErrorf("the terminal login %q: %v", strings.Join(ro.Argv, " "), err)
	}
	return exitCode(0)
}

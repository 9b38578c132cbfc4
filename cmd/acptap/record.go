package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/internal/snapshot"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/stdiotap"
	"github.com/acptap/acptap/store"
)

type recordOptions struct {
	IO        *IO
	StorePath string
	Name      string
	Force     bool
	Grace     time.Duration
	Argv      []string
	// BaseURLs are the --base-url VAR[=UPSTREAM] values.
	BaseURLs []string
	// UpstreamCA is a PEM file of extra roots for upstream TLS.
	UpstreamCA string
	// CADir holds the interception CA; if empty, proxy.DefaultCADir().
	CADir string
	// NoProxyEnv leaves HTTPS_PROXY and friends unset: only base-URL
	// routes reach the tap.
	NoProxyEnv bool
	// ForwardSignals relays SIGINT/SIGTERM/SIGHUP to the agent. Off for
	// in-process tests, which must not install signal handlers.
	ForwardSignals bool
	// Snapshot archives the working directory into the recording before
	// the agent starts, within SnapshotMax bytes of file contents and
	// SnapshotMaxFiles entries (zero: snapshot's defaults). See snapshot.go.
	Snapshot         bool
	SnapshotMax      int64
	SnapshotMaxFiles int
}

func recordCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "record",
		Usage:     "run an agent, pass its stdio through and record it",
		ArgsUsage: "-- AGENT [ARGS...]",
		Description: "Put `acptap record --name NAME -- my-agent --acp` where the editor's agent settings say\n" +
			"`my-agent --acp`. stdin and stdout stay the agent's, byte for byte; acptap's own\n" +
			"messages go to stderr; the exit status is the agent's.",
		Flags: []cli.Flag{
			storeFlag(),
			&cli.StringFlag{Name: "name", Usage: "recording `NAME` (default: generated and printed to stderr)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing recording of the same name"},
			&cli.DurationFlag{Name: "grace", Value: 3 * time.Second, Usage: "after the editor closes stdin, how long the agent may take to exit before it is terminated"},
			&cli.StringSliceFlag{Name: "base-url", Usage: "set env `VAR[=UPSTREAM]` of the agent to a loopback URL of the HTTP tap that forwards to UPSTREAM (default: VAR's value, else the public endpoint of a well-known VAR); repeatable"},
			&cli.StringFlag{Name: "upstream-ca", Usage: "PEM `FILE` of extra CA certificates trusted for upstream TLS"},
			&cli.StringFlag{Name: "ca-dir", EnvVars: []string{"ACPTAP_CA_DIR"}, Usage: "`DIR` of the interception CA (created on first use; default ~/.config/acptap)"},
			&cli.BoolFlag{Name: "no-proxy-env", Usage: "do not set HTTPS_PROXY/HTTP_PROXY/ALL_PROXY and the CA variables for the agent"},
			&cli.BoolFlag{Name: "snapshot", Usage: "store the working directory (minus .gitignore'd files and .git) in the recording; replay restores it as the agent's workspace"},
			&cli.GenericFlag{Name: "snapshot-max", Value: &sizeValue{snapshot.DefaultMaxBytes}, Usage: "largest `SIZE` of the files of a --snapshot (e.g. 64MiB, 1GiB)"},
			&cli.IntFlag{Name: "snapshot-max-files", Value: snapshot.DefaultMaxFiles, Usage: "most files, directories and symlinks in a --snapshot"},
		},
		Action: func(c *cli.Context) error {
			return runRecord(&recordOptions{
				IO:             stdio,
				StorePath:      c.String("store"),
				Name:           c.String("name"),
				Force:          c.Bool("force"),
				Grace:          c.Duration("grace"),
				Argv:           c.Args().Slice(),
				BaseURLs:       c.StringSlice("base-url"),
				UpstreamCA:     c.String("upstream-ca"),
				CADir:          c.String("ca-dir"),
				NoProxyEnv:     c.Bool("no-proxy-env"),
				ForwardSignals: true,

				Snapshot:         c.Bool("snapshot"),
				SnapshotMax:      c.Generic("snapshot-max").(*sizeValue).n,
				SnapshotMaxFiles: c.Int("snapshot-max-files"),
			})
		},
	}
}

func runRecord(opts *recordOptions) error {
	if len(opts.Argv) == 0 {
		return usageErrorf("record: no agent command; usage: acptap record [flags] -- AGENT [ARGS...]")
	}
	if opts.Grace <= 0 {
		return usageErrorf("record: --grace must be positive, got %v", opts.Grace)
	}
	if _, err := exec.LookPath(opts.Argv[0]); errors.Is(err, exec.ErrNotFound) {
		return usageErrorf("record: agent %q not found; check the command after -- (is it installed and on PATH?)", opts.Argv[0])
	} else if err != nil {
		return usageErrorf("record: cannot run agent: %v; check the command after --", err)
	}
	name := opts.Name
	if name == "" {
		name = generateName(opts.Argv[0], time.Now())
	}
	if err := store.ValidName(name); err != nil {
		return usageErrorf("record: %v; pass another --name", err)
	}
	env := os.Environ()
	routes, err := baseURLRoutes(opts.BaseURLs, env)
	if err != nil {
		return err
	}
	tapCfg, err := tapConfig(opts)
	if err != nil {
		return err
	}
	// Before the store opens and the agent starts: a snapshot that
	// fails records nothing.
	// One Redactor for everything recorded: the snapshot, the base URLs,
	// the HTTP exchanges and the stdio frames.
	secrets := redact.New(env)
	archive, err := takeSnapshot(opts, secrets)
	if err != nil {
		return err
	}
	st, err := openStore(opts.StorePath, false)
	if err != nil {
		return err
	}
	defer st.Close()

	cwd, _ := os.Getwd()
	rec := store.Recording{
		Name:     name,
		Created:  time.Now(),
		Version:  version(),
		Argv:     opts.Argv,
		Cwd:      cwd,
		EnvNames: envNames(env),
		Home:     os.Getenv("HOME"),
		Tmp:      os.TempDir(),
		ProxyEnv: !opts.NoProxyEnv,
		Snapshot: archive != nil,
	}
	if len(routes) > 0 {
		rec.BaseURLs = map[string]string{}
		for _, r := range routes {
			rec.BaseURLs[r.Var] = secrets.URL(r.Upstream)
		}
	}
	w, err := st.Create(rec, opts.Force)
	if errors.Is(err, store.ErrExists) {
		return usageErrorf("record: %v; pass --force to replace it, or another --name", err)
	}
	if err != nil {
		return usageErrorf("record: %v", err)
	}
	if archive != nil {
		if err := w.PutBlob(store.SnapshotBlob, archive); err != nil {
			// A recording that says it has a snapshot must have it.
			w.Finish()
			st.Delete(name)
			return usageErrorf("record: --snapshot: %v", err)
		}
	}
	fmt.Fprintf(opts.IO.Err, "acptap: recording %q into %s\n", name, st.Path())

	// Offsets count from just before the HTTP tap and the agent start; the
	// callbacks below may run before Start returns.
	start := time.Now()
	tapCfg.Redact = secrets.Exchange
	tapCfg.Start = start
	tapCfg.Logf = func(format string, args ...any) {
		fmt.Fprintf(opts.IO.Err, "acptap: "+format+"\n", args...)
	}
	tapCfg.Recorder = storeRecorder{w: w, logf: tapCfg.Logf}
	childEnv, local, tap, err := startTap(tapCfg, routes, env, opts.NoProxyEnv)
	if err != nil {
		w.Update(func(r *store.Recording) {
			r.Done = true
			r.ExitCode = ExitUsage
			r.Error = err.Error()
		})
		w.Finish()
		return err
	}
	// The tap closes before the writer finishes: Close waits for the last
	// exchanges to be recorded.
	defer tap.Close()
	sess, err := stdiotap.Start(stdiotap.Config{
		Argv:           proxy.ExpandBaseURLs(opts.Argv, local),
		Env:            childEnv,
		Stdin:          opts.IO.In,
		Stdout:         opts.IO.Out,
		Stderr:         opts.IO.Err,
		Grace:          opts.Grace,
		ForwardSignals: opts.ForwardSignals,
		OnLine: func(l stdiotap.Line) {
			// Agents do print their keys (debug logs, echoed config):
			// secrets are masked on every lane, not only in HTTP.
			l.Data = secrets.Bytes(l.Data)
			w.Append(frameEvent(l, start))
		},
	})
	if err != nil {
		w.Update(func(r *store.Recording) {
			r.Done = true
			r.ExitCode = ExitUsage
			r.Error = err.Error()
		})
		tap.Close()
		if ferr := w.Finish(); ferr != nil {
			fmt.Fprintf(opts.IO.Err, "acptap: saving recording %q: %v\n", name, ferr)
		}
		return usageErrorf("record: %v", err)
	}
	exit, waitErr := sess.Wait()
	if err := tap.Close(); err != nil {
		fmt.Fprintf(opts.IO.Err, "acptap: closing the HTTP tap: %v\n", err)
	}
	w.Update(func(r *store.Recording) {
		r.Done = true
		r.ExitCode = exit.Code
		if exit.Signal != 0 {
			r.Signal = exit.Signal.String()
		}
		if waitErr != nil {
			r.Error = waitErr.Error()
		}
		r.Duration = time.Since(start)
	})
	if err := w.Finish(); err != nil {
		return usageErrorf("record: saving recording %q: %v; what was committed before the failure is kept", name, err)
	}
	if waitErr != nil {
		fmt.Fprintf(opts.IO.Err, "acptap: agent: %v\n", waitErr)
	}
	return exitCode(exit.Code)
}

// frameEvent turns a framed stdio line into a store event.
func frameEvent(l stdiotap.Line, start time.Time) store.Event {
	e := store.Event{Kind: store.KindFrame, Offset: l.At.Sub(start), Data: l.Data}
	switch l.Stream {
	case stdiotap.Stdin:
		e.Lane = store.LaneEditor
	case stdiotap.Stdout:
		e.Lane = store.LaneAgent
	default:
		e.Lane = store.LaneStderr
	}
	if e.Offset < 0 {
		e.Offset = 0
	}
	if l.NoNewline {
		e.Flags |= store.FlagNoNewline
	}
	if l.Continued {
		e.Flags |= store.FlagContinued
	}
	return e
}

var nameUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// generateName makes a recording name from the agent's program name and the
// time, with a random suffix so that two agents started in the same second
// don't collide.
func generateName(program string, now time.Time) string {
	base := strings.Trim(nameUnsafe.ReplaceAllString(filepath.Base(program), "-"), ".-")
	if base == "" {
		base = "agent"
	}
	if len(base) > 40 {
		base = base[:40]
	}
	var b [3]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%s-%s", base, now.Format("20060102-150405"), hex.EncodeToString(b[:]))
}

// envNames returns the sorted names of env, never the values: values may be
// secrets.
func envNames(env []string) []string {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return names
}

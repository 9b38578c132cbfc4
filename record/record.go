// Package record runs an ACP agent between the editor and its LLM and records both conversations into a store.
//
// The agent's stdio is passed through byte for byte by stdiotap and framed
// into the store; its HTTP traffic reaches a proxy.Tap by the forward proxy
// variables, by rewritten base-URL variables, or both, and each exchange is
// recorded on the same timeline. Secrets are masked in everything recorded,
// never in what the editor and the agent exchange.
//
// Recording has two phases so that a mistake records nothing: Prepare
// checks the options and readies what can fail (the agent's program, the
// base-URL routes, the CAs, the workspace snapshot) without touching the
// store; Plan.Run creates the recording and runs the agent. Run does both.
package record

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/internal/stamp"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/proxy/tapproc"
	"github.com/acptap/acptap/stdiotap"
	"github.com/acptap/acptap/store"
)

// BaseURL is one base-URL route: the agent's variable Var is set to a
// loopback URL of the tap that forwards to Upstream.
type BaseURL struct {
	Var string
	// Upstream is where the route forwards to. If empty, Var's value in
	// Options.Env is used, else the public endpoint of a well-known
	// variable (proxy.KnownBaseURLs).
	Upstream string
}

// Options configure a recording. The zero value records nothing: Argv is
// required; everything else has a default.
type Options struct {
	// Argv is the agent command.
	Argv []string
	// Name is the recording's name. If empty, one is generated from the
	// agent's program name and the time.
	Name string
	// Force replaces a recording of the same name.
	Force bool
	// Env is the agent's environment before the tap's variables are
	// added. If nil, os.Environ() is used.
	Env []string
	// Dir is the agent's working directory, the one a snapshot takes and
	// the recording keeps as its cwd. If empty, the current directory.
	Dir string

	// Stdin, Stdout and Stderr are the editor's side of the agent's stdio.
	// If nil, os.Stdin, os.Stdout and os.Stderr are used.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Grace is how long the agent may take to exit after its stdin
	// closes before it is terminated. If zero, stdiotap.DefaultGrace.
	Grace time.Duration
	// ForwardSignals relays SIGINT, SIGTERM and SIGHUP to the agent. Off
	// for callers that must not install signal handlers (in-process tests).
	ForwardSignals bool

	// BaseURLs are the base-URL routes.
	BaseURLs []BaseURL
	// UpstreamCA is a PEM file of extra roots trusted for upstream TLS.
	UpstreamCA string
	// CADir holds the interception CA. If empty, proxy.DefaultCADir().
	CADir string
	// NoProxyEnv leaves the forward proxy variables and the CA files out
	// of the agent's environment: only base-URL routes reach the tap.
	NoProxyEnv bool
	// ProxyLoopback sends the agent's loopback destinations through the
	// forward proxy too, for an LLM on loopback reached that way: NO_PROXY
	// names only the tap (see proxy.EnvOptions). By default loopback goes
	// around the tap. It means nothing with NoProxyEnv.
	ProxyLoopback bool

	// Snapshot archives the working directory into the recording before
	// the agent starts, for replay to restore as its workspace.
	Snapshot bool
	// SnapshotMaxBytes and SnapshotMaxFiles bound a snapshot. If zero,
	// snapshot.DefaultMaxBytes and snapshot.DefaultMaxFiles.
	SnapshotMaxBytes int64
	SnapshotMaxFiles int
	// Scenario, if not nil, is the scenario file that drives the agent
	// in place of an editor, kept with the recording (store.ScenarioBlob);
	// ScenarioPath is its absolute path.
	Scenario     []byte
	ScenarioPath string

	// StorePath is the store's file, left out of a snapshot when it lies
	// in the working directory. Run sets it from the store if empty.
	StorePath string

	// TapProcess, if set, runs the HTTP tap in a process of its own, which
	// only forwards, while this process records what it forwarded: the
	// recording then never shares a Go runtime with the forwarding of an
	// LLM stream (see BENCHMARKS.md). Its program's main must call TapMain
	// when started with its Args. If nil, the tap runs in this process.
	TapProcess *TapProcess

	// MCPRelay, if not "", is the program the agent is to run in place of
	// each stdio MCP server the editor passes it in session/new,
	// session/load and session/resume, with mcprelay.Command and the
	// server's command as its arguments: acptap itself, whose main calls
	// mcprelay.Main for that command. The servers' stdio is then recorded
	// as lanes of their own (see lane.MCP). If "", the servers are not
	// recorded.
	MCPRelay string

	// MaxBacklog bounds the memory that the agent's stdio forwarded but
	// not yet recorded takes when recording falls behind (a flood of
	// output outpacing the store's compression and commits): half of it
	// holds stdio not yet framed, a sixteenth frames queued for the
	// store's next commit (and as much the commit under way), the rest
	// is room for the Go heap around them. Forwarding waits for the
	// recording only once that is full; no frame is ever dropped.
	// Falling behind by a quarter of the half, and catching up, are told
	// by Logf. If zero, DefaultMaxBacklog; below MinMaxBacklog, the stdio's
	// half is raised to stdiotap's least bound.
	MaxBacklog int

	// Version is the recorder's version, kept in the recording's metadata.
	Version string
	// Logf receives notices (the recording's name, the snapshot taken,
	// problems of the HTTP tap), one line each, without a program name.
	// If nil, notices are discarded.
	Logf func(format string, args ...any)
}

// TapProcess is the command that starts the HTTP tap's own process.
type TapProcess struct {
	// Path is the program, and Args its argv, Args[0] included.
	Path string
	Args []string
}

// TapMain is the main of the tap process (Options.TapProcess): a program
// that names itself there calls it when started so, and exits with what
// it returns. It serves on the process's stdin, stdout and fd 3, which
// only the recording's process may give it.
func TapMain() int { return tapproc.Run() }

// DefaultMaxBacklog is the Options.MaxBacklog used when it is zero.
const DefaultMaxBacklog = stdiotap.DefaultMaxBacklog

// MinMaxBacklog is the smallest Options.MaxBacklog kept as given: its half
// for stdio is stdiotap's least bound.
const MinMaxBacklog = 2 * stdiotap.MinBacklog

// Result is how a recorded session ended.
type Result struct {
	// Name is the recording's name (generated if Options.Name was empty).
	Name string
	// Exit is how the agent ended; its Code is what a wrapper should exit
	// with.
	Exit stdiotap.Exit
	// AgentErr is set when the agent's status could not be obtained; the
	// recording says so too.
	AgentErr error
}

// A Plan is a recording that passed Prepare: its agent found, its routes
// resolved, its CAs loaded and its snapshot taken. Nothing is in the store
// until Run.
type Plan struct {
	opts Options
	name string
	env  []string
	// routing is how the agent reaches the tap: Options.BaseURLs with
	// their upstreams resolved, NoProxyEnv and ProxyLoopback.
	routing proxy.Routing
	tap     proxy.Config
	// upstreamCAs is the PEM of Options.UpstreamCA, for a tap process.
	upstreamCAs []byte
	secrets     *redact.Redactor
	archive     []byte // the snapshot; nil without Options.Snapshot
	// agentPath is the agent's program, resolved.
	agentPath string
}

// Prepare checks opts and readies everything that can fail before the
// store is touched.
func Prepare(opts Options) (*Plan, error) {
	if len(opts.Argv) == 0 {
		return nil, ErrNoCommand
	}
	if opts.Grace <= 0 {
		opts.Grace = stdiotap.DefaultGrace
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	agentPath, err := exec.LookPath(opts.Argv[0])
	if errors.Is(err, exec.ErrNotFound) {
		return nil, classify(ErrAgentNotFound, "agent %q not found", opts.Argv[0])
	} else if err != nil {
		return nil, classify(ErrAgent, "cannot run agent: %w", err)
	}
	if abs, err := filepath.Abs(agentPath); err == nil {
		agentPath = abs
	}
	p := &Plan{opts: opts, env: opts.Env, name: opts.Name, agentPath: agentPath}
	if p.name == "" {
		p.name = generateName(opts.Argv[0], time.Now())
	}
	if err := store.ValidName(p.name); err != nil {
		return nil, classify(ErrName, "%w", err)
	}
	p.routing = proxy.Routing{NoProxyEnv: opts.NoProxyEnv, ProxyLoopback: opts.ProxyLoopback}
	if p.routing.Routes, err = resolveBaseURLs(opts.BaseURLs, p.env); err != nil {
		return nil, err
	}
	if p.tap, p.upstreamCAs, err = tapConfig(opts); err != nil {
		return nil, err
	}
	p.tap.Secret = proxy.NewSecret()
	// One Redactor for everything recorded: the snapshot, the base URLs,
	// the HTTP exchanges and the stdio frames. It masks the tap's secret
	// too, which the agent may echo (its proxy or base URL in a debug log,
	// in a request body): the tap keeps it out of recorded URLs and
	// headers, not out of what the agent writes.
	p.secrets = redact.New(append(slices.Clip(p.env), redact.TapSecret+"="+p.tap.Secret))
	// Notices, of the tap above all, may quote a URL the agent asked
	// for, with a key in its query, or an error that does; they are
	// printed, and may be kept.
	logf := opts.Logf
	p.opts.Logf = func(format string, args ...any) { logf("%s", p.secrets.Text(fmt.Sprintf(format, args...))) }
	if opts.Snapshot {
		if p.archive, err = takeSnapshot(opts, p.secrets); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Name returns the name the recording will have.
func (p *Plan) Name() string { return p.name }

// Run records opts into st: Prepare, then Plan.Run.
func Run(ctx context.Context, st *store.Store, opts Options) (*Result, error) {
	if opts.StorePath == "" {
		opts.StorePath = st.Path()
	}
	p, err := Prepare(opts)
	if err != nil {
		return nil, err
	}
	return p.Run(ctx, st)
}

// Run creates the recording in st, starts the tap and the agent, and
// records until the agent has exited and the tap has recorded its last
// exchange. Cancelling ctx terminates the agent (SIGTERM to its process
// group, SIGKILL after Options.Grace). The error is nil whenever the agent
// ran, whatever its exit status; a recording that could not be finished
// in the store is ErrSave, with what was committed before the failure
// kept.
func (p *Plan) Run(ctx context.Context, st *store.Store) (*Result, error) {
	opts := p.opts
	w, err := p.create(st)
	if err != nil {
		return nil, err
	}
	opts.Logf("recording %q into %s", p.name, st.Path())

	// Offsets count from just before the HTTP tap and the agent start; the
	// callbacks below may run before Start returns. Every event is
	// stamped from one clock, which a tap process shares.
	start := stamp.FromNanos(stamp.Now())
	clock, shared, err := p.clock()
	if err != nil {
		return nil, abandon(w, err)
	}
	seqr := newSequencer(w, clock, start, opts.Logf)
	tapCfg := p.tap
	tapCfg.Recorder = seqr
	tapCfg.Redact = p.secrets.Exchange
	tapCfg.Start = start
	tapCfg.Logf = opts.Logf
	// Before the tap process starts, which takes the clock's file.
	mcp := p.startMCP(shared, seqr, w, tapCfg)
	tap, childEnv, local, err := p.startTap(tapCfg, shared)
	if err != nil {
		mcp.close(0)
		return nil, abandon(w, err)
	}
	sess, err := p.startAgent(w, seqr, clock, childEnv, local, mcp)
	if err != nil {
		tap.Close()
		mcp.close(0)
		seqr.flush()
		return nil, abandon(w, classify(ErrAgent, "%w", err))
	}
	seqr.attach(sess)
	loopback := p.watchLoopback(sess.Pid(), local, childEnv) // see loopback.go
	stopOnCancel := context.AfterFunc(ctx, func() { terminate(sess, opts.Grace) })
	exit, waitErr := sess.Wait()
	stopOnCancel()
	seen := loopback.finish()
	// The tap closes before the writer finishes: Close waits for the last
	// exchanges to be recorded.
	// A tap process that ended early has said so when it did.
	if err := tap.Close(); err != nil && !errors.Is(err, tapproc.ErrEnded) {
		opts.Logf("closing the HTTP tap: %v", err)
	}
	mcp.close(opts.Grace)
	seqr.flush()
	w.Update(func(r *store.Recording) {
		r.Done = true
		r.ExitCode = exit.Code
		if exit.Signal != 0 {
			r.Signal = exit.Signal.String()
		}
		if waitErr != nil {
			r.Error = p.secrets.Text(waitErr.Error())
		}
		r.Duration = time.Since(start)
		r.Loopback = seen
	})
	if err := w.Finish(); err != nil {
		return nil, classify(ErrSave, "saving recording %q: %w", p.name, err)
	}
	p.noticeLoopback(st)
	return &Result{Name: p.name, Exit: exit, AgentErr: waitErr}, nil
}

// create creates the recording in st, with its metadata and its snapshot.
func (p *Plan) create(st *store.Store) (*store.Writer, error) {
	opts := p.opts
	cwd := p.opts.Dir
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	meta := store.Recording{
		Name:    p.name,
		Created: time.Now(),
		Version: opts.Version,
		// A key given on the command line is not kept; a replay runs
		// the agent with the mask instead, as with the keys of its
		// environment, which it does not need.
		Argv:      p.secrets.Argv(opts.Argv),
		AgentPath: p.agentPath,
		Cwd:       cwd,
		EnvNames:  envNames(p.env),
		// The values too, but for secrets (see recordedEnv), for a
		// replay to reproduce the environment's shape.
		Env:      recordedEnv(p.env, p.secrets),
		Home:     getenv(p.env, "HOME"),
		Tmp:      os.TempDir(),
		ProxyEnv: !opts.NoProxyEnv,
		// What the tap's NO_PROXY did, for a replay to do the same.
		LoopbackDirect: !opts.NoProxyEnv && !opts.ProxyLoopback,
		Snapshot:       p.archive != nil,
		Scenario:       opts.ScenarioPath,
	}
	if len(p.routing.Routes) > 0 {
		meta.BaseURLs = map[string]string{}
		for _, r := range p.routing.Routes {
			meta.BaseURLs[r.Var] = p.secrets.URL(r.Upstream)
		}
	}
	w, err := st.Create(meta, opts.Force)
	if err != nil {
		return nil, err
	}
	if p.archive != nil {
		if err := w.PutBlob(store.SnapshotBlob, p.archive); err != nil {
			// A recording that says it has a snapshot must have it.
			return nil, abandon(w, classify(ErrSnapshot, "%w", err))
		}
	}
	if opts.Scenario != nil {
		if err := w.PutBlob(store.ScenarioBlob, p.secrets.Bytes(opts.Scenario)); err != nil {
			return nil, abandon(w, classify(ErrSave, "keeping the scenario: %w", err))
		}
	}
	return w, nil
}

// startAgent starts the agent with its environment childEnv and its
// command's base URLs expanded to the tap's local ones, its stdio framed
// into seqr, masked, within the backlog's bound.
func (p *Plan) startAgent(w *store.Writer, seqr *sequencer, clock *stamp.Clock, childEnv []string, local map[string]string, mcp *mcpTap) (*stdiotap.Session, error) {
	opts := p.opts
	bound := opts.MaxBacklog
	if bound <= 0 {
		bound = DefaultMaxBacklog
	}
	storeBound := bound / 16
	var logins atomic.Bool // the agent's terminal logins are kept
	return stdiotap.Start(stdiotap.Config{
		Argv:           proxy.ExpandBaseURLs(opts.Argv, local),
		Env:            childEnv,
		Dir:            opts.Dir,
		Stdin:          opts.Stdin,
		Stdout:         opts.Stdout,
		Stderr:         opts.Stderr,
		Grace:          opts.Grace,
		ForwardSignals: opts.ForwardSignals,
		Clock:          clock,
		RewriteStdin:   mcp.rewriteStdin(),
		OnLine: func(l stdiotap.Line) {
			// Agents do print their keys (debug logs, echoed config)
			// and editors send them (initialize's _meta,
			// authenticate): secrets are masked on every lane, not only
			// in HTTP, by the names of JSON members and by the values
			// of the agent's variables. What was forwarded is as sent.
			l.Data = p.secrets.Bytes(redact.Members(l.Data))
			if l.Stream == stdiotap.Stdout && !logins.Load() {
				if found := terminalLogins(l.Data); found != nil {
					// Kept, for a terminal login's command to be told
					// apart from a session (see TerminalLogin).
					logins.Store(true)
					w.Update(func(r *store.Recording) { r.TerminalLogins = found })
				}
			}
			seqr.frame(l)
			// The store's queue is part of the bound: framing waits
			// while a commit has yet to take it, and forwarding once
			// the framing's share is full too.
			w.Throttle(storeBound)
		},
		MaxBacklog: bound / 2,
		OnBacklog: func(b stdiotap.Backlog) {
			opts.Logf("%s", backlogNotice(b))
		},
	})
}

// abandon ends a recording whose agent never ran: the recording is
// removed, since it holds nothing and would block its name for the next
// try, one it was to replace (--force) is put back, and err is returned, joined with the store's error if the
// recording could not be removed.
func abandon(w *store.Writer, err error) error {
	if derr := w.Discard(); derr != nil {
		return errors.Join(err, classify(ErrSave, "removing the recording: %w", derr))
	}
	return err
}

// terminate ends the agent's process group: SIGTERM, then SIGKILL after
// grace if it is still there.
func terminate(sess *stdiotap.Session, grace time.Duration) {
	if sess.Signal(syscall.SIGTERM) != nil {
		return
	}
	time.AfterFunc(grace, func() { sess.Signal(syscall.SIGKILL) })
}

// clock makes the clock that stamps the recording's events: with
// Options.TapProcess in memory that the tap process shares (shared),
// else in this process's own.
func (p *Plan) clock() (clock *stamp.Clock, shared *tapproc.SharedClock, err error) {
	if p.opts.TapProcess == nil && p.opts.MCPRelay == "" {
		return stamp.NewClock(), nil, nil
	}
	if shared, err = tapproc.NewSharedClock(); err != nil {
		return nil, nil, classify(ErrTap, "starting the HTTP tap: %w", err)
	}
	return shared.Clock(), shared, nil
}

// startTap starts the HTTP tap configured by cfg, in a process of its own
// with Options.TapProcess, and puts it between the agent and its LLM as
// the plan's routing says; it returns what closes it, the agent's
// environment and each route's local URL, by variable.
func (p *Plan) startTap(cfg proxy.Config, shared *tapproc.SharedClock) (io.Closer, []string, map[string]string, error) {
	if tp := p.opts.TapProcess; tp != nil {
		proc, err := tapproc.Start(tapproc.Config{
			Path:        tp.Path,
			Args:        tp.Args,
			Tap:         cfg,
			UpstreamCAs: p.upstreamCAs,
			Env:         p.env,
			Routing:     p.routing,
			Clock:       shared,
		})
		var se *tapproc.StartError
		switch {
		case errors.As(err, &se) && se.Stage == tapproc.StageRoute:
			return nil, nil, nil, p.routeError(se.Var, se.Err)
		case errors.As(err, &se) && se.Stage == tapproc.StageEnv:
			return nil, nil, nil, classify(ErrTap, "preparing the agent's environment: %w", err)
		case err != nil:
			return nil, nil, nil, classify(ErrTap, "starting the HTTP tap: %w", err)
		}
		return proc, proc.Env, proc.Local, nil
	}
	tap, err := proxy.New(cfg)
	if err != nil {
		return nil, nil, nil, classify(ErrTap, "starting the HTTP tap: %w", err)
	}
	env, local, err := tap.Wire(p.env, p.routing)
	var re *proxy.RouteError
	switch {
	case errors.As(err, &re):
		tap.Close()
		return nil, nil, nil, p.routeError(re.Route.Var, re.Err)
	case err != nil:
		tap.Close()
		return nil, nil, nil, classify(ErrTap, "preparing the agent's environment: %w", err)
	}
	return tap, env, local, nil
}

// routeError is the *BaseURLError of the route of variable name that the
// tap refused with err.
func (p *Plan) routeError(name string, err error) error {
	upstream := ""
	if i := slices.IndexFunc(p.routing.Routes, func(r proxy.Route) bool { return r.Var == name }); i >= 0 {
		upstream = p.routing.Routes[i].Upstream
	}
	return &BaseURLError{Var: name, Upstream: upstream, Err: err}
}

// resolveBaseURLs gives each route its upstream: the explicit one, else
// the variable's value in env, else the public endpoint of a well-known
// name.
// resolveBaseURLs returns the routes of Options.BaseURLs, each with its
// upstream, as the tap takes them.
func resolveBaseURLs(routes []BaseURL, env []string) ([]proxy.Route, error) {
	var out []proxy.Route
	for _, r := range routes {
		if r.Var == "" || strings.ContainsAny(r.Var, "= \t\x00") {
			return nil, &BaseURLError{Var: r.Var, Err: errors.New("invalid variable name")}
		}
		if slices.ContainsFunc(out, func(o proxy.Route) bool { return o.Var == r.Var }) {
			return nil, &BaseURLError{Var: r.Var, Err: ErrBaseURLTwice}
		}
		if r.Upstream == "" {
			r.Upstream = getenv(env, r.Var)
		}
		if r.Upstream == "" {
			r.Upstream = proxy.KnownBaseURLs[r.Var]
		}
		if r.Upstream == "" {
			return nil, &BaseURLError{Var: r.Var, Err: ErrBaseURLUnknown}
		}
		// The tap parses it again, the same way: an upstream it would
		// refuse is refused here, before the store is touched.
		if _, err := proxy.ParseUpstream(r.Upstream); err != nil {
			return nil, &BaseURLError{Var: r.Var, Upstream: r.Upstream, Err: classify(ErrBaseURLUpstream, "%w", err)}
		}
		out = append(out, proxy.Route{Var: r.Var, Upstream: r.Upstream})
	}
	return out, nil
}

// tapConfig loads the CAs of the tap's configuration, and returns the
// upstream CAs' PEM too.
func tapConfig(opts Options) (cfg proxy.Config, upstreamPEM []byte, err error) {
	if opts.UpstreamCA != "" {
		pem, err := os.ReadFile(opts.UpstreamCA)
		if err != nil {
			return cfg, nil, classify(ErrUpstreamCA, "%w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return cfg, nil, classify(ErrUpstreamCA, "%s: no PEM certificate in it", opts.UpstreamCA)
		}
		cfg.UpstreamCAs, upstreamPEM = pool, pem
	}
	ca, err := proxy.LoadOrCreateCA(opts.CADir)
	if err != nil {
		return cfg, nil, classify(ErrCA, "interception CA: %w", err)
	}
	cfg.CA = ca
	return cfg, upstreamPEM, nil
}

// backlogNotice says that recording fell behind the agent's stdio, or
// that it caught up.
func backlogNotice(b stdiotap.Backlog) string {
	// Whole MiB, rounded up, but below a MiB whole KiB: a bound of
	// --max-backlog 1MiB is 512 KiB of stdio, not "1 MiB".
	size := func(n int) string {
		if n < 1<<20 {
			return fmt.Sprintf("%.0f KiB", math.Ceil(float64(n)/(1<<10)))
		}
		return fmt.Sprintf("%.0f MiB", math.Ceil(float64(n)/(1<<20)))
	}
	if b.Behind {
		return fmt.Sprintf("recording falls behind the agent's stdio by %s; forwarding will wait for it if that reaches %s", size(b.Bytes), size(b.Max))
	}
	waited := "forwarding never waited"
	if b.Waited > 0 {
		waited = "forwarding waited " + b.Waited.Round(time.Millisecond).String() + " for it"
	}
	return fmt.Sprintf("recording caught up with the agent's stdio (it fell up to %s behind; %s)", size(b.Bytes), waited)
}

// frameEvent turns a framed stdio line, at offset since the recording's
// start, into a store event.
func frameEvent(l stdiotap.Line, offset time.Duration) store.Event {
	e := store.Event{Kind: store.KindFrame, Lane: l.Stream.Lane(), Offset: offset, Data: l.Data}
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

// getenv returns the last value of name in env.
func getenv(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// Package rerecord records a recording again against the live LLM,
// playing its editor side from its scenario or its recorded editor frames.
package rerecord

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/acptap/acptap/internal/snapshot"
	"github.com/acptap/acptap/internal/stale"
	"github.com/acptap/acptap/lane"
	"github.com/acptap/acptap/record"
	"github.com/acptap/acptap/replay/driver"
	"github.com/acptap/acptap/scenario"
	"github.com/acptap/acptap/stdiotap"
	"github.com/acptap/acptap/store"
)

// DefaultTimeout is how long the played editor side waits for a silent
// agent when Options.Timeout is zero: a live LLM thinks.
const DefaultTimeout = 5 * time.Minute

// Options configure Run. The zero value re-records with the recorded
// agent command and upstreams.
type Options struct {
	// Argv is the agent command. If nil, the recorded one.
	Argv []string
	// BaseURLs replace the recorded upstreams of their variables, and
	// add routes.
	BaseURLs []record.BaseURL
	// Timeout is how long the editor side of an editor-made recording
	// waits while the agent says nothing. If zero, DefaultTimeout.
	Timeout time.Duration
	// Grace, UpstreamCA, CADir, Stderr, Logf, TapProcess, MCPRelay and
	// Version are record.Options'.
	Grace      time.Duration
	UpstreamCA string
	CADir      string
	Stderr     io.Writer
	Logf       func(format string, args ...any)
	TapProcess *record.TapProcess
	MCPRelay   string
	Version    string
	// Env is the agent's environment, before the tap's variables are
	// added; it must hold the keys the agent needs. If nil, os.Environ().
	Env []string
}

// Result is how a re-recording went.
type Result struct {
	// Err is the session's failure: the scenario failed, or the agent no
	// longer did what the recorded editor side waited for. The new
	// version is recorded as far as it went.
	Err error
	// Scenario is what the scenario's sessions did; nil for an
	// editor-made recording.
	Scenario *scenario.Result
	// Exit is how the agent ended.
	Exit    stdiotap.Exit
	Elapsed time.Duration
}

// CheckKeys returns a *KeysError when a secret variable of the recorded
// agent's environment is unset (or empty) in env, os.Environ() if nil.
func CheckKeys(meta store.Recording, env []string) error {
	if env == nil {
		env = os.Environ()
	}
	set := map[string]bool{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" {
			set[k] = true
		}
	}
	var missing []string
	for _, v := range meta.Env {
		if v.Withheld == store.WithheldSecret && !set[v.Name] {
			missing = append(missing, v.Name)
		}
	}
	if len(missing) > 0 {
		return &KeysError{Recording: meta.Name, Vars: missing}
	}
	return nil
}

// Run records the recording name of src again into dst under the same
// name, replacing what dst has of it. The agent runs in a fresh copy of
// the recording's workspace (its scenario's, else its snapshot, else an
// empty directory), with this process's environment and the recorded
// routes to its LLM; the editor side is the recording's scenario, run
// again from its file (the copy kept when the file is gone), or its
// recorded editor frames played as a replay plays them. The error is
// about what keeps the re-recording from running or being stored (a
// record error, a *KeysError, ErrScenario, ...); how the session went is
// in the Result.
func Run(ctx context.Context, src *store.Store, name string, dst *store.Store, opts Options) (*Result, error) {
	start := time.Now()
	meta, err := src.Get(name)
	if err != nil {
		return nil, err
	}
	if err := CheckKeys(meta, opts.Env); err != nil {
		return nil, err
	}
	stale.Remove(os.TempDir(), stale.ScenarioPrefix)
	dir, err := os.MkdirTemp("", stale.Dir(stale.ScenarioPrefix))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWorkspace, err)
	}
	defer os.RemoveAll(dir)
	cwd := filepath.Join(dir, "workspace")
	ro, sc, err := recordOptions(opts, src, meta, cwd)
	if err != nil {
		return nil, err
	}
	ro.StorePath = dst.Path()
	res := &Result{}
	var drive record.Driver
	if sc != nil {
		drive = func(stdin io.WriteCloser, stdout io.Reader) error {
			var err error
			res.Scenario, err = scenario.Play(ctx, sc, stdin, stdout, scenario.Options{Cwd: cwd, Version: opts.Version})
			return err
		}
	} else {
		lines, err := editorAndAgentLines(src, name)
		if err != nil {
			return nil, err
		}
		drv := driver.New(driver.Options{
			Recorded:   lines,
			Timeout:    cmp.Or(opts.Timeout, DefaultTimeout),
			PathMap:    pathMap(meta, cwd),
			Discard:    true,
			NoTimeline: true,
		})
		drive = func(stdin io.WriteCloser, stdout io.Reader) error {
			fromAgent := make(chan []byte)
			go readLines(stdout, fromAgent)
			_, err := drv.Run(ctx, stdin, fromAgent)
			stdin.Close()
			for range fromAgent { // what the agent says once the editor side is played
			}
			return err
		}
	}
	d, err := record.RunDriven(ctx, dst, ro, drive)
	if err != nil {
		return nil, err
	}
	res.Err = d.DriverErr
	if d.Result != nil {
		res.Exit = d.Result.Exit
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// pathMap maps the recording's per-run directories to this run's, for the
// paths in the recorded editor frames.
func pathMap(meta store.Recording, cwd string) map[string]string {
	paths := map[string]string{}
	if meta.Cwd != "" {
		paths[meta.Cwd] = cwd
	}
	if home, err := os.UserHomeDir(); err == nil && meta.Home != "" && meta.Home != "/" {
		paths[meta.Home] = home
	}
	if meta.Tmp != "" && meta.Tmp != "/" {
		paths[meta.Tmp] = os.TempDir()
	}
	return paths
}

// readLines sends the lines of r, without their ends, to lines, and
// closes it when r ends.
func readLines(r io.Reader, lines chan<- []byte) {
	defer close(lines)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimSuffix(line, []byte("\n"))
			lines <- bytes.TrimSuffix(line, []byte("\r"))
		}
		if err != nil {
			return
		}
	}
}

// recordOptions is how to record meta again in cwd: its agent, its
// routes, its workspace laid out in cwd, and the scenario that drove it
// (nil for an editor-made recording).
func recordOptions(opts Options, src *store.Store, meta store.Recording, cwd string) (record.Options, *scenario.Scenario, error) {
	ro := record.Options{
		Argv:          opts.Argv,
		Env:           opts.Env,
		Name:          meta.Name,
		Force:         true,
		Dir:           cwd,
		Stderr:        opts.Stderr,
		Grace:         opts.Grace,
		UpstreamCA:    opts.UpstreamCA,
		CADir:         opts.CADir,
		NoProxyEnv:    !meta.ProxyEnv,
		ProxyLoopback: meta.ProxyEnv && !meta.LoopbackDirect,
		Snapshot:      meta.Snapshot,
		Version:       opts.Version,
		Logf:          opts.Logf,
		TapProcess:    opts.TapProcess,
		MCPRelay:      opts.MCPRelay,
	}
	if ro.Argv == nil {
		ro.Argv = slices.Clone(meta.Argv)
		if len(ro.Argv) > 0 && strings.ContainsRune(ro.Argv[0], '/') && !filepath.IsAbs(ro.Argv[0]) && meta.AgentPath != "" {
			ro.Argv[0] = meta.AgentPath // a path relative to the recording's directory
		}
	}
	if len(ro.Argv) == 0 {
		return ro, nil, fmt.Errorf("%w: %s has none; pass one", ErrNoAgent, meta.Name)
	}
	for v, upstream := range meta.BaseURLs {
		ro.BaseURLs = append(ro.BaseURLs, record.BaseURL{Var: v, Upstream: upstream})
	}
	for _, b := range opts.BaseURLs {
		i := slices.IndexFunc(ro.BaseURLs, func(r record.BaseURL) bool { return r.Var == b.Var })
		if i < 0 {
			ro.BaseURLs = append(ro.BaseURLs, b)
		} else {
			ro.BaseURLs[i] = b
		}
	}
	slices.SortFunc(ro.BaseURLs, func(a, b record.BaseURL) int { return strings.Compare(a.Var, b.Var) })

	sc, err := scenarioOf(src, meta)
	if err != nil {
		return ro, nil, err
	}
	if sc != nil {
		ro.Scenario, ro.ScenarioPath, ro.Snapshot = sc.Source, meta.Scenario, true
	}
	switch {
	case sc != nil && sc.Workspace != "":
		err = os.CopyFS(cwd, os.DirFS(sc.Workspace))
	case meta.Snapshot:
		var archive []byte
		if archive, err = src.Blob(meta.Name, store.SnapshotBlob); err == nil {
			err = snapshot.Restore(archive, cwd)
		}
	default:
		err = os.Mkdir(cwd, 0o755)
	}
	if err != nil {
		return ro, nil, fmt.Errorf("%w of %s: %w", ErrWorkspace, meta.Name, err)
	}
	return ro, sc, nil
}

// scenarioOf is the scenario that drove meta's agent: its file as it is
// now, else the copy kept with the recording, whose workspace is the
// recording's snapshot; nil for an editor-made recording.
func scenarioOf(src *store.Store, meta store.Recording) (*scenario.Scenario, error) {
	if meta.Scenario == "" {
		return nil, nil
	}
	var sc *scenario.Scenario
	if _, err := os.Stat(meta.Scenario); err == nil {
		if sc, err = scenario.Load(meta.Scenario); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrScenario, err)
		}
	} else {
		data, err := src.Blob(meta.Name, store.ScenarioBlob)
		if err != nil {
			return nil, fmt.Errorf("%w: its file %s is gone and the recording keeps no copy: %w", ErrScenario, meta.Scenario, err)
		}
		if sc, err = scenario.Parse(withoutWorkspace(data), filepath.Dir(meta.Scenario)); err != nil {
			return nil, fmt.Errorf("%w: the copy kept with the recording: %w", ErrScenario, err)
		}
		sc.Source = data
	}
	sc.Name = meta.Name
	return sc, nil
}

// withoutWorkspace drops the workspace member of a scenario file, whose
// directory is not there any more: the recording's snapshot stands in.
func withoutWorkspace(data []byte) []byte {
	var doc map[string]json.RawMessage
	if json.Unmarshal(data, &doc) != nil {
		return data
	}
	delete(doc, "workspace")
	out, err := json.Marshal(doc)
	if err != nil {
		return data
	}
	return out
}

// editorAndAgentLines reads the editor and agent frames of a recording
// whole, in recorded order, for the driver.
func editorAndAgentLines(st *store.Store, name string) ([]lane.Line, error) {
	type seqLine struct {
		seq uint64
		lane.Line
	}
	var lines []seqLine
	err := st.Lines(name, func(e store.Event) error {
		if e.Kind == store.KindFrame && (e.Lane == store.LaneEditor || e.Lane == store.LaneAgent) {
			lines = append(lines, seqLine{e.Seq, lane.Line{Lane: e.Lane, Data: slices.Clone(e.Data)}})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	// A line in pieces comes when its last piece is read, by its first
	// piece's Seq.
	slices.SortStableFunc(lines, func(a, b seqLine) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]lane.Line, len(lines))
	for i, l := range lines {
		out[i] = l.Line
	}
	return out, nil
}

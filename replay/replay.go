// Package replay re-runs a recorded agent session offline and says whether the agent's ACP output changed.
//
// The agent runs in a sandbox (a fresh workspace, HOME and TMPDIR, and an
// environment built from an allowlist); its LLM requests reach a loopback
// proxy.Tap whose transport is an llmserver.Server answering from the
// recording, the way the recording says the agent reached the LLM (rewritten
// base-URL variables, HTTPS_PROXY with the interception CA, or both); a
// driver.Driver plays the recorded editor side; and the agent's output is
// normalized and compared with the recorded output.
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/internal/snapshot"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/replay/driver"
	"github.com/acptap/acptap/replay/llmserver"
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

// Options configure Run. The zero value replays the recording's own
// command with the defaults below.
type Options struct {
	// Argv overrides the recorded agent command. If nil, the recorded one.
	Argv []string
	// Workspace seeds the sandbox workspace (copied). If empty, the
	// workspace is restored from the recording's snapshot (record
	// --snapshot), or starts empty if it has none.
	Workspace string
	// Env adds K=V pairs to the agent's environment, after the allowlist.
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
	// Rules are user normalization rules.
	Rules []normalize.Rule
	// NoCoalesce keeps message chunks apart in the comparison.
	NoCoalesce bool
	// CA intercepts TLS for agents that reach the LLM by HTTPS_PROXY. If
	// nil, proxy.LoadOrCreateCA(proxy.DefaultCADir()).
	CA *proxy.CA
	// Stderr receives the agent's stderr. If nil, it is discarded.
	Stderr io.Writer
}

// Result is the outcome of one replay.
type Result struct {
	Name string
	// Divergences are the reasons the replay is not equal, first
	// divergence first; empty when equal.
	Divergences []string
	// Warnings are reported but do not fail the replay (request drift
	// under RequestsWarn).
	Warnings []string
	// Diff is a unified diff of the normalized expected and actual agent
	// streams, pretty JSON; empty when they are equal.
	Diff string
	// Expected and Actual are the normalized agent streams.
	Expected, Actual []json.RawMessage
	// Live is every line the agent wrote on stdout, in order.
	Live [][]byte
	// Timeline is the order in which the replay sent the recorded editor
	// frames and received the lines of Live, each line once (see Step).
	Timeline []Step
	// Exit is how the agent ended.
	Exit stdiotap.Exit
	// LLM is the LLM server's report.
	LLM      llmserver.Report
	Frames   int // recorded editor and agent frames
	Duration time.Duration

	editors int                          // recorded editor frames
	restore func(i int, l []byte) []byte // Live[i] in the recording's terms; see Update
}

// Equal reports whether the replay matched the recording.
func (r *Result) Equal() bool { return len(r.Divergences) == 0 }

// dummyKey replaces API keys in the agent's environment: replay needs none
// and must not be able to use a real one.
const dummyKey = "acptap-replay-dummy-key"

// allowedEnv are the variables of acptap's environment passed to the
// agent; everything else is dropped unless Options.Env adds it.
var allowedEnv = []string{"PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "GORACE"}

// recording is what Run reads from the store.
type recording struct {
	meta      store.Recording
	frames    []driver.Frame // editor and agent frames, Continued pieces joined
	agent     [][]byte       // the agent frames alone
	exchanges []llmserver.Recorded
}

func load(st *store.Store, name string) (*recording, error) {
	meta, err := st.Get(name)
	if err != nil {
		return nil, err
	}
	rec := &recording{meta: meta}
	var pending = map[store.Lane][]byte{}
	number := 0
	err = st.Events(name, func(e store.Event) error {
		switch e.Lane {
		case store.LaneEditor, store.LaneAgent:
			data := append(pending[e.Lane], e.Data...)
			if e.Flags&store.FlagContinued != 0 {
				pending[e.Lane] = data
				return nil
			}
			delete(pending, e.Lane)
			dir := driver.FromEditor
			if e.Lane == store.LaneAgent {
				dir = driver.FromAgent
				rec.agent = append(rec.agent, data)
			}
			rec.frames = append(rec.frames, driver.Frame{Dir: dir, Data: data})
		case store.LaneLLM:
			if e.Flags&store.FlagIncomplete != 0 {
				// In flight when the recording stopped: no response to
				// serve, and never counted by show either.
				return nil
			}
			number++
			x, err := exchange.Unmarshal(e.Data)
			if err != nil {
				return fmt.Errorf("llm #%d (event %d): %w", number, e.Seq, err)
			}
			rec.exchanges = append(rec.exchanges, llmserver.Recorded{Number: number, Seq: e.Seq, Exchange: x})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Run replays recording name of st.
func Run(ctx context.Context, st *store.Store, name string, opts Options) (*Result, error) {
	started := time.Now()
	rec, err := load(st, name)
	if err != nil {
		return nil, err
	}
	argv := opts.Argv
	if argv == nil {
		argv = rec.meta.Argv
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: recording %q has no agent command; pass -- AGENT [ARGS...]", ErrNoCommand, name)
	}
	// Without Options.Workspace, a recorded snapshot seeds the sandbox's.
	var archive []byte
	if opts.Workspace == "" && rec.meta.Snapshot {
		if archive, err = st.Blob(name, store.SnapshotBlob); err != nil {
			return nil, fmt.Errorf("%w: reading the recorded workspace snapshot: %v", ErrWorkspace, err)
		}
	}
	sb, err := newSandbox(opts.Workspace, archive)
	if err != nil {
		return nil, err
	}
	defer sb.remove()

	// The LLM side: recorded exchanges behind a tap that never dials.
	// norm is called twice per LLM request: the cwds are found once.
	cwds := nonEmpty(append(sessionCwds(rec.frames), rec.meta.Cwd, sb.work)...)
	norm := func() *normalize.Normalizer {
		return normalize.New(normalize.Options{
			Cwd:        cwds,
			Home:       nonEmpty(rec.meta.Home, sb.home),
			Tmp:        nonEmpty(rec.meta.Tmp, sb.tmp),
			Rules:      opts.Rules,
			NoCoalesce: opts.NoCoalesce,
		})
	}
	var compare func(recorded, live *exchange.Exchange) (string, any, any, bool)
	if opts.Requests != RequestsIgnore {
		compare = func(recorded, live *exchange.Exchange) (string, any, any, bool) {
			a := norm().Request(recorded.Method, recorded.URL, recorded.RequestHeaders, recorded.RequestBody)
			b := norm().Request(live.Method, live.URL, live.RequestHeaders, live.RequestBody)
			return normalize.FirstDifference(a, b)
		}
	}
	server, err := llmserver.New(llmserver.Options{
		Exchanges: rec.exchanges,
		Speed:     opts.Speed,
		Faults:    opts.Faults,
		Compare:   compare,
	})
	if err != nil {
		return nil, err
	}
	var stderr io.Writer = io.Discard
	if opts.Stderr != nil {
		stderr = opts.Stderr
	}
	tap, err := proxy.New(proxy.Config{
		Transport: server,
		CA:        opts.CA,
		Logf:      func(string, ...any) {},
	})
	if err != nil {
		return nil, fmt.Errorf("starting the replay LLM server: %w", err)
	}
	defer tap.Close()
	local := map[string]string{}
	for v, upstream := range rec.meta.BaseURLs {
		u, err := tap.AddBaseURL(v, upstream)
		if err != nil {
			return nil, fmt.Errorf("base URL %s: %w", v, err)
		}
		local[v] = u
	}
	argv = proxy.ExpandBaseURLs(argv, local)
	env, err := sb.env(rec.meta, opts.Env, tap)
	if err != nil {
		return nil, err
	}

	// The agent, with the driver on its stdin and stdout. OnLine must not
	// block: lines go through an unbounded queue to the driver.
	stdinR, stdinW := io.Pipe()
	q := newLineQueue()
	var partial []byte // pieces of a line longer than stdiotap's MaxLine
	sess, err := stdiotap.Start(stdiotap.Config{
		Argv:   argv,
		Dir:    sb.work,
		Env:    env,
		Stdin:  stdinR,
		Stdout: io.Discard,
		Stderr: stderr,
		Grace:  opts.Grace,
		OnLine: func(l stdiotap.Line) {
			// Called from the stdout pump only, one at a time: long
			// lines are joined from their pieces here.
			if l.Stream != stdiotap.Stdout {
				return
			}
			if l.Continued {
				partial = append(partial, l.Data...)
				return
			}
			if partial != nil {
				l.Data = append(partial, l.Data...)
				partial = nil
			}
			q.push(l.Data)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStart, err)
	}
	drv := driver.New(driver.Options{
		Recorded: rec.frames,
		Timeout:  opts.Timeout,
		PathMap:  sb.pathMap(rec),
	})
	exitc := make(chan struct{})
	var exit stdiotap.Exit
	var waitErr error
	go func() {
		exit, waitErr = sess.Wait()
		q.close() // the agent's output has ended
		close(exitc)
	}()
	lines := make(chan []byte)
	stop := make(chan struct{})
	go q.feed(lines, stop)
	drvRes, driveErr := drv.Run(ctx, stdinW, lines)
	close(stop)
	stdinW.Close()
	<-exitc
	if waitErr != nil {
		fmt.Fprintf(stderr, "acptap replay: agent: %v\n", waitErr)
	}

	res := &Result{Name: name, Exit: exit, Frames: len(rec.frames), LLM: server.Report(), Live: q.all()}
	res.timeline(rec, sb, &drvRes)

	if driveErr != nil {
		for _, e := range unjoin(driveErr) {
			res.Divergences = append(res.Divergences, "editor side: "+e.Error())
		}
	}
	expected := normalizeStream(norm(), rec.agent)
	actual := normalizeStream(norm(), res.Live)
	res.Expected, res.Actual = expected, actual
	if path, want, got, differ := firstStreamDifference(expected, actual); differ {
		res.Divergences = append([]string{fmt.Sprintf("agent output differs at %s: expected %s, got %s", path, brief(want), brief(got))}, res.Divergences...)
		res.Diff = unifiedDiff("recorded", "replayed", pretty(expected), pretty(actual))
	}
	for _, u := range res.LLM.Unanswered {
		res.Divergences = append(res.Divergences, "llm: "+u.String())
	}
	for _, u := range res.LLM.Unrequested {
		x := u.Exchange
		res.Divergences = append(res.Divergences, fmt.Sprintf("llm #%d (%s %s) was recorded but never requested", u.Number, x.Method, redact.New(nil).URL(x.URL)))
	}
	for _, d := range res.LLM.Drift {
		if opts.Requests == RequestsFail {
			res.Divergences = append(res.Divergences, d.String())
		} else {
			res.Warnings = append(res.Warnings, d.String())
		}
	}
	res.Duration = time.Since(started)
	return res, nil
}

// sessionCwds returns the cwds of the recorded session/new (and
// session/load) requests.
func sessionCwds(frames []driver.Frame) []string {
	var cwds []string
	for _, f := range frames {
		if f.Dir != driver.FromEditor {
			continue
		}
		m := acp.Parse(f.Data)
		if m.Kind != acp.Request || (m.Method != "session/new" && m.Method != "session/load") {
			continue
		}
		var p struct {
			Cwd string `json:"cwd"`
		}
		if json.Unmarshal(m.Params, &p) == nil && filepath.IsAbs(p.Cwd) && !slices.Contains(cwds, p.Cwd) {
			cwds = append(cwds, p.Cwd)
		}
	}
	return cwds
}

func nonEmpty(xs ...string) []string {
	var out []string
	for _, x := range xs {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

// normalizeStream normalizes agent stdout lines (blank lines dropped: they
// carry nothing and agents differ in emitting them).
func normalizeStream(n *normalize.Normalizer, lines [][]byte) []json.RawMessage {
	frames := make([]normalize.Frame, 0, len(lines))
	for _, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		frames = append(frames, normalize.Frame{Side: normalize.Agent, Line: l})
	}
	return n.Stream(frames)
}

// firstStreamDifference compares two normalized streams value by value.
func firstStreamDifference(a, b []json.RawMessage) (string, any, any, bool) {
	return normalize.FirstDifference(decodeAll(a), decodeAll(b))
}

func decodeAll(msgs []json.RawMessage) []any {
	out := make([]any, len(msgs))
	for i, m := range msgs {
		var v any
		if err := json.Unmarshal(m, &v); err != nil {
			v = string(m)
		}
		out[i] = v
	}
	return out
}

// pretty renders a normalized stream as indented JSON, one value after
// the other, for the diff.
func pretty(msgs []json.RawMessage) string {
	var b bytes.Buffer
	for _, m := range msgs {
		// No index markers: after an insertion they would all differ and
		// bury the real change; the first divergence names the index.
		if err := json.Indent(&b, m, "", "  "); err != nil {
			b.Write(m)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// brief formats a value for a one-line message.
func brief(v any) string {
	if _, ok := v.(normalize.Missing); ok {
		return "nothing"
	}
	b, err := json.Marshal(v)
	s := string(b)
	if err != nil {
		s = fmt.Sprint(v)
	}
	if len(s) > 160 {
		s = strings.ToValidUTF8(s[:160], "") + "…"
	}
	return s
}

// unjoin splits an errors.Join error.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// lineQueue passes the agent's lines from stdiotap's callback, which must
// not block, to the driver, and keeps them all for the comparison.
type lineQueue struct {
	mu     sync.Mutex // guards the fields below
	lines  [][]byte   // every line pushed
	sent   int        // lines handed to feed's channel
	closed bool
	ready  chan struct{} // signalled (non-blocking) on push and close
}

func newLineQueue() *lineQueue { return &lineQueue{ready: make(chan struct{}, 1)} }

func (q *lineQueue) push(l []byte) {
	q.mu.Lock()
	q.lines = append(q.lines, l)
	q.mu.Unlock()
	q.signal()
}

func (q *lineQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *lineQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *lineQueue) all() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lines
}

// feed sends the queued lines to out in order, closing out once the queue
// is closed and drained, until stop is closed.
func (q *lineQueue) feed(out chan<- []byte, stop <-chan struct{}) {
	for {
		q.mu.Lock()
		var next []byte
		have := q.sent < len(q.lines)
		if have {
			next = q.lines[q.sent]
		}
		done := !have && q.closed
		q.mu.Unlock()
		switch {
		case done:
			close(out)
			return
		case have:
			select {
			case out <- next:
				q.mu.Lock()
				q.sent++
				q.mu.Unlock()
			case <-stop:
				return
			}
		default:
			select {
			case <-q.ready:
			case <-stop:
				return
			}
		}
	}
}

// sandbox is the agent's fresh directories.
type sandbox struct {
	root, work, home, tmp string
}

// newSandbox makes the sandbox, its workspace a copy of the directory
// seed, else the snapshot archive restored, else empty.
func newSandbox(seed string, archive []byte) (*sandbox, error) {
	root, err := os.MkdirTemp("", "acptap-replay-")
	if err != nil {
		return nil, fmt.Errorf("creating the replay sandbox: %w", err)
	}
	// Resolve symlinks (macOS /var → /private/var) so that the paths the
	// agent sees are the ones normalization knows.
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	sb := &sandbox{root: root, work: filepath.Join(root, "work"), home: filepath.Join(root, "home"), tmp: filepath.Join(root, "tmp")}
	for _, d := range []string{sb.home, sb.tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			sb.remove()
			return nil, fmt.Errorf("creating the replay sandbox: %w", err)
		}
	}
	from := seed
	switch {
	case seed != "":
		err = os.CopyFS(sb.work, os.DirFS(seed))
	case archive != nil:
		from = "the recorded snapshot"
		err = snapshot.Restore(archive, sb.work)
	default:
		err = os.Mkdir(sb.work, 0o755)
	}
	if err != nil {
		sb.remove()
		return nil, fmt.Errorf("%w: seeding the workspace from %s: %v", ErrWorkspace, from, err)
	}
	return sb, nil
}

func (sb *sandbox) remove() { os.RemoveAll(sb.root) }

// pathMap maps the recorded session's directories to the sandbox's: the
// cwds the editor gave session/new (an editor's project root is rarely
// acptap's own working directory), acptap's cwd, HOME and TMPDIR.
func (sb *sandbox) pathMap(rec *recording) map[string]string {
	meta := rec.meta
	m := map[string]string{}
	for _, cwd := range sessionCwds(rec.frames) {
		m[cwd] = sb.work
	}
	if meta.Cwd != "" {
		m[meta.Cwd] = sb.work
	}
	if meta.Home != "" && meta.Home != "/" {
		m[meta.Home] = sb.home
	}
	if meta.Tmp != "" && meta.Tmp != "/" {
		m[meta.Tmp] = sb.tmp
	}
	return m
}

// env builds the agent's environment: the allowlist, the sandbox's HOME
// and TMPDIR, dummies for the recorded secret variables, extra, then the
// tap's variables the way the recording reached the LLM.
func (sb *sandbox) env(meta store.Recording, extra []string, tap *proxy.Tap) ([]string, error) {
	var env []string
	for _, k := range allowedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LC_") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+sb.home, "TMPDIR="+sb.tmp)
	for _, k := range meta.EnvNames {
		if redact.SecretName(k) && looksLikeAPIKey(k) {
			env = append(env, k+"="+dummyKey)
		}
	}
	for _, kv := range extra {
		if !strings.Contains(kv, "=") {
			return nil, fmt.Errorf("%w: %q (want K=V)", ErrEnv, kv)
		}
		env = append(env, kv)
	}
	full, err := tap.Env(env)
	if err != nil {
		return nil, fmt.Errorf("preparing the agent's environment: %w", err)
	}
	if !meta.ProxyEnv {
		// Only the base-URL variables: the recorded agent did not go
		// through a proxy, and a replay must reach it the same way.
		full = keepBaseURLs(env, full, meta.BaseURLs)
	}
	return dedupeEnv(full), nil
}

// looksLikeAPIKey picks, among secret-looking names, the credentials an
// agent needs to start (API keys and tokens), not passwords of unrelated
// tools.
func looksLikeAPIKey(name string) bool {
	u := strings.ToUpper(name)
	return strings.Contains(u, "API_KEY") || strings.HasSuffix(u, "_KEY") || strings.HasSuffix(u, "_TOKEN")
}

func keepBaseURLs(env, full []string, baseURLs map[string]string) []string {
	out := append([]string(nil), env...)
	for _, kv := range full {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := baseURLs[k]; ok {
			out = append(out, kv)
		}
	}
	return out
}

// dedupeEnv keeps the last value of each variable.
func dedupeEnv(env []string) []string {
	last := map[string]int{}
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		last[k] = i
	}
	out := env[:0:0]
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if last[k] == i {
			out = append(out, kv)
		}
	}
	return out
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/record/causal"
	"github.com/acptap/acptap/store"
)

// What every agent's suite shares: the built binaries, a lab (store, CA
// directory, scratch space) per test, recording through the scripted
// editor, show and replay.

const (
	// grace is how long acptap lets an agent that ignores the end of its
	// input (codex-acp does) linger before terminating it.
	grace = "300ms"
	// replays is how many times each recording is replayed.
	replays = 5
	// commandTimeout bounds every process the tests run, so that a hang
	// fails the test with what it printed rather than timing out the
	// whole binary. It is a guard, not an assertion.
	commandTimeout = 3 * time.Minute
)

var (
	binDir   string // acptap, testeditor and testmcp, built by TestMain
	buildErr error
)

func TestMain(m *testing.M) {
	if slices.ContainsFunc(agents, func(a *agentBin) bool { return os.Getenv(a.envVar) != "" }) {
		dir, err := os.MkdirTemp("", "acptap-e2e-bin-")
		if err != nil {
			buildErr = err
		} else {
			binDir = dir
			buildErr = build(dir)
		}
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// build builds acptap and the scripted editor into dir.
func build(dir string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building the helper binaries: %w", err)
	}
	for name, pkg := range map[string]string{"acptap": "./cmd/acptap", "testeditor": "./internal/testing/testeditor/cmd/testeditor", "testmcp": "./internal/testing/testmcp/cmd/testmcp"} {
		cmd := exec.Command(gobin, "build", "-o", filepath.Join(dir, name), pkg)
		cmd.Dir = ".." // the module root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return nil
}

// An agentBin is a real agent the suite runs, named by an environment
// variable that e2e/install.sh prints.
type agentBin struct {
	envVar string // ACPTAP_CODEX_ACP, ...
	pkg    string // its npm package, for messages
	// check reports why the binary at path is not the agent.
	check func(path string) error

	once sync.Once
	path string
	err  error
}

// agents are the agents of the suite.
var agents = []*agentBin{codex, claude, gemini, opencode, qwen}

// need skips the test when the agent's variable is not set, and fails it
// when it is set but the agent or the helper binaries are unusable. It
// returns the agent's path.
func (a *agentBin) need(t *testing.T) string {
	t.Helper()
	a.once.Do(func() {
		a.path = os.Getenv(a.envVar)
		if a.path != "" {
			a.err = a.check(a.path)
		}
	})
	if a.path == "" {
		t.Skipf("%s is not set: run `eval \"$(e2e/install.sh)\"` to install %s and the other agents and run their end-to-end tests", a.envVar, a.pkg)
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if a.err != nil {
		t.Fatalf("%s=%s is set but unusable: %v", a.envVar, a.path, a.err)
	}
	return a.path
}

// commandOutput runs a quick command (an agent's --help or --version)
// and returns what it printed.
func commandOutput(argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("`%s` fails: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out), nil
}

// A route is how an agent's LLM traffic reaches acptap's tap when
// recorded.
type route struct {
	name     string
	tls      bool   // the fake upstream is HTTPS
	recorded string // the route acptap records its exchanges under
}

var (
	// proxyRoute: the agent reaches an HTTPS fake through acptap's
	// forward proxy, which intercepts TLS.
	proxyRoute = route{name: "proxy", tls: true, recorded: "proxy"}
	// baseURLRoute: the agent's base-URL variable points at acptap's
	// reverse route to a plain-HTTP fake.
	baseURLRoute = route{name: "baseurl", tls: false, recorded: "base-url"}
	routes       = []route{proxyRoute, baseURLRoute}
)

// allRoutesEnv, set to 1, runs every test of an agent by every route;
// scripts/test-full sets it.
const allRoutesEnv = "ACPTAP_E2E_ALL_ROUTES"

// routesOf returns the routes a test of an agent takes: by default the
// one given, each agent's tests split between the routes so that the
// normal run takes every agent through both; every route with
// ACPTAP_E2E_ALL_ROUTES=1.
func routesOf(normal route) []route {
	if os.Getenv(allRoutesEnv) == "1" {
		return routes
	}
	return []route{normal}
}

// recordFlags are the acptap record flags of the route, for a fake at
// fakeURL (with its certificate in caFile for the proxy route) and an
// agent that reads its base URL from baseURLVar.
func (r route) recordFlags(fakeURL, caFile, baseURLVar string) []string {
	if r.tls {
		// The fake listens on loopback: a local LLM reached by the
		// proxy, which NO_PROXY would otherwise send around the tap.
		return []string{"--proxy-loopback", "--upstream-ca", caFile}
	}
	return []string{"--no-proxy-env", "--base-url", baseURLVar + "=" + fakeURL}
}

// A lab is one test's store, CA directory and scratch space.
type lab struct {
	t     *testing.T
	dir   string
	store string
	caDir string
	// agentEnv returns the agent's own variables for a HOME of home
	// (CODEX_HOME, an API key, ...); nil for none.
	agentEnv func(home string) []string
	// secrets are values that must never reach the store (API keys).
	secrets []string
	// viaScenario makes record drive the agent with `acptap record
	// --scenario` instead of the scripted editor.
	viaScenario bool
}

func newLab(t *testing.T) *lab {
	dir := t.TempDir()
	// Resolve symlinks so that the paths the agent sees are the ones
	// acptap normalizes.
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	return &lab{t: t, dir: dir, store: filepath.Join(dir, "acptap.db"), caDir: filepath.Join(dir, "ca")}
}

// strippedEnv reports whether a variable of the test's own environment
// is kept from acptap and the agent: anything that could route an agent
// around the tap, point it at a real account or configure acptap.
func strippedEnv(key string) bool {
	u := strings.ToUpper(key)
	for _, prefix := range []string{"CODEX_", "OPENAI_", "ANTHROPIC_", "CLAUDE_", "GEMINI_", "GOOGLE_", "ACPTAP_", "FAKE_", "OPENCODE_", "QWEN_"} {
		if strings.HasPrefix(u, prefix) {
			return true
		}
	}
	switch u {
	case "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME":
		return true
	}
	return strings.Contains(u, "PROXY")
}

// env returns the environment of acptap: this process's, without what
// strippedEnv names, with HOME in home (the lab's own when empty) and
// the agent's own variables.
func (l *lab) env(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strippedEnv(k) {
			env = append(env, kv)
		}
	}
	if home == "" {
		home = filepath.Join(l.dir, "home")
	}
	// The agents' own temporary files (Claude Code keeps a directory per
	// workspace under $TMPDIR/claude-UID) go where the test removes them.
	tmp := filepath.Join(l.dir, "tmp")
	os.MkdirAll(tmp, 0o700)
	env = append(env,
		"HOME="+home,
		"TMPDIR="+tmp,
		"ACPTAP_CA_DIR="+l.caDir,
		"ACPTAP_STORE="+l.store,
	)
	if l.agentEnv != nil {
		env = append(env, l.agentEnv(home)...)
	}
	return env
}

// result is how a process ended.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// run runs a program to its end.
func (l *lab) run(dir string, env []string, argv ...string) result {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		l.t.Fatalf("%s did not end within %v:\n%s", strings.Join(argv, " "), commandTimeout, res)
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		l.t.Fatalf("running %s: %v", argv[0], err)
	}
	return res
}

// A take is what lab.record needs to record one session.
type take struct {
	name        string
	route       route
	prompts     []string
	cancelAfter int // testeditor --cancel-after
	// editor holds more testeditor flags (before its --).
	editor []string
	// recordFlags are the route's acptap record flags.
	recordFlags []string
	// agent is the agent command acptap record runs.
	agent []string
	// setup, when not nil, prepares the session's home and workspace
	// (settings files) before the agent starts.
	setup func(s *session) error
	// steps returns what the fake answered each request with, in order.
	steps func() []string
	// llmURL reports whether an exchange's URL is the agent's LLM API;
	// nil accepts any.
	llmURL func(url string) bool
}

// A session is one recorded agent session.
type session struct {
	name    string
	route   route
	fakeURL string
	home    string // HOME when recorded
	ws      string // the editor's and the agent's working directory
	// answers is what the editor printed: each finished turn's text, one
	// per line.
	answers    string
	transcript []message
	// steps is what the fake answered each request with.
	steps []string
	// llmErrors are the errors recorded with the LLM exchanges, such as
	// the agent walking away from a stream, for failure messages.
	llmErrors []string
	// exchanges is the number of exchanges recorded.
	exchanges int
	// causalPairs is how many pairs of events checkCausal found ordered
	// by what caused what.
	causalPairs int
}

// message is a line of the editor's transcript.
type message struct {
	Dir string          `json:"dir"`
	Msg json.RawMessage `json:"msg"`
}

// rpc is the part of a JSON-RPC message the tests read.
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
		} `json:"update"`
	} `json:"params"`
	Result struct {
		StopReason string `json:"stopReason"`
	} `json:"result"`
}

func (m message) rpc() rpc {
	var r rpc
	json.Unmarshal(m.Msg, &r)
	return r
}

// stopReasons returns the stop reasons of the prompt turns, in order.
func (s *session) stopReasons() []string {
	var out []string
	for _, m := range s.transcript {
		if r := m.rpc(); m.Dir == "recv" && r.Result.StopReason != "" {
			out = append(out, r.Result.StopReason)
		}
	}
	return out
}

// agentRequests returns the methods of the requests the agent sent.
func (s *session) agentRequests() []string {
	var out []string
	for _, m := range s.transcript {
		if r := m.rpc(); m.Dir == "recv" && r.Method != "" && len(r.ID) > 0 {
			out = append(out, r.Method)
		}
	}
	return out
}

// sentCancel reports whether the editor sent session/cancel.
func (s *session) sentCancel() bool {
	for _, m := range s.transcript {
		if m.Dir == "send" && m.rpc().Method == "session/cancel" {
			return true
		}
	}
	return false
}

// record records a session: the scripted editor drives `acptap record
// -- AGENT` in a fresh home and workspace.
func (l *lab) record(tk take, fakeURL string) *session {
	l.t.Helper()
	s := &session{name: tk.name, route: tk.route, fakeURL: fakeURL,
		home: filepath.Join(l.dir, tk.name, "home"), ws: filepath.Join(l.dir, tk.name, "ws")}
	for _, d := range []string{s.home, s.ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			l.t.Fatal(err)
		}
	}
	if tk.setup != nil {
		if err := tk.setup(s); err != nil {
			l.t.Fatal(err)
		}
	}
	if l.viaScenario {
		l.recordScenario(tk, s)
		return s
	}
	transcript := filepath.Join(l.dir, tk.name+".transcript.ndjson")
	argv := []string{filepath.Join(binDir, "testeditor"), "--timeout", "90s", "--exit-wait", "20s", "--transcript", transcript}
	for _, p := range tk.prompts {
		argv = append(argv, "--prompt", p)
	}
	if tk.cancelAfter > 0 {
		argv = append(argv, "--cancel-after", strconv.Itoa(tk.cancelAfter))
	}
	argv = append(argv, tk.editor...)
	argv = append(argv, "--", filepath.Join(binDir, "acptap"), "record", "--store", l.store, "--name", tk.name, "--grace", grace)
	argv = append(argv, tk.recordFlags...)
	argv = append(argv, "--")
	argv = append(argv, tk.agent...)
	res := l.run(s.ws, l.env(s.home), argv...)
	if tk.steps != nil {
		s.steps = tk.steps()
	}
	if res.code != 0 {
		l.t.Fatalf("recording %s: the scripted editor failed: %s\nLLM requests answered: %v", tk.name, res, s.steps)
	}
	// The agent sends the tap's secret with every request, by whichever
	// part of it makes them: acptap notes the first request it refused.
	if strings.Contains(res.stderr, "acptap: http tap: ") && strings.Contains(res.stderr, ": refused ") {
		l.t.Errorf("recording %s: the tap refused a request of the agent's:\n%s", tk.name, res.stderr)
	}
	s.answers = res.stdout
	b, err := os.ReadFile(transcript)
	if err != nil {
		l.t.Fatal(err)
	}
	for line := range bytes.Lines(b) {
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			l.t.Fatalf("transcript line %q: %v", line, err)
		}
		if m.Dir != "" {
			s.transcript = append(s.transcript, m)
		}
	}
	l.checkRecording(s, tk.llmURL)
	return s
}

// recordScenario records tk with `acptap record --scenario`: a scenario
// file of its prompts, every permission request allowed once, and the
// session's workspace as the scenario's.
func (l *lab) recordScenario(tk take, s *session) {
	l.t.Helper()
	if tk.cancelAfter > 0 || len(tk.editor) > 0 {
		l.t.Fatalf("recording %s: a scenario takes no editor flags", tk.name)
	}
	file := filepath.Join(l.dir, tk.name+".json")
	sc := map[string]any{"workspace": s.ws, "prompts": tk.prompts, "permissions": slices.Repeat([]string{"allow_once"}, 8), "timeout": "90s"}
	data, err := json.Marshal(sc)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		l.t.Fatal(err)
	}
	argv := append([]string{filepath.Join(binDir, "acptap"), "record", "--store", l.store, "--scenario", file, "--grace", grace}, tk.recordFlags...)
	argv = append(append(argv, "--"), tk.agent...)
	res := l.run(s.ws, l.env(s.home), argv...)
	if tk.steps != nil {
		s.steps = tk.steps()
	}
	if res.code != 0 || !strings.HasPrefix(res.stdout, "RECORDED "+tk.name+" (") {
		l.t.Fatalf("recording %s: acptap record --scenario: %s\nLLM requests answered: %v", tk.name, res, s.steps)
	}
	l.checkRecording(s, tk.llmURL)
}

// event is an event of `acptap show --json`.
type event struct {
	Seq             int         `json:"seq"`
	Lane            string      `json:"lane"`
	Raw             string      `json:"raw"`
	Route           string      `json:"route"`
	Class           string      `json:"class"`
	Method          string      `json:"method"`
	URL             string      `json:"url"`
	Status          int         `json:"status"`
	RequestHeaders  http.Header `json:"request_headers"`
	RequestBody     string      `json:"request_body"`
	ResponseHeaders http.Header `json:"response_headers"`
	ResponseBody    string      `json:"response_body"`
	Error           string      `json:"error"`
}

// show returns the events of a recording and the raw output.
func (l *lab) show(name string) ([]event, string) {
	l.t.Helper()
	res := l.run(l.dir, l.env(""), filepath.Join(binDir, "acptap"), "show", "--store", l.store, "--json", name)
	if res.code != 0 {
		l.t.Fatalf("acptap show --json %s: %s", name, res)
	}
	var events []event
	for line := range strings.Lines(res.stdout) {
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			l.t.Fatalf("acptap show --json %s: line %q: %v", name, line, err)
		}
		events = append(events, e)
	}
	return events, res.stdout
}

// llm returns the exchanges (the events of the llm lane, LLM calls and
// other HTTP alike), but those with an HTTP MCP server.
func llm(events []event) []event {
	var out []event
	for _, e := range events {
		if e.Lane == "llm" && e.Class != "mcp" {
			out = append(out, e)
		}
	}
	return out
}

// checkRecording checks what every recording must hold: the editor and
// agent lanes, every request the fake got as an exchange of the route,
// and none of the lab's secrets.
func (l *lab) checkRecording(s *session, llmURL func(string) bool) {
	l.t.Helper()
	events, raw := l.show(s.name)
	lanes := map[string]int{}
	for _, e := range events {
		lanes[e.Lane]++
	}
	if lanes["editor"] == 0 || lanes["agent"] == 0 {
		l.t.Errorf("recording %s: %d editor and %d agent frames, want some of each", s.name, lanes["editor"], lanes["agent"])
	}
	x := llm(events)
	s.exchanges = len(x)
	if len(x) != len(s.steps) {
		l.t.Errorf("recording %s: %d exchanges recorded, but the fake got %d requests (%v)", s.name, len(x), len(s.steps), s.steps)
	}
	for i, e := range x {
		s.llmErrors = append(s.llmErrors, fmt.Sprintf("llm #%d: %q", i+1, e.Error))
		if e.Route != s.route.recorded {
			l.t.Errorf("recording %s: llm #%d came by route %q, want %q", s.name, i+1, e.Route, s.route.recorded)
		}
		if llmURL != nil && !llmURL(e.URL) {
			l.t.Errorf("recording %s: llm #%d is %s %s, not a request to the agent's API", s.name, i+1, e.Method, e.URL)
		}
	}
	for _, secret := range l.secrets {
		if strings.Contains(raw, secret) {
			l.t.Errorf("recording %s: the secret %q reached the store", s.name, secret)
		}
	}
	s.causalPairs = l.checkCausal(s.name)
}

// checkCausal checks that the recording's order agrees with what caused
// what (record/causal), and its times with its order, and returns how
// many causal pairs it checked.
func (l *lab) checkCausal(name string) int {
	l.t.Helper()
	st, err := store.Open(l.store, &store.Options{ReadOnly: true})
	if err != nil {
		l.t.Fatal(err)
	}
	defer st.Close()
	r, vs, err := causal.Read(st, name)
	if err != nil {
		l.t.Fatal(err)
	}
	n, more := r.Conversation()
	for _, v := range append(vs, more...) {
		l.t.Errorf("recording %s: %v", name, v)
	}
	return n
}

// replay runs acptap replay on a recording, with no upstream running.
func (l *lab) replay(name string, args ...string) result {
	l.t.Helper()
	argv := []string{filepath.Join(binDir, "acptap"), "replay", "--store", l.store, "--grace", grace}
	// Flags first, then the name, then any -- AGENT.
	i := slices.Index(args, "--")
	if i < 0 {
		i = len(args)
	}
	argv = append(argv, args[:i]...)
	argv = append(argv, name)
	argv = append(argv, args[i:]...)
	return l.run(l.dir, l.env(""), argv...)
}

// replayEqual replays a recording `replays` times and wants each replay
// equal, with every recorded exchange served from the recording.
func (l *lab) replayEqual(s *session, args ...string) {
	l.t.Helper()
	want := fmt.Sprintf("PASS %s (", s.name)
	served := fmt.Sprintf(" %d LLM exchanges served", s.exchanges)
	failed := 0
	for i := range replays {
		res := l.replay(s.name, args...)
		if res.code != 0 || !strings.HasPrefix(res.stdout, want) || !strings.Contains(res.stdout, served) {
			failed++
			if failed == 1 {
				l.t.Errorf("replay %d/%d of %s: got %s\nwant exit 0 and stdout starting %q with%q\n(recorded exchange errors: %s)",
					i+1, replays, s.name, clip(res.String(), 6000), want, served, strings.Join(s.llmErrors, ", "))
			}
		}
	}
	if failed > 0 {
		l.t.Errorf("%s: %d of %d replays were not equal", s.name, failed, replays)
	}
}

// clip shortens long output for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("\n… (%d more bytes)", len(s)-n)
}

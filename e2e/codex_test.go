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

	"github.com/acptap/acptap/internal/fakeresponses"
	"github.com/acptap/acptap/normalize"
)

const (
	// model is a model Codex knows (see the package doc).
	model = "gpt-5.2-codex"
	// apiKeyVar is the provider's env_key; apiKey is long enough for
	// acptap to treat it as a secret to mask.
	apiKeyVar = "FAKE_API_KEY"
	apiKey    = "fake-e2e-key-5b0d6c1e9a"
	// baseURLVar is the variable of the base-URL route.
	baseURLVar = "FAKE_BASE_URL"
	// grace is how long acptap lets codex-acp, which ignores the end of
	// its input, linger before terminating it.
	grace = "300ms"
	// replays is how many times each recording is replayed.
	replays = 5
	// commandTimeout bounds every process the tests run, so that a hang
	// fails the test with what it printed rather than timing out the
	// whole binary. It is a guard, not an assertion.
	commandTimeout = 3 * time.Minute
)

var (
	codexBin string // $ACPTAP_CODEX_ACP
	binDir   string // acptap and testeditor, built by TestMain
	buildErr error

	codexCheck    sync.Once
	codexCheckErr error
)

func TestMain(m *testing.M) {
	codexBin = os.Getenv("ACPTAP_CODEX_ACP")
	if codexBin != "" {
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
	for name, pkg := range map[string]string{"acptap": "./cmd/acptap", "testeditor": "./internal/testeditor/cmd/testeditor"} {
		cmd := exec.Command(gobin, "build", "-o", filepath.Join(dir, name), pkg)
		cmd.Dir = ".." // the module root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return nil
}

// needCodex skips the test when ACPTAP_CODEX_ACP is not set, and fails it
// when it is set but codex-acp or the helper binaries are unusable.
func needCodex(t *testing.T) {
	t.Helper()
	if codexBin == "" {
		t.Skip("ACPTAP_CODEX_ACP is not set: run e2e/install.sh and export ACPTAP_CODEX_ACP=<the path it prints> to run the codex-acp end-to-end tests")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	codexCheck.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, codexBin, "--help").CombinedOutput()
		if err != nil {
			codexCheckErr = fmt.Errorf("ACPTAP_CODEX_ACP=%s is set but `%[1]s --help` fails: %v\n%s", codexBin, err, out)
		} else if !bytes.Contains(out, []byte("Usage: codex-acp")) {
			codexCheckErr = fmt.Errorf("ACPTAP_CODEX_ACP=%s does not look like codex-acp: --help printed %q", codexBin, clip(string(out), 200))
		}
	})
	if codexCheckErr != nil {
		t.Fatal(codexCheckErr)
	}
}

// A route is how codex-acp's LLM traffic reaches acptap's tap when
// recorded.
type route struct {
	name     string
	tls      bool   // the fake upstream is HTTPS
	recorded string // the route acptap records its exchanges under
}

var (
	proxyRoute   = route{name: "proxy", tls: true, recorded: "proxy"}
	baseURLRoute = route{name: "baseurl", tls: false, recorded: "base-url"}
	routes       = []route{proxyRoute, baseURLRoute}
)

// A scenario is what the editor does and how codex is configured.
type scenario struct {
	prompts     []string
	cancelAfter int      // testeditor --cancel-after
	codex       []string // extra codex-acp arguments
	retries     int      // the provider's request_max_retries
	model       string   // the model; empty for the constant model
}

// shellScenario is a prompt that makes the fake call the shell tool,
// with codex asking approval_policy whether to run it.
func shellScenario(approval string, prompts ...string) scenario {
	return scenario{
		prompts: prompts,
		codex: []string{
			"-c", `sandbox_mode="danger-full-access"`,
			"-c", fmt.Sprintf("approval_policy=%q", approval),
			"-c", "features.unified_exec=false",
		},
	}
}

func (s scenario) modelName() string {
	if s.model != "" {
		return s.model
	}
	return model
}

// providerTOML is the -c value that defines the "fake" provider.
func providerTOML(baseURL string, retries int) string {
	return fmt.Sprintf(`model_providers.fake={name="fake",base_url="%s",env_key="%s",wire_api="responses",supports_websockets=false,request_max_retries=%d,stream_max_retries=0}`,
		baseURL, apiKeyVar, retries)
}

// agent returns the agent command for the route, with the fake at
// fakeURL. The base-URL route's command is a shell wrapper that puts
// $FAKE_BASE_URL, which acptap sets to its route, into the provider's
// base_url: Codex does not read base URLs from the environment.
func (r route) agent(fakeURL string, s scenario) []string {
	args := []string{"-c", "model_provider=fake", "-c", "model=" + s.modelName()}
	args = append(args, s.codex...)
	if r.tls {
		return append([]string{codexBin, "-c", providerTOML(fakeURL, s.retries)}, args...)
	}
	script := `exec "$0" -c "` + strings.ReplaceAll(providerTOML("$"+baseURLVar, s.retries), `"`, `\"`) + `" "$@"`
	return append([]string{"sh", "-c", script, codexBin}, args...)
}

// recordFlags are the acptap record flags of the route.
func (r route) recordFlags(fake *fakeresponses.Listener) []string {
	if r.tls {
		// The fake listens on loopback: a local LLM reached by the
		// proxy, which NO_PROXY would otherwise send around the tap.
		return []string{"--proxy-loopback", "--upstream-ca", fake.CAFile}
	}
	return []string{"--no-proxy-env", "--base-url", baseURLVar + "=" + fake.URL}
}

// A lab is one test's store, CA directory and scratch space.
type lab struct {
	t     *testing.T
	dir   string
	store string
	caDir string
}

func newLab(t *testing.T) *lab {
	needCodex(t)
	dir := t.TempDir()
	// Resolve symlinks so that the paths codex sees are the ones acptap
	// normalizes.
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	return &lab{t: t, dir: dir, store: filepath.Join(dir, "acptap.db"), caDir: filepath.Join(dir, "ca")}
}

// env returns the environment of acptap: this process's, without
// anything that could route the agent around the tap or point Codex at
// a real account, and with HOME (and CODEX_HOME, its default) in home.
func (l *lab) env(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		u := strings.ToUpper(k)
		switch {
		case strings.Contains(u, "PROXY"), strings.HasPrefix(u, "CODEX_"), strings.HasPrefix(u, "OPENAI_"),
			strings.HasPrefix(u, "ACPTAP_"), u == "SSL_CERT_FILE", u == "NODE_EXTRA_CA_CERTS",
			u == "REQUESTS_CA_BUNDLE", u == "CURL_CA_BUNDLE", u == "HOME", u == apiKeyVar, u == baseURLVar:
			continue
		}
		env = append(env, kv)
	}
	if home == "" {
		home = filepath.Join(l.dir, "home")
	}
	return append(env,
		"HOME="+home,
		"CODEX_HOME="+filepath.Join(home, ".codex"),
		apiKeyVar+"="+apiKey,
		"ACPTAP_CA_DIR="+l.caDir,
		"ACPTAP_STORE="+l.store,
	)
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

// A session is one recorded codex-acp session.
type session struct {
	name     string
	route    route
	scenario scenario
	fakeURL  string
	home     string // HOME and CODEX_HOME's parent when recorded
	ws       string // the editor's and the agent's working directory
	// answers is what the editor printed: each finished turn's text, one
	// per line.
	answers    string
	transcript []message
	requests   []fakeresponses.Request
	// llmErrors are the errors recorded with the LLM exchanges, such as
	// the agent walking away from a stream, for failure messages.
	llmErrors []string
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

// steps returns what the fake answered each request with.
func (s *session) steps() []string {
	var out []string
	for _, r := range s.requests {
		out = append(out, r.Step)
	}
	return out
}

// record records a session of scenario sc by route r: the scripted editor
// drives `acptap record -- codex-acp ...` against a fresh fake upstream,
// which is closed when record returns.
func (l *lab) record(name string, r route, sc scenario, opts fakeresponses.Options) *session {
	l.t.Helper()
	var fake *fakeresponses.Listener
	if r.tls {
		var err error
		if fake, err = fakeresponses.StartTLS(opts, l.dir); err != nil {
			l.t.Fatal(err)
		}
	} else {
		fake = fakeresponses.Start(opts)
	}
	defer fake.Close()

	s := &session{name: name, route: r, scenario: sc, fakeURL: fake.URL,
		home: filepath.Join(l.dir, name, "home"), ws: filepath.Join(l.dir, name, "ws")}
	for _, d := range []string{filepath.Join(s.home, ".codex"), s.ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			l.t.Fatal(err)
		}
	}
	transcript := filepath.Join(l.dir, name+".transcript.ndjson")
	argv := []string{filepath.Join(binDir, "testeditor"), "--timeout", "90s", "--exit-wait", "20s", "--transcript", transcript}
	for _, p := range sc.prompts {
		argv = append(argv, "--prompt", p)
	}
	if sc.cancelAfter > 0 {
		argv = append(argv, "--cancel-after", strconv.Itoa(sc.cancelAfter))
	}
	argv = append(argv, "--", filepath.Join(binDir, "acptap"), "record", "--store", l.store, "--name", name, "--grace", grace)
	argv = append(argv, r.recordFlags(fake)...)
	argv = append(argv, "--")
	argv = append(argv, r.agent(fake.URL, sc)...)
	res := l.run(s.ws, l.env(s.home), argv...)
	s.requests = fake.Requests()
	if res.code != 0 {
		l.t.Fatalf("recording %s: the scripted editor failed: %s\nLLM requests answered: %v", name, res, s.steps())
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
	l.checkRecording(s)
	return s
}

// event is an event of `acptap show --json`.
type event struct {
	Seq             int         `json:"seq"`
	Lane            string      `json:"lane"`
	Raw             string      `json:"raw"`
	Route           string      `json:"route"`
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

// llm returns the LLM events.
func llm(events []event) []event {
	var out []event
	for _, e := range events {
		if e.Lane == "llm" {
			out = append(out, e)
		}
	}
	return out
}

// checkRecording checks what every recording must hold: the editor and
// agent lanes, every request the fake got as an exchange of the route,
// and not the API key.
func (l *lab) checkRecording(s *session) {
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
	if len(x) != len(s.requests) {
		l.t.Errorf("recording %s: %d LLM exchanges recorded, but the fake got %d requests (%v)", s.name, len(x), len(s.requests), s.steps())
	}
	for i, e := range x {
		s.llmErrors = append(s.llmErrors, fmt.Sprintf("llm #%d: %q", i+1, e.Error))
		if e.Route != s.route.recorded {
			l.t.Errorf("recording %s: llm #%d came by route %q, want %q", s.name, i+1, e.Route, s.route.recorded)
		}
		if e.Method != http.MethodPost || !strings.HasSuffix(e.URL, "/v1/responses") {
			l.t.Errorf("recording %s: llm #%d is %s %s, want POST .../v1/responses", s.name, i+1, e.Method, e.URL)
		}
	}
	if strings.Contains(raw, apiKey) {
		l.t.Errorf("recording %s: the API key %q reached the store", s.name, apiKey)
	}
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
	served := fmt.Sprintf(" %d LLM exchanges served", len(s.requests))
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

func TestCodexPlainAnswer(t *testing.T) {
	needCodex(t)
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			l := newLab(t)
			prompt := "Say hi"
			s := l.record("plain", r, scenario{prompts: []string{prompt}}, fakeresponses.Options{})
			if got, want := s.answers, fakeresponses.Answer(prompt)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got, want := s.stopReasons(), []string{"end_turn"}; !slices.Equal(got, want) {
				t.Errorf("stop reasons %q, want %q", got, want)
			}
			if got, want := s.steps(), []string{"text"}; !slices.Equal(got, want) {
				t.Errorf("the fake answered %q, want %q", got, want)
			}
			l.replayEqual(s)

			// A changed agent: another model is another lane, which the
			// recording cannot answer.
			changed := s.scenario
			changed.model = "gpt-5.4"
			res := l.replay(s.name, append([]string{"--"}, r.agent(s.fakeURL, changed)...)...)
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL plain:") ||
				!strings.Contains(res.stdout, "no recorded exchange") || !strings.Contains(res.stdout, "model gpt-5.4") {
				t.Errorf("replay with -c model=gpt-5.4: got %s\nwant exit 1, FAIL and the request of model gpt-5.4 that has no recorded exchange", clip(res.String(), 6000))
			}
		})
	}
}

func TestCodexShellTool(t *testing.T) {
	needCodex(t)
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			l := newLab(t)
			s := l.record("shell", r, shellScenario("untrusted", "Please run the command"), fakeresponses.Options{})
			if got, want := s.answers, fakeresponses.ToolAnswer(fakeresponses.ShellOutput)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got, want := s.agentRequests(), []string{"session/request_permission"}; !slices.Equal(got, want) {
				t.Errorf("the agent sent the requests %q, want %q", got, want)
			}
			if got, want := s.steps(), []string{"shell", "tool-answer"}; !slices.Equal(got, want) {
				t.Fatalf("the fake answered %q, want %q", got, want)
			}
			if !slices.Contains(s.requests[0].Tools, "shell_command") {
				t.Errorf("codex offered the tools %q, want shell_command among them", s.requests[0].Tools)
			}
			if out := s.requests[1].Body; !bytes.Contains(out, []byte(`"function_call_output"`)) || !bytes.Contains(out, []byte(fakeresponses.ShellOutput)) {
				t.Errorf("the second request does not carry the command's output %q:\n%s", fakeresponses.ShellOutput, clip(string(out), 3000))
			}
			if _, err := os.Stat(filepath.Join(s.ws, "ran.txt")); err != nil {
				t.Errorf("the command did not run in the session's cwd: %v", err)
			}
			// Codex's requests carry ids, times and paths; normalized,
			// each must equal its recorded twin.
			l.replayEqual(s, "--requests", "fail")

			// A changed agent: one that no longer asks before running a
			// command.
			changed := shellScenario("never", s.scenario.prompts...)
			res := l.replay(s.name, append([]string{"--"}, r.agent(s.fakeURL, changed)...)...)
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL shell:") ||
				!strings.Contains(res.stdout, "the agent did not send session/request_permission #1") ||
				!strings.Contains(res.stdout, "--- recorded") || !strings.Contains(res.stdout, `-  "method": "session/request_permission"`) {
				t.Errorf("replay with approval_policy=never: got %s\nwant exit 1, FAIL and a diff that loses the permission request", clip(res.String(), 8000))
			}
		})
	}
}

func TestCodexTwoPrompts(t *testing.T) {
	needCodex(t)
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			l := newLab(t)
			prompts := []string{"Say hi", "Say bye"}
			s := l.record("two", r, scenario{prompts: prompts}, fakeresponses.Options{})
			if got, want := s.answers, fakeresponses.Answer(prompts[0])+"\n"+fakeresponses.Answer(prompts[1])+"\n"; got != want {
				t.Errorf("the editor got the answers %q, want %q", got, want)
			}
			if got, want := s.stopReasons(), []string{"end_turn", "end_turn"}; !slices.Equal(got, want) {
				t.Errorf("stop reasons %q, want %q", got, want)
			}
			if got, want := s.steps(), []string{"text", "text"}; !slices.Equal(got, want) {
				t.Fatalf("the fake answered %q, want %q", got, want)
			}
			// The second turn's request carries the first turn.
			if first, _ := json.Marshal(fakeresponses.Answer(prompts[0])); !bytes.Contains(s.requests[1].Body, first) {
				t.Errorf("the second request does not carry the first answer %s", first)
			}
			l.replayEqual(s, "--requests", "fail")
		})
	}
}

func TestCodexCancel(t *testing.T) {
	needCodex(t)
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			l := newLab(t)
			// The fake streams SlowDeltas deltas, 50ms apart, then holds
			// the response open until the agent leaves, so the turn can
			// end only by the cancel. The editor cancels once it has
			// seen every update the turn will bring before that: the
			// deltas' message chunks and codex-acp's
			// available_commands_update, which comes during the first
			// turn, before or between the chunks.
			sc := scenario{prompts: []string{"Answer slowly"}, cancelAfter: fakeresponses.SlowDeltas + 1}
			s := l.record("cancel", r, sc, fakeresponses.Options{Delay: 50 * time.Millisecond})
			if got, want := s.stopReasons(), []string{"cancelled"}; !slices.Equal(got, want) {
				t.Errorf("stop reasons %q, want %q", got, want)
			}
			if got, want := s.steps(), []string{"slow"}; !slices.Equal(got, want) {
				t.Errorf("the fake answered %q, want %q", got, want)
			}
			var sentCancel bool
			for _, m := range s.transcript {
				sentCancel = sentCancel || m.Dir == "send" && m.rpc().Method == "session/cancel"
			}
			if !sentCancel {
				t.Errorf("the editor never sent session/cancel")
			}
			l.replayEqual(s)
		})
	}
}

func TestCodexFaults(t *testing.T) {
	needCodex(t)
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			l := newLab(t)
			prompt := "Say hi"
			s := l.record("faults", r, scenario{prompts: []string{prompt}, retries: 1}, fakeresponses.Options{})
			if got, want := s.answers, fakeresponses.Answer(prompt)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			// A 500 on the first try: codex retries, and the recorded
			// response answers the retry.
			l.replayEqual(s, "--fault", "1=status:500")

			// The control: the same fault with retries off ends the turn
			// with codex's error, so the replays above did meet the fault.
			noRetry := s.scenario
			noRetry.retries = 0
			res := l.replay(s.name, append([]string{"--fault", "1=status:500", "--"}, r.agent(s.fakeURL, noRetry)...)...)
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL faults:") || !strings.Contains(res.stdout, "internal_server_error") {
				t.Errorf("replay with a 500 fault and request_max_retries=0: got %s\nwant exit 1 and codex's internal_server_error", clip(res.String(), 6000))
			}

			// A 429 on the first try: codex never retries a 429, so the
			// turn fails and the replay says so.
			res = l.replay(s.name, "--fault", "1=status:429:retry-after=0")
			for _, want := range []string{
				"FAIL faults:",
				"429 Too Many Requests",
				"llm #1 (POST " + strings.TrimSuffix(s.fakeURL, "/v1"),
				"was recorded but never requested",
			} {
				if !strings.Contains(res.stdout, want) {
					t.Errorf("replay with a 429 fault: stdout lacks %q", want)
				}
			}
			if res.code != 1 {
				t.Errorf("replay with a 429 fault: exit %d, want 1", res.code)
			}
			if t.Failed() {
				t.Logf("replay with a 429 fault: %s", clip(res.String(), 6000))
			}
		})
	}
}

// TestCodexRunsNormalizeEqual records the same session twice and checks
// that acptap's default normalization makes the two runs' agent output and
// LLM requests equal: whatever codex varies from run to run (ids, times,
// pids, paths, ...) must be covered by it.
func TestCodexRunsNormalizeEqual(t *testing.T) {
	l := newLab(t)
	sc := shellScenario("untrusted", "Please run the command", "Say bye")
	a := l.record("run-a", proxyRoute, sc, fakeresponses.Options{})
	b := l.record("run-b", proxyRoute, sc, fakeresponses.Options{})
	ea, _ := l.show(a.name)
	eb, _ := l.show(b.name)

	stream := func(s *session, events []event) []any {
		n := normalize.New(normalize.Options{Cwd: []string{s.ws}, Home: []string{s.home}, Tmp: []string{os.TempDir()}})
		var frames []normalize.Frame
		for _, e := range events {
			if e.Lane == "agent" && strings.TrimSpace(e.Raw) != "" {
				frames = append(frames, normalize.Frame{Side: normalize.Agent, Line: []byte(e.Raw)})
			}
		}
		var out []any
		for _, m := range n.Stream(frames) {
			var v any
			json.Unmarshal(m, &v)
			out = append(out, v)
		}
		return out
	}
	if path, va, vb, differ := normalize.FirstDifference(stream(a, ea), stream(b, eb)); differ {
		t.Errorf("the normalized agent output of two runs differs at %s: %s vs %s", path, brief(va), brief(vb))
	}

	xa, xb := llm(ea), llm(eb)
	if len(xa) != len(xb) {
		t.Fatalf("%d and %d LLM exchanges", len(xa), len(xb))
	}
	na := normalize.New(normalize.Options{Cwd: []string{a.ws}, Home: []string{a.home}, Tmp: []string{os.TempDir()}})
	nb := normalize.New(normalize.Options{Cwd: []string{b.ws}, Home: []string{b.home}, Tmp: []string{os.TempDir()}})
	for i := range xa {
		ra := na.Request(xa[i].Method, xa[i].URL, xa[i].RequestHeaders, []byte(xa[i].RequestBody))
		rb := nb.Request(xb[i].Method, xb[i].URL, xb[i].RequestHeaders, []byte(xb[i].RequestBody))
		if path, va, vb, differ := normalize.FirstDifference(ra, rb); differ {
			t.Errorf("llm #%d: the normalized requests of two runs differ at %s: %s vs %s", i+1, path, brief(va), brief(vb))
		}
	}
}

func brief(v any) string {
	if _, ok := v.(normalize.Missing); ok {
		return "nothing"
	}
	b, _ := json.Marshal(v)
	return clip(string(b), 300)
}

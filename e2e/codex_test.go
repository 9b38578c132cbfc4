package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/fakellm"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/testing/fakeresponses"
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
)

// codex is codex-acp, @zed-industries/codex-acp.
var codex = &agentBin{
	envVar: "ACPTAP_CODEX_ACP",
	pkg:    "@zed-industries/codex-acp",
	check: func(path string) error {
		out, err := commandOutput(path, "--help")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "Usage: codex-acp") {
			return fmt.Errorf("it does not look like codex-acp: --help printed %q", clip(out, 200))
		}
		return nil
	},
}

// codexBin is codex-acp's path, set by newCodexLab.
var codexBin string

// newCodexLab returns a lab for codex-acp: HOME and CODEX_HOME in the
// session's home, and the provider's API key.
func newCodexLab(t *testing.T) *lab {
	codexBin = codex.need(t)
	l := newLab(t)
	l.secrets = []string{apiKey}
	l.agentEnv = func(home string) []string {
		return []string{"CODEX_HOME=" + filepath.Join(home, ".codex"), apiKeyVar + "=" + apiKey}
	}
	return l
}

// A scenario is what the editor does and how codex is configured.
type scenario struct {
	prompts     []string
	cancelAfter int      // testeditor --cancel-after
	codex       []string // extra codex-acp arguments
	retries     int      // the provider's request_max_retries
	model       string   // the model; empty for the constant model
	websockets  bool     // the provider's supports_websockets: Codex's default, the Responses API over a WebSocket
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

// providerTOML is the -c value that defines the "fake" provider of s.
func providerTOML(baseURL string, s scenario) string {
	return fmt.Sprintf(`model_providers.fake={name="fake",base_url="%s",env_key="%s",wire_api="responses",supports_websockets=%v,request_max_retries=%d,stream_max_retries=0}`,
		baseURL, apiKeyVar, s.websockets, s.retries)
}

// agent returns the agent command for the route, with the fake at
// fakeURL. The base-URL route's command is a shell wrapper that puts
// $FAKE_BASE_URL, which acptap sets to its route, into the provider's
// base_url: Codex does not read base URLs from the environment.
func (r route) agent(fakeURL string, s scenario) []string {
	args := []string{"-c", "model_provider=fake", "-c", "model=" + s.modelName()}
	args = append(args, s.codex...)
	if r.tls {
		return append([]string{codexBin, "-c", providerTOML(fakeURL, s)}, args...)
	}
	script := `exec "$0" -c "` + strings.ReplaceAll(providerTOML("$"+baseURLVar, s), `"`, `\"`) + `" "$@"`
	return append([]string{"sh", "-c", script, codexBin}, args...)
}

// A codexSession is a recorded codex-acp session and what the fake saw.
type codexSession struct {
	*session
	scenario scenario
	requests []fakeresponses.Request
}

// record records a session of scenario sc by route r: the scripted editor
// drives `acptap record -- codex-acp ...` against a fresh fake upstream,
// which is closed when record returns.
func (l *lab) recordCodex(name string, r route, sc scenario, opts fakeresponses.Options) *codexSession {
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
	cs := &codexSession{scenario: sc}
	cs.session = l.record(take{
		name:        name,
		route:       r,
		prompts:     sc.prompts,
		cancelAfter: sc.cancelAfter,
		recordFlags: r.recordFlags(fake.URL, fake.CAFile, baseURLVar),
		agent:       r.agent(fake.URL, sc),
		setup: func(s *session) error {
			return os.MkdirAll(filepath.Join(s.home, ".codex"), 0o755)
		},
		steps: func() []string {
			cs.requests = fake.Requests()
			var out []string
			for _, r := range cs.requests {
				out = append(out, r.Step)
			}
			return out
		},
		llmURL: func(url string) bool { return strings.HasSuffix(url, "/v1/responses") },
	}, fake.URL)
	return cs
}

func TestCodexPlainAnswer(t *testing.T) {
	for _, r := range routesOf(proxyRoute) {
		t.Run(r.name, func(t *testing.T) {
			l := newCodexLab(t)
			prompt := "Say hi"
			s := l.recordCodex("plain", r, scenario{prompts: []string{prompt}}, fakeresponses.Options{})
			if got, want := s.answers, fakellm.Answer(prompt)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got, want := s.stopReasons(), []string{"end_turn"}; !slices.Equal(got, want) {
				t.Errorf("stop reasons %q, want %q", got, want)
			}
			if got, want := s.steps, []string{"text"}; !slices.Equal(got, want) {
				t.Errorf("the fake answered %q, want %q", got, want)
			}
			l.replayEqual(s.session)

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

// TestCodexWebSocket: codex-acp with WebSockets on, its default, speaks
// the Responses API over a WebSocket through the tap by both routes; the
// plain turn and the shell tool turn are recorded as exchanges of the
// connection and replay green with --requests fail.
func TestCodexWebSocket(t *testing.T) {
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			l := newCodexLab(t)
			plain := scenario{prompts: []string{"Say hi"}, websockets: true}
			s := l.recordCodex("ws-plain", r, plain, fakeresponses.Options{})
			if got, want := s.answers, fakellm.Answer("Say hi")+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			for _, req := range s.requests {
				if req.Method != "GET" {
					t.Errorf("codex sent %s %s; want its messages on a WebSocket", req.Method, req.Path)
				}
			}
			l.replayEqual(s.session, "--requests", "fail")

			shell := shellScenario("untrusted", "Please run the command")
			shell.websockets = true
			s = l.recordCodex("ws-shell", r, shell, fakeresponses.Options{})
			// Codex warms the WebSocket up first: a response.create
			// with "generate": false.
			if got, want := s.steps, []string{"prewarm", "shell", "tool-answer"}; !slices.Equal(got, want) {
				t.Fatalf("the fake answered %q, want %q", got, want)
			}
			if got, want := s.answers, fakellm.ToolAnswer(fakeresponses.ShellOutput, fakeresponses.ShellOutput)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			l.replayEqual(s.session, "--requests", "fail")
		})
	}
}

func TestCodexShellTool(t *testing.T) {
	for _, r := range routesOf(baseURLRoute) {
		t.Run(r.name, func(t *testing.T) {
			l := newCodexLab(t)
			s := l.recordCodex("shell", r, shellScenario("untrusted", "Please run the command"), fakeresponses.Options{})
			if got, want := s.answers, fakellm.ToolAnswer(fakeresponses.ShellOutput, fakeresponses.ShellOutput)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got, want := s.agentRequests(), []string{"session/request_permission"}; !slices.Equal(got, want) {
				t.Errorf("the agent sent the requests %q, want %q", got, want)
			}
			if got, want := s.steps, []string{"shell", "tool-answer"}; !slices.Equal(got, want) {
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
			l.replayEqual(s.session, "--requests", "fail")

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
	for _, r := range routesOf(proxyRoute) {
		t.Run(r.name, func(t *testing.T) {
			l := newCodexLab(t)
			prompts := []string{"Say hi", "Say bye"}
			s := l.recordCodex("two", r, scenario{prompts: prompts}, fakeresponses.Options{})
			if got, want := s.answers, fakellm.Answer(prompts[0])+"\n"+fakellm.Answer(prompts[1])+"\n"; got != want {
				t.Errorf("the editor got the answers %q, want %q", got, want)
			}
			if got, want := s.stopReasons(), []string{"end_turn", "end_turn"}; !slices.Equal(got, want) {
				t.Errorf("stop reasons %q, want %q", got, want)
			}
			if got, want := s.steps, []string{"text", "text"}; !slices.Equal(got, want) {
				t.Fatalf("the fake answered %q, want %q", got, want)
			}
			// The second turn's request carries the first turn.
			if first, _ := json.Marshal(fakellm.Answer(prompts[0])); !bytes.Contains(s.requests[1].Body, first) {
				t.Errorf("the second request does not carry the first answer %s", first)
			}
			l.replayEqual(s.session, "--requests", "fail")
		})
	}
}

func TestCodexCancel(t *testing.T) {
	for _, r := range routesOf(baseURLRoute) {
		t.Run(r.name, func(t *testing.T) {
			l := newCodexLab(t)
			// The fake streams SlowDeltas deltas, 50ms apart, then holds
			// the response open until the agent leaves, so the turn can
			// end only by the cancel. The editor cancels once it has
			// seen every update the turn will bring before that: the
			// deltas' message chunks and codex-acp's
			// available_commands_update, which comes during the first
			// turn, before or between the chunks.
			sc := scenario{prompts: []string{"Answer slowly"}, cancelAfter: fakeresponses.SlowDeltas + 1}
			s := l.recordCodex("cancel", r, sc, fakeresponses.Options{Delay: 50 * time.Millisecond})
			if got, want := s.stopReasons(), []string{"cancelled"}; !slices.Equal(got, want) {
				t.Errorf("stop reasons %q, want %q", got, want)
			}
			if got, want := s.steps, []string{"slow"}; !slices.Equal(got, want) {
				t.Errorf("the fake answered %q, want %q", got, want)
			}
			if !s.sentCancel() {
				t.Errorf("the editor never sent session/cancel")
			}
			l.replayEqual(s.session)
		})
	}
}

func TestCodexFaults(t *testing.T) {
	for _, r := range routesOf(proxyRoute) {
		t.Run(r.name, func(t *testing.T) {
			l := newCodexLab(t)
			prompt := "Say hi"
			s := l.recordCodex("faults", r, scenario{prompts: []string{prompt}, retries: 1}, fakeresponses.Options{})
			if got, want := s.answers, fakellm.Answer(prompt)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			// A 500 on the first try: codex retries, and the recorded
			// response answers the retry.
			l.replayEqual(s.session, "--fault", "1=status:500")

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
	l := newCodexLab(t)
	sc := shellScenario("untrusted", "Please run the command", "Say bye")
	a := l.recordCodex("run-a", proxyRoute, sc, fakeresponses.Options{})
	b := l.recordCodex("run-b", proxyRoute, sc, fakeresponses.Options{})
	ea, _ := l.show(a.name)
	eb, _ := l.show(b.name)

	transcript := func(s *codexSession, events []event) *normalize.Transcript {
		n := normalize.New(normalize.Options{Cwd: []string{s.ws}, Home: []string{s.home}, Tmp: []string{os.TempDir()}})
		var frames []lane.Line
		for _, e := range events {
			if e.Lane == "agent" && strings.TrimSpace(e.Raw) != "" {
				frames = append(frames, lane.Line{Lane: lane.Agent, Data: []byte(e.Raw)})
			}
		}
		return n.Transcript(frames)
	}
	if d := normalize.Compare(transcript(a, ea), transcript(b, eb)).Diff; d != nil {
		t.Errorf("the normalized agent output of two runs differs in turn %d, %s, value %d, at %s: %s vs %s", d.Turn, d.Stream, d.Index, d.Path, brief(d.Recorded), brief(d.Live))
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

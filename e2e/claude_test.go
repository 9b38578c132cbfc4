package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/fakellm"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/testing/fakeanthropic"
	"github.com/acptap/acptap/internal/testing/testmcp"
	"github.com/acptap/acptap/normalize"
)

const (
	// claudeModel is the model the sessions run on (ANTHROPIC_MODEL), one
	// the fake lists.
	claudeModel = "claude-sonnet-4-5-20250929"
	// claudeKey is ANTHROPIC_API_KEY, long enough for acptap to mask it
	// as a secret.
	claudeKey = "sk-ant-api03-fake-e2e-key-7c1d9b42"
	// claudeBaseURLVar is the variable of the base-URL route.
	claudeBaseURLVar = "ANTHROPIC_BASE_URL"
)

// claude is claude-agent-acp, @agentclientprotocol/claude-agent-acp.
var claude = &agentBin{
	envVar: "ACPTAP_CLAUDE_ACP",
	pkg:    "@agentclientprotocol/claude-agent-acp",
	check: func(path string) error {
		out, err := commandOutput(path, "--version")
		if err != nil {
			return err
		}
		if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+\n?$`).MatchString(out) {
			return fmt.Errorf("it does not look like claude-agent-acp: --version printed %q", clip(out, 200))
		}
		return nil
	},
}

// newClaudeLab returns a lab for claude-agent-acp: HOME in the session's
// home, and the API key, which never reaches the store.
func newClaudeLab(t *testing.T) *lab {
	claude.need(t)
	l := newLab(t)
	l.secrets = []string{claudeKey}
	l.agentEnv = func(string) []string { return []string{"ANTHROPIC_API_KEY=" + claudeKey} }
	return l
}

// A claudeScenario is what the editor does and how Claude Code is
// configured.
type claudeScenario struct {
	// env holds more variables for Claude Code (NAME=VALUE).
	env []string
	// editor holds more testeditor flags, such as --zed.
	editor      []string
	prompts     []string
	cancelAfter int // testeditor --cancel-after
	// model is ANTHROPIC_MODEL; empty for claudeModel.
	model string
	// retries, when not nil, is CLAUDE_CODE_MAX_RETRIES.
	retries *int
	// claudeMD, when not empty, is the workspace's CLAUDE.md.
	claudeMD string
	// configDir, when not empty, is CLAUDE_CONFIG_DIR, the user's
	// settings (and Claude Code's state) in place of ~/.claude.
	configDir string
	// noProjectSettings leaves .claude/settings.json out of the
	// workspace.
	noProjectSettings bool
}

// settings is the workspace's .claude/settings.json: the permission mode
// "default", which asks before running a command. (Without it the mode
// is "auto", whose first answer carries a notice naming the base URL's
// host and port.)
const settings = `{"permissions":{"defaultMode":"default"}}`

// workspace writes the scenario's project files into dir: its settings
// and CLAUDE.md.
func (sc claudeScenario) workspace(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		return err
	}
	if !sc.noProjectSettings {
		if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.json"), []byte(settings), 0o644); err != nil {
			return err
		}
	}
	if sc.claudeMD != "" {
		return os.WriteFile(filepath.Join(dir, "CLAUDE.md"), []byte(sc.claudeMD), 0o644)
	}
	return nil
}

// agent returns the agent command for the route, with the fake at
// fakeURL: claude-agent-acp behind env(1), which sets what Claude Code
// needs offline. The variables are in the command, not in acptap's
// environment, so that a replay, which runs the recorded command in an
// environment of its own, sets them too. The proxy route names the TLS
// fake in ANTHROPIC_BASE_URL, reached through acptap's HTTPS_PROXY; the
// base-URL route leaves ANTHROPIC_BASE_URL to acptap.
func (sc claudeScenario) agent(r route, fakeURL string) []string {
	model := sc.model
	if model == "" {
		model = claudeModel
	}
	argv := []string{"env",
		// No update checks, telemetry, error reporting, settings or
		// policy fetches from api.anthropic.com, and no MCP registry.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		// The tests run as root, where bypassPermissions needs it.
		"IS_SANDBOX=1",
		"ANTHROPIC_MODEL=" + model,
		// The session title is asked for by Claude Code itself, with
		// its small model, or by claude-agent-acp, with the main one,
		// whichever comes first: one model for both keeps the title
		// request in one replay queue whoever asks.
		"ANTHROPIC_SMALL_FAST_MODEL=" + model,
	}
	if sc.configDir != "" {
		argv = append(argv, "CLAUDE_CONFIG_DIR="+sc.configDir)
	}
	if sc.retries != nil {
		argv = append(argv, "CLAUDE_CODE_MAX_RETRIES="+strconv.Itoa(*sc.retries))
	}
	if r.tls {
		argv = append(argv, claudeBaseURLVar+"="+fakeURL)
	}
	argv = append(argv, sc.env...)
	// claude.path is set once, by the first need.
	return append(argv, claude.path)
}

// claudeTurnDelay is how long the fake takes at least to start a turn's
// answer (fakeanthropic.Options.TurnDelay), and it starts none before it
// has answered the session-title request (Options.AwaitTitle).
// claude-agent-acp asks for the session's title when the first prompt is
// sent, and the title, its cost and the usage it adds land before or
// after the turn's answer by a race; a turn that waits so has them land
// first, in the recording and, since the replays keep the recorded timing
// (--speed 1), in the replays, unless the machine is so busy that the
// title takes longer than the recorded wait.
const claudeTurnDelay = time.Second

// claudeFlags returns acptap replay flags: --speed 1 (see
// claudeTurnDelay), then more.
func claudeFlags(more ...string) []string {
	return append([]string{"--speed", "1"}, more...)
}

// A claudeSession is a recorded claude-agent-acp session and what the fake
// saw.
type claudeSession struct {
	*session
	scenario claudeScenario
	requests []fakeanthropic.Request
}

// recordClaude records a session of scenario sc by route r: the scripted
// editor drives `acptap record --snapshot -- env ... claude-agent-acp`
// against a fresh fake upstream, which is closed when recordClaude
// returns. The snapshot carries the workspace's settings into the
// replays.
func (l *lab) recordClaude(name string, r route, sc claudeScenario, opts fakeanthropic.Options) *claudeSession {
	l.t.Helper()
	// Set before the fake starts, which copies its options.
	opts.TurnDelay, opts.AwaitTitle = claudeTurnDelay, true
	// claude-agent-acp announces a Bash call ("Terminal") when its block
	// starts, unless the call's complete input reaches it first, which
	// it sometimes did when the input followed at once.
	opts.ToolInputDelay = 300 * time.Millisecond
	var fake *fakeanthropic.Listener
	if r.tls {
		var err error
		if fake, err = fakeanthropic.StartTLS(opts, l.dir); err != nil {
			l.t.Fatal(err)
		}
	} else {
		fake = fakeanthropic.Start(opts)
	}
	defer fake.Close()
	cs := &claudeSession{scenario: sc}
	cs.session = l.record(take{
		name:        name,
		route:       r,
		prompts:     sc.prompts,
		cancelAfter: sc.cancelAfter,
		editor:      sc.editor,
		recordFlags: append([]string{"--snapshot"}, r.recordFlags(fake.URL, fake.CAFile, claudeBaseURLVar)...),
		agent:       sc.agent(r, fake.URL),
		setup:       func(s *session) error { return sc.workspace(s.ws) },
		steps: func() []string {
			cs.requests = fake.Requests()
			var out []string
			for _, r := range cs.requests {
				out = append(out, r.Step)
			}
			return out
		},
		llmURL: func(url string) bool { return strings.HasSuffix(url, "/v1/messages?beta=true") },
	}, fake.URL)
	return cs
}

// turnSteps returns what the fake answered, but the session-title
// request ("json"), which Claude Code makes next to the first turn, in an
// order that varies.
func (cs *claudeSession) turnSteps() []string {
	var out []string
	for _, s := range cs.steps {
		if s != "json" {
			out = append(out, s)
		}
	}
	return out
}

// checkTitle checks that Claude Code asked for the session's title once,
// with structured output, and, when the editor saw the title arrive,
// that it is the fake's.
func (cs *claudeSession) checkTitle(t *testing.T) {
	t.Helper()
	if n := strings.Count(strings.Join(cs.steps, " "), "json"); n != 1 {
		t.Errorf("the fake answered %q, want one session-title (json) request", cs.steps)
	}
	want := fakeanthropic.Title(cs.scenario.prompts[0])
	for _, m := range cs.transcript {
		var u struct {
			Params struct {
				Update struct {
					SessionUpdate, Title string
				}
			}
		}
		json.Unmarshal(m.Msg, &u)
		if u.Params.Update.SessionUpdate == "session_info_update" && u.Params.Update.Title != want {
			t.Errorf("session_info_update with the title %q, want %q", u.Params.Update.Title, want)
		}
	}
}

// isTurn reports whether a recorded request body is a turn of the
// conversation rather than the title request.
func isTurn(body string) bool { return !strings.Contains(body, `"format":{"type":"json_schema"`) }

// prompts long enough (10 characters) for claude-agent-acp to ask for the
// session's title when the prompt is sent, not at the turn's end, where
// the request would race the session's end.
const (
	claudeHello   = "Say hello to the tests"
	claudeGoodbye = "Now say goodbye to them"
	claudeRun     = "Please run the command"
	claudeSlowly  = "Answer this one slowly"
)

func TestClaudePlainAnswer(t *testing.T) {
	t.Parallel()
	for _, r := range routesOf(proxyRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newClaudeLab(t)
			sc := claudeScenario{prompts: []string{claudeHello}}
			s := l.recordClaude("plain", r, sc, fakeanthropic.Options{})
			if got, want := s.answers, fakellm.Answer(claudeHello)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got, want := s.stopReasons(), []string{"end_turn"}; !slices.Equal(got, want) {
				t.Errorf("stop reasons %q, want %q", got, want)
			}
			if got, want := s.turnSteps(), []string{"text"}; !slices.Equal(got, want) {
				t.Errorf("the fake answered the turns %q, want %q", got, want)
			}
			s.checkTitle(t)
			// Normalized, Claude Code's requests equal their recorded
			// twins: the session id (X-Claude-Code-Session-Id and in
			// metadata.user_id), the device id and the paths and date of
			// the system prompt are covered by the default rules.
			l.replayEqual(s.session, claudeFlags("--requests", "fail")...)

			// A changed agent: another model is another queue, which the
			// recording cannot answer.
			changed := sc
			changed.model = "claude-opus-4-1-20250805"
			res := l.replay(s.name, claudeFlags(append([]string{"--"}, changed.agent(r, s.fakeURL)...)...)...)
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL plain:") ||
				!strings.Contains(res.stdout, "no recorded exchange for POST /v1/messages model claude-opus-4-1-20250805") {
				t.Errorf("replay with ANTHROPIC_MODEL=claude-opus-4-1-20250805: got %s\nwant exit 1, FAIL and the request of that model that has no recorded exchange", clip(res.String(), 6000))
			}

			// A changed prompt: a CLAUDE.md in the workspace adds to what
			// Claude Code tells the model, and the request drifts.
			ws := filepath.Join(l.dir, "ws-claude-md")
			changed = sc
			changed.claudeMD = "Always answer in French.\n"
			if err := changed.workspace(ws); err != nil {
				t.Fatal(err)
			}
			res = l.replay(s.name, claudeFlags("--requests", "fail", "--workspace", ws)...)
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL plain:") ||
				!strings.Contains(res.stdout, "the request differs from the recording at $.body.messages[0].content") ||
				!strings.Contains(res.stdout, `live "<system-reminder>\nCodebase and user instructions`) {
				t.Errorf("replay with a CLAUDE.md: got %s\nwant exit 1, FAIL and the request that differs by the CLAUDE.md", clip(res.String(), 6000))
			}
		})
	}
}

func TestClaudeBashTool(t *testing.T) {
	t.Parallel()
	for _, r := range routesOf(baseURLRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newClaudeLab(t)
			sc := claudeScenario{prompts: []string{claudeRun}}
			s := l.recordClaude("bash", r, sc, fakeanthropic.Options{})
			if got, want := s.answers, fakeanthropic.ToolPreamble+fakellm.ToolAnswer(fakeanthropic.BashOutput, fakeanthropic.BashOutput)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got, want := s.agentRequests(), []string{"session/request_permission"}; !slices.Equal(got, want) {
				t.Errorf("the agent sent the requests %q, want %q", got, want)
			}
			if got, want := s.turnSteps(), []string{"bash", "tool-answer"}; !slices.Equal(got, want) {
				t.Fatalf("the fake answered the turns %q, want %q", got, want)
			}
			s.checkTitle(t)
			var answer fakeanthropic.Request
			for _, req := range s.requests {
				if req.Step == "tool-answer" {
					answer = req
				}
			}
			if !slices.Contains(answer.Tools, "Bash") {
				t.Errorf("Claude Code offered the tools %q, want Bash among them", answer.Tools)
			}
			if !bytes.Contains(answer.Body, []byte(`"tool_result"`)) || !bytes.Contains(answer.Body, []byte(fakeanthropic.BashOutput)) {
				t.Errorf("the request after the tool call does not carry its output %q:\n%s", fakeanthropic.BashOutput, clip(string(answer.Body), 3000))
			}
			if _, err := os.Stat(filepath.Join(s.ws, "ran.txt")); err != nil {
				t.Errorf("the command did not run in the session's cwd: %v", err)
			}
			l.replayEqual(s.session, claudeFlags("--requests", "fail")...)

			// A changed agent: one that no longer asks before running a
			// command, for its user's settings say bypassPermissions and
			// the project sets no mode. (A project's own settings
			// override the user's, and Claude Code ignores a
			// bypassPermissions there.)
			changed := sc
			changed.configDir = filepath.Join(l.dir, "bypass-user")
			changed.noProjectSettings = true
			ws := filepath.Join(l.dir, "ws-no-mode")
			if err := changed.workspace(ws); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(changed.configDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(changed.configDir, "settings.json"), []byte(`{"permissions":{"defaultMode":"bypassPermissions"}}`), 0o644); err != nil {
				t.Fatal(err)
			}
			res := l.replay(s.name, claudeFlags(append([]string{"--workspace", ws, "--"}, changed.agent(r, s.fakeURL)...)...)...)
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL bash:") ||
				!strings.Contains(res.stdout, `currentValue: expected "default", got "bypassPermissions"`) ||
				!strings.Contains(res.stdout, "--- recorded") || !strings.Contains(res.stdout, `-  "method": "session/request_permission"`) {
				t.Errorf("replay with defaultMode bypassPermissions: got %s\nwant exit 1, FAIL, the mode and a diff that loses the permission request", clip(res.String(), 8000))
			}
		})
	}
}

func TestClaudeTwoPrompts(t *testing.T) {
	t.Parallel()
	for _, r := range routesOf(proxyRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newClaudeLab(t)
			prompts := []string{claudeHello, claudeGoodbye}
			s := l.recordClaude("two", r, claudeScenario{prompts: prompts}, fakeanthropic.Options{})
			if got, want := s.answers, fakellm.Answer(prompts[0])+"\n"+fakellm.Answer(prompts[1])+"\n"; got != want {
				t.Errorf("the editor got the answers %q, want %q", got, want)
			}
			if got, want := s.stopReasons(), []string{"end_turn", "end_turn"}; !slices.Equal(got, want) {
				t.Errorf("stop reasons %q, want %q", got, want)
			}
			if got, want := s.turnSteps(), []string{"text", "text"}; !slices.Equal(got, want) {
				t.Fatalf("the fake answered the turns %q, want %q", got, want)
			}
			s.checkTitle(t)
			// The second turn's request carries the first turn.
			var last fakeanthropic.Request
			for _, req := range s.requests {
				if req.Step != "json" {
					last = req
				}
			}
			if first, _ := json.Marshal(fakellm.Answer(prompts[0])); !bytes.Contains(last.Body, first) {
				t.Errorf("the second turn's request does not carry the first answer %s", first)
			}
			l.replayEqual(s.session, claudeFlags("--requests", "fail")...)
		})
	}
}

func TestClaudeCancel(t *testing.T) {
	t.Parallel()
	for _, r := range routesOf(baseURLRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newClaudeLab(t)
			// The fake streams SlowDeltas deltas, 50ms apart, then holds
			// the response open until the agent leaves, so the turn can
			// end only by the cancel. The editor cancels once it has seen
			// every update the turn brings before that: the deltas'
			// message chunks and claude-agent-acp's two
			// available_commands_update, the session_info_update of the
			// title (which claudeTurnDelay lets land first) and the
			// usage_update of the answer's start.
			sc := claudeScenario{prompts: []string{claudeSlowly}, cancelAfter: fakeanthropic.SlowDeltas + claudeCancelExtra}
			s := l.recordClaude("cancel", r, sc, fakeanthropic.Options{Delay: 50 * time.Millisecond})
			if got, want := s.stopReasons(), []string{"cancelled"}; !slices.Equal(got, want) {
				t.Errorf("stop reasons %q, want %q", got, want)
			}
			if got, want := s.turnSteps(), []string{"slow"}; !slices.Equal(got, want) {
				t.Errorf("the fake answered the turns %q, want %q", got, want)
			}
			if !s.sentCancel() {
				t.Errorf("the editor never sent session/cancel")
			}
			// The request of a stream the agent walked away from is
			// compared too.
			l.replayEqual(s.session, claudeFlags("--requests", "fail")...)
		})
	}
}

// claudeCancelExtra is the number of session/update notifications of a
// slow turn besides its message chunks.
const claudeCancelExtra = 4

func TestClaudeFaults(t *testing.T) {
	t.Parallel()
	for _, r := range routesOf(proxyRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newClaudeLab(t)
			// Recorded with a real 529 (overloaded) before the answer:
			// Claude Code retries, and the recording holds both
			// exchanges, which the replays serve in turn.
			sc := claudeScenario{prompts: []string{claudeHello}}
			s := l.recordClaude("faults", r, sc, fakeanthropic.Options{Faults: []int{529}})
			if got, want := s.answers, fakellm.Answer(claudeHello)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got, want := s.turnSteps(), []string{"fault-529", "text"}; !slices.Equal(got, want) {
				t.Errorf("the fake answered the turns %q, want %q", got, want)
			}
			l.replayEqual(s.session, claudeFlags("--requests", "fail")...)

			// A 429 injected by the replay on the turn's answer: Claude
			// Code retries after the retry-after, and the recorded
			// response answers the retry.
			answer := 0
			events, _ := l.show(s.name)
			for i, e := range llm(events) {
				if e.Status == 200 && isTurn(e.RequestBody) {
					answer = i + 1
				}
			}
			fault := []string{"--fault", fmt.Sprintf("%d=status:429:retry-after=0", answer)}
			want := "PASS faults ("
			served := fmt.Sprintf(" %d LLM exchanges served", s.exchanges)
			if res := l.replay(s.name, claudeFlags(append(fault, "--requests", "fail")...)...); res.code != 0 || !strings.HasPrefix(res.stdout, want) || !strings.Contains(res.stdout, served) {
				t.Errorf("replay with a 429 fault on llm #%d: got %s\nwant exit 0 and stdout starting %q with%q", answer, clip(res.String(), 6000), want, served)
			}

			// The control: with retries off, the recorded 529 ends the
			// turn with Claude Code's error, so the replays above passed
			// by its retries.
			noRetry := sc
			zero := 0
			noRetry.retries = &zero
			res := l.replay(s.name, claudeFlags(append(fault, append([]string{"--"}, noRetry.agent(r, s.fakeURL)...)...)...)...)
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL faults:") || !strings.Contains(res.stdout, `got "API Error: 529 Overloaded`) {
				t.Errorf("replay with CLAUDE_CODE_MAX_RETRIES=0: got %s\nwant exit 1 and Claude Code's error for the 529", clip(res.String(), 6000))
			}
		})
	}
}

// TestClaudeRunsNormalizeEqual records the same session twice and checks
// that acptap's default normalization makes the two runs' agent output and
// LLM requests equal: whatever Claude Code varies from run to run (ids,
// times, paths, the device id, ...) must be covered by it.
func TestClaudeRunsNormalizeEqual(t *testing.T) {
	t.Parallel()
	l := newClaudeLab(t)
	sc := claudeScenario{prompts: []string{claudeRun, claudeGoodbye}}
	a := l.recordClaude("run-a", proxyRoute, sc, fakeanthropic.Options{})
	b := l.recordClaude("run-b", proxyRoute, sc, fakeanthropic.Options{})
	ea, _ := l.show(a.name)
	eb, _ := l.show(b.name)

	transcript := func(s *claudeSession, events []event) *normalize.Transcript {
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

	// The title request comes before or after the first turn's: pair
	// each request with its twin of the same kind.
	kinds := func(events []event) map[bool][]event {
		m := map[bool][]event{}
		for _, e := range llm(events) {
			m[isTurn(e.RequestBody)] = append(m[isTurn(e.RequestBody)], e)
		}
		return m
	}
	ka, kb := kinds(ea), kinds(eb)
	na := normalize.New(normalize.Options{Cwd: []string{a.ws}, Home: []string{a.home}, Tmp: []string{os.TempDir()}})
	nb := normalize.New(normalize.Options{Cwd: []string{b.ws}, Home: []string{b.home}, Tmp: []string{os.TempDir()}})
	for _, turn := range []bool{true, false} {
		xa, xb := ka[turn], kb[turn]
		if len(xa) != len(xb) {
			t.Fatalf("turn requests %v: %d and %d exchanges", turn, len(xa), len(xb))
		}
		for i := range xa {
			ra := na.Request(xa[i].Method, xa[i].URL, xa[i].RequestHeaders, []byte(xa[i].RequestBody))
			rb := nb.Request(xb[i].Method, xb[i].URL, xb[i].RequestHeaders, []byte(xb[i].RequestBody))
			if path, va, vb, differ := normalize.FirstDifference(ra, rb); differ {
				t.Errorf("request %d (turn %v): the normalized requests of two runs differ at %s: %s vs %s", i+1, turn, path, brief(va), brief(vb))
			}
		}
	}
}

// TestClaudeZedSessions: a Zed-like editor with claude-agent-acp: two
// sessions opened at once and prompted at once, their turns (and their
// title calls) in flight together on one model, the modes and models it
// offers set, then the first session closed and loaded again with its
// history and prompted once more; recorded by the base-URL route (both
// with ACPTAP_E2E_ALL_ROUTES=1) and replayed 5 times green under
// --requests fail, each request answered from the conversation it
// continues.
func TestClaudeZedSessions(t *testing.T) {
	t.Parallel()
	for _, r := range routesOf(baseURLRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newClaudeLab(t)
			sc := claudeScenario{prompts: []string{claudeHello}, editor: []string{"--zed"}}
			s := l.recordClaude("zed", r, sc, fakeanthropic.Options{})
			for _, want := range []string{fakellm.Answer(claudeHello + " (session 1)"), fakellm.Answer(claudeHello + " (session 2)")} {
				if !strings.Contains(s.answers, want) {
					t.Errorf("the editor got the answers %q, want %q among them", s.answers, want)
				}
			}
			var methods []string
			for _, m := range s.transcript {
				var env struct{ Method string }
				json.Unmarshal(m.Msg, &env)
				if env.Method != "" && !slices.Contains(methods, env.Method) {
					methods = append(methods, env.Method)
				}
			}
			t.Logf("methods of the session: %q", methods)
			if !slices.Contains(methods, "session/load") && !slices.Contains(methods, "session/resume") {
				t.Errorf("the editor neither loaded nor resumed the first session; methods %q", methods)
			}
			l.replayEqual(s.session, claudeFlags("--requests", "fail")...)
		})
	}
}

// TestClaudeMCP: claude-agent-acp given a stdio MCP server in session/new
// (the test MCP server), whose lookup tool the scripted model calls:
// recorded by the proxy route (both with ACPTAP_E2E_ALL_ROUTES=1), the
// server's lines on lanes of their own, and replayed 5 times green under --requests fail with the server's program
// gone, served from the recording, the server asked nothing.
func TestClaudeMCP(t *testing.T) {
	t.Parallel()
	for _, r := range routesOf(proxyRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newClaudeLab(t)
			server := filepath.Join(l.dir, "notes-server")
			b, err := os.ReadFile(filepath.Join(binDir, "testmcp"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(server, b, 0o755); err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(l.dir, "notes.log")
			servers, _ := json.Marshal([]map[string]any{{"name": "notes", "command": server, "args": []string{"--log", log}, "env": []any{}}})
			// MCP tools offered to the model at once, not behind ToolSearch.
			sc := claudeScenario{prompts: []string{"Please look the answer up"}, editor: []string{"--mcp-servers", string(servers)}, env: []string{"ENABLE_TOOL_SEARCH=false"}}
			s := l.recordClaude("mcp", r, sc, fakeanthropic.Options{})
			if want := fakeanthropic.LookupAnswer("42"); !strings.Contains(s.answers, want) {
				t.Fatalf("the editor got %q, want %q in it (the fake answered %q)", s.answers, want, s.steps)
			}
			calls := func() int {
				b, _ := os.ReadFile(log)
				return strings.Count(string(b), `"method":"tools/call"`)
			}
			if n := calls(); n != 1 {
				t.Fatalf("the server logged %d tools/call, want 1", n)
			}
			res := l.run(l.dir, l.env(""), filepath.Join(binDir, "acptap"), "show", "--store", l.store, "mcp")
			if !strings.Contains(res.stdout, "notes → request  tools/call") || !strings.Contains(res.stdout, `← result`) {
				t.Errorf("show lacks the MCP call:\n%s", clip(res.stdout, 8000))
			}
			if err := os.Remove(server); err != nil {
				t.Fatal(err)
			}
			l.replayEqual(s.session, claudeFlags("--requests", "fail")...)
			if n := calls(); n != 1 {
				t.Errorf("after the replays the server logged %d tools/call, want the 1 recorded", n)
			}
		})
	}
}

// TestClaudeMCPHTTP: claude-agent-acp given an HTTP MCP server in
// session/new reaches it through acptap's route, and the recording holds
// the server's exchanges, its token masked; replayed with the server's
// port closed, the agent is served from the recording and the server is
// asked nothing.
func TestClaudeMCPHTTP(t *testing.T) {
	t.Parallel()
	for _, r := range routesOf(baseURLRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newClaudeLab(t)
			var log bytes.Buffer
			var mu sync.Mutex
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			web := &http.Server{Handler: testmcp.New(testmcp.Options{Name: "web", Log: lockedWriter{&mu, &log}})}
			go web.Serve(ln)
			t.Cleanup(func() { web.Close() })
			const token = "web-token-0123456789abcdef"
			servers, _ := json.Marshal([]map[string]any{{"type": "http", "name": "web", "url": "http://" + ln.Addr().String() + "/mcp",
				"headers": []map[string]string{{"name": "Authorization", "value": "Bearer " + token}}}})
			sc := claudeScenario{prompts: []string{"Please look the answer up"}, editor: []string{"--mcp-servers", string(servers)}, env: []string{"ENABLE_TOOL_SEARCH=false"}}
			s := l.recordClaude("mcphttp", r, sc, fakeanthropic.Options{})
			if want := fakeanthropic.LookupAnswer("42"); !strings.Contains(s.answers, want) {
				t.Fatalf("the editor got %q, want %q in it (the fake answered %q)", s.answers, want, s.steps)
			}
			calls := func() int {
				mu.Lock()
				defer mu.Unlock()
				return strings.Count(log.String(), `"method":"tools/call"`)
			}
			if n := calls(); n != 1 {
				t.Fatalf("the server logged %d tools/call, want 1", n)
			}
			events, raw := l.show("mcphttp")
			if strings.Contains(raw, token) {
				t.Errorf("the recording holds the server's token")
			}
			mcp := 0
			for _, e := range events {
				if e.Class == "mcp" {
					mcp++
				}
			}
			res := l.run(l.dir, l.env(""), filepath.Join(binDir, "acptap"), "show", "--store", l.store, "mcphttp")
			if mcp == 0 || !strings.Contains(res.stdout, `web ↔ tools/call lookup {"topic":"answer"} → "42"`) {
				t.Errorf("%d exchanges with the server recorded; show lacks the call:\n%s", mcp, clip(res.stdout, 8000))
			}
			web.Close()
			l.replayEqual(s.session, claudeFlags("--requests", "fail")...)
			if n := calls(); n != 1 {
				t.Errorf("after the replays the server logged %d tools/call, want the 1 recorded", n)
			}
		})
	}
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// mcpFilesystem is the npm filesystem MCP server, given to the agents as
// an editor gives its MCP servers.
var mcpFilesystem = &agentBin{
	envVar: "ACPTAP_MCP_FILESYSTEM",
	pkg:    "@modelcontextprotocol/server-filesystem",
	check: func(path string) error {
		cmd := exec.Command(path, os.TempDir())
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n")
		out, _ := cmd.Output()
		if !strings.Contains(string(out), `"list_allowed_directories"`) {
			return fmt.Errorf("it does not answer tools/list as the filesystem server: %q", clip(string(out), 200))
		}
		return nil
	},
}

// TestClaudeMCPFilesystem: claude-agent-acp given the npm filesystem MCP
// server in session/new, its scripted model calling the server's
// list_allowed_directories: recorded by the proxy route (both with
// ACPTAP_E2E_ALL_ROUTES=1) and replayed 5 times green under --requests fail with the server gone (its command a script
// removed before the replays), served from the recording.
func TestClaudeMCPFilesystem(t *testing.T) {
	t.Parallel()
	for _, r := range routesOf(proxyRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newClaudeLab(t)
			fs := mcpFilesystem.need(t)
			server := filepath.Join(l.dir, "fs-server")
			if err := os.WriteFile(server, []byte("#!/bin/sh\nexec "+strconv.Quote(fs)+" \"$@\"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			// The server allows the session's directory, where the agent
			// starts it.
			servers, _ := json.Marshal([]map[string]any{{"name": "fs", "command": server, "args": []string{"."}, "env": []any{}}})
			sc := claudeScenario{prompts: []string{"Please list the allowed directories"}, editor: []string{"--mcp-servers", string(servers)}, env: []string{"ENABLE_TOOL_SEARCH=false"}}
			s := l.recordClaude("fs", r, sc, fakeanthropic.Options{})
			if !strings.Contains(s.answers, fakeanthropic.LookupAnswer("")) || !strings.Contains(s.answers, "Allowed directories:") {
				t.Fatalf("the editor got %q, want the server's allowed directories in it (the fake answered %q)", s.answers, s.steps)
			}
			res := l.run(l.dir, l.env(""), filepath.Join(binDir, "acptap"), "show", "--store", l.store, "fs")
			if !strings.Contains(res.stdout, "fs → request  tools/call") || !strings.Contains(res.stdout, "list_allowed_directories") {
				t.Errorf("show lacks the MCP call:\n%s", clip(res.stdout, 8000))
			}
			if err := os.Remove(server); err != nil {
				t.Fatal(err)
			}
			l.replayEqual(s.session, claudeFlags("--requests", "fail")...)
		})
	}
}

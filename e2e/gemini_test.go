package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/fakellm"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/testing/fakegemini"
	"github.com/acptap/acptap/normalize"
)

const (
	// geminiModel is the model the sessions are recorded with (-m), and
	// geminiOtherModel the one of the "another model" change.
	geminiModel      = "gemini-2.5-flash"
	geminiOtherModel = "gemini-2.5-pro"
	// geminiKey is GEMINI_API_KEY, long enough for acptap to treat it as
	// a secret to mask.
	geminiKeyVar = "GEMINI_API_KEY"
	geminiKey    = "fake-gemini-key-8c41d9e07b"
	// geminiBaseURLVar is gemini-cli's base-URL variable.
	geminiBaseURLVar = "GOOGLE_GEMINI_BASE_URL"
)

// gemini is gemini-cli, @google/gemini-cli, run as `gemini --acp`.
var gemini = &agentBin{
	envVar: "ACPTAP_GEMINI_CLI",
	pkg:    "@google/gemini-cli",
	check: func(path string) error {
		out, err := commandOutput(path, "--version")
		if err != nil {
			return err
		}
		if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+\S*\n?$`).MatchString(out) {
			return fmt.Errorf("it does not look like gemini-cli: --version printed %q", clip(out, 200))
		}
		return nil
	},
}

// newGeminiLab returns a lab for gemini-cli: the API key in
// GEMINI_API_KEY, HOME in the session's home.
func newGeminiLab(t *testing.T) *lab {
	gemini.need(t) // sets gemini.path, which geminiAgent reads
	l := newLab(t)
	l.secrets = []string{geminiKey}
	l.agentEnv = func(string) []string { return []string{geminiKeyVar + "=" + geminiKey} }
	return l
}

// A geminiScenario is what the editor does and how gemini-cli is run.
type geminiScenario struct {
	prompts    []string
	cancelText int    // testeditor --cancel-after-text
	model      string // -m; empty for geminiModel
	yolo       bool   // --approval-mode yolo: tools run without asking
	// context, when not empty, is the workspace's GEMINI.md, which
	// gemini-cli quotes in its first request.
	context string
}

func (s geminiScenario) modelName() string {
	if s.model != "" {
		return s.model
	}
	return geminiModel
}

// geminiSettings is the workspace's .gemini/settings.json: the API-key
// auth type (else gemini-cli picks its "gateway" auth from
// GOOGLE_GEMINI_BASE_URL, or none on the proxy route), no usage
// statistics (else it posts them to play.googleapis.com) and no skills:
// its two built-in skills are listed in the system instruction in the
// order its glob of their directory finds them, which varies from run to
// run. maxAttempts, when not zero, bounds its tries of a chat request
// (default 10).
func geminiSettings(maxAttempts int) []byte {
	s := map[string]any{
		"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":  map[string]any{"usageStatisticsEnabled": false},
		"skills":   map[string]any{"enabled": false},
	}
	if maxAttempts > 0 {
		s["general"] = map[string]any{"maxAttempts": maxAttempts}
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	return append(b, '\n')
}

// writeGeminiWorkspace puts the settings with maxAttempts into the
// workspace ws, and context, if not empty, into its GEMINI.md.
func writeGeminiWorkspace(ws string, maxAttempts int, context string) error {
	dir := filepath.Join(ws, ".gemini")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if context != "" {
		if err := os.WriteFile(filepath.Join(ws, "GEMINI.md"), []byte(context), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "settings.json"), geminiSettings(maxAttempts), 0o644)
}

// geminiAgent returns the agent command for the route, with the fake at
// fakeURL. GEMINI_CLI_TRUST_WORKSPACE makes gemini-cli read the
// workspace's settings (it ignores those of an untrusted folder), and
// GEMINI_CLI_NO_RELAUNCH keeps it one process (by default it starts a
// second node with a larger heap, and the first ignores SIGTERM). On the
// proxy route GOOGLE_GEMINI_BASE_URL names the HTTPS fake; on the
// base-URL route acptap sets it.
func (r route) geminiAgent(fakeURL string, s geminiScenario) []string {
	argv := []string{"env", "GEMINI_CLI_NO_RELAUNCH=true", "GEMINI_CLI_TRUST_WORKSPACE=true"}
	if r.tls {
		argv = append(argv, geminiBaseURLVar+"="+fakeURL)
	}
	argv = append(argv, gemini.path, "--acp", "-m", s.modelName())
	if s.yolo {
		argv = append(argv, "--approval-mode", "yolo")
	}
	return argv
}

// A geminiSession is a recorded gemini-cli session and what the fake saw.
type geminiSession struct {
	*session
	scenario geminiScenario
	requests []fakegemini.Request
}

// recordGemini records a session of scenario sc by route r: the scripted
// editor drives `acptap record --snapshot -- gemini --acp ...` in a
// workspace holding the settings, against a fresh fake upstream, which is
// closed when recordGemini returns. The snapshot gives the replays the
// workspace and its settings.
func (l *lab) recordGemini(name string, r route, sc geminiScenario, opts fakegemini.Options) *geminiSession {
	l.t.Helper()
	var fake *fakegemini.Listener
	if r.tls {
		var err error
		if fake, err = fakegemini.StartTLS(opts, l.dir); err != nil {
			l.t.Fatal(err)
		}
	} else {
		fake = fakegemini.Start(opts)
	}
	defer fake.Close()
	gs := &geminiSession{scenario: sc}
	var editor []string
	if sc.cancelText > 0 {
		editor = []string{"--cancel-after-text", strconv.Itoa(sc.cancelText)}
	}
	gs.session = l.record(take{
		name:        name,
		route:       r,
		prompts:     sc.prompts,
		editor:      editor,
		recordFlags: append(r.recordFlags(fake.URL, fake.CAFile, geminiBaseURLVar), "--snapshot"),
		agent:       r.geminiAgent(fake.URL, sc),
		setup:       func(s *session) error { return writeGeminiWorkspace(s.ws, 0, sc.context) },
		steps: func() []string {
			gs.requests = fake.Requests()
			var out []string
			for _, r := range gs.requests {
				out = append(out, r.Step)
			}
			return out
		},
		llmURL: func(url string) bool { return strings.Contains(url, "/v1beta/models/"+sc.modelName()+":") },
	}, fake.URL)
	// gemini-cli sends the key in a header, which acptap masks, never
	// in a ?key= query.
	for i, r := range gs.requests {
		if got := r.Header.Get("X-Goog-Api-Key"); got != geminiKey || strings.Contains(r.RawQuery, "key=") {
			l.t.Errorf("request %d, %s %s?%s: x-goog-api-key %q, want the key %q in that header and not in the query", i+1, r.Method, r.Path, r.RawQuery, got, geminiKey)
		}
	}
	return gs
}

// geminiWorkspace returns a new directory holding the settings with
// maxAttempts and context as its GEMINI.md: a changed project, for replay
// --workspace.
func (l *lab) geminiWorkspace(maxAttempts int, context string) string {
	l.t.Helper()
	dir, err := os.MkdirTemp(l.dir, "workspace-")
	if err == nil {
		err = writeGeminiWorkspace(dir, maxAttempts, context)
	}
	if err != nil {
		l.t.Fatal(err)
	}
	return dir
}

// geminiSilence is replay's --timeout for gemini-cli: it loads a 16 MB
// bundle before it answers initialize, which on a loaded machine has
// taken longer than replay's default 30s of silence.
const geminiSilence = "90s"

// geminiReplay replays a gemini-cli recording.
func (l *lab) geminiReplay(s *geminiSession, args ...string) result {
	l.t.Helper()
	return l.replay(s.name, append([]string{"--timeout", geminiSilence}, args...)...)
}

// geminiReplayEqual is replayEqual for gemini-cli.
func (l *lab) geminiReplayEqual(s *geminiSession, args ...string) {
	l.t.Helper()
	l.replayEqual(s.session, append([]string{"--timeout", geminiSilence}, args...)...)
}

// replayGemini replays a gemini-cli recording with the agent command of
// scenario sc.
func (l *lab) replayGemini(s *geminiSession, sc geminiScenario, args ...string) result {
	l.t.Helper()
	return l.geminiReplay(s, append(append(args, "--"), s.route.geminiAgent(s.fakeURL, sc)...)...)
}

func TestGeminiPlainAnswer(t *testing.T) {
	for _, r := range routesOf(proxyRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newGeminiLab(t)
			prompt := "Say hi"
			sc := geminiScenario{prompts: []string{prompt}, context: "Answer in English.\n"}
			s := l.recordGemini("plain", r, sc, fakegemini.Options{})
			if got, want := s.answers, fakellm.Answer(prompt)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got, want := s.stopReasons(), []string{"end_turn"}; !slices.Equal(got, want) {
				t.Errorf("stop reasons %q, want %q", got, want)
			}
			if got, want := s.steps, []string{"text"}; !slices.Equal(got, want) {
				t.Fatalf("the fake answered %q, want %q", got, want)
			}
			if bytes.Contains(s.requests[0].Body, []byte("<name>skill-creator</name>")) {
				t.Errorf("with skills off, the request still lists skills:\n%s", clip(string(s.requests[0].Body), 3000))
			}
			if !bytes.Contains(s.requests[0].Body, []byte("Answer in English.")) {
				t.Errorf("the request does not carry the workspace's GEMINI.md:\n%s", clip(string(s.requests[0].Body), 3000))
			}
			// The date, HOME, the workspace and its listing are in the
			// first request; normalized, they equal the replay's.
			l.geminiReplayEqual(s, "--requests", "fail")

			// A changed agent: another model is another queue of
			// exchanges, which the recording cannot answer.
			changed := s.scenario
			changed.model = geminiOtherModel
			res := l.replayGemini(s, changed)
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL plain:") ||
				!strings.Contains(res.stdout, "no recorded exchange") || !strings.Contains(res.stdout, geminiOtherModel) {
				t.Errorf("replay with -m %s: got %s\nwant exit 1, FAIL and the request of model %s that has no recorded exchange", geminiOtherModel, clip(res.String(), 6000), geminiOtherModel)
			}

			// A changed prompt: the project's GEMINI.md, which gemini-cli
			// quotes in its first request, says something else.
			res = l.geminiReplay(s, "--requests", "fail", "--workspace", l.geminiWorkspace(0, "Answer in French.\n"))
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL plain: llm #1: the request differs from the recording at $.body.contents[0].parts[0].text") ||
				!strings.Contains(res.stdout, `recorded …"`) || !strings.Contains(res.stdout, "Answer in English.") || !strings.Contains(res.stdout, "Answer in French.") {
				t.Errorf("replay with another GEMINI.md: got %s\nwant exit 1 and the first request's difference, quoting both instructions", clip(res.String(), 6000))
			}
		})
	}
}

func TestGeminiShellTool(t *testing.T) {
	for _, r := range routesOf(baseURLRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newGeminiLab(t)
			s := l.recordGemini("shell", r, geminiScenario{prompts: []string{"Please run the command"}}, fakegemini.Options{})
			if got, want := s.answers, "I will run the command."+fakellm.ToolAnswer(fakegemini.ShellOutput, fakegemini.ShellOutput)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got, want := s.agentRequests(), []string{"session/request_permission"}; !slices.Equal(got, want) {
				t.Errorf("the agent sent the requests %q, want %q", got, want)
			}
			if got, want := s.steps, []string{"shell", "tool-answer"}; !slices.Equal(got, want) {
				t.Fatalf("the fake answered %q, want %q", got, want)
			}
			if !slices.Contains(s.requests[0].Tools, fakegemini.ShellTool) {
				t.Errorf("gemini-cli offered the tools %q, want %s among them", s.requests[0].Tools, fakegemini.ShellTool)
			}
			if out := s.requests[1].Body; !bytes.Contains(out, []byte(`"functionResponse"`)) || !bytes.Contains(out, []byte(fakegemini.ShellOutput)) {
				t.Errorf("the second request does not carry the command's output %q:\n%s", fakegemini.ShellOutput, clip(string(out), 3000))
			}
			if _, err := os.Stat(filepath.Join(s.ws, "ran.txt")); err != nil {
				t.Errorf("the command did not run in the session's cwd: %v", err)
			}
			// The command's output, in the second request, ends with its
			// process group id ("Process Group PGID: 6726"), which the
			// default normalization covers: the replay is green with
			// --requests fail before any calibration, and calibrate finds
			// nothing that varies.
			l.geminiReplayEqual(s, "--requests", "fail")
			res := l.run(l.dir, l.env(""), filepath.Join(binDir, "acptap"), "calibrate", "--store", l.store, "--grace", grace, "--timeout", geminiSilence, "--runs", "2", s.name)
			if res.code != 0 || !strings.HasPrefix(res.stdout, "CALIBRATED shell (2 runs): nothing varies; no rules") {
				t.Fatalf("acptap calibrate: got %s\nwant exit 0 and no rules", clip(res.String(), 6000))
			}

			// A changed agent: one that no longer asks before running a
			// command.
			changed := s.scenario
			changed.yolo = true
			res = l.replayGemini(s, changed)
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL shell:") ||
				!strings.Contains(res.stdout, "the agent did not send session/request_permission #1") ||
				!strings.Contains(res.stdout, "--- recorded") || !strings.Contains(res.stdout, `-  "method": "session/request_permission"`) {
				t.Errorf("replay with --approval-mode yolo: got %s\nwant exit 1, FAIL and a diff that loses the permission request", clip(res.String(), 8000))
			}
		})
	}
}

func TestGeminiTwoPrompts(t *testing.T) {
	for _, r := range routesOf(proxyRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newGeminiLab(t)
			prompts := []string{"Say hi", "Say bye"}
			s := l.recordGemini("two", r, geminiScenario{prompts: prompts}, fakegemini.Options{})
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
			if first, _ := json.Marshal(fakellm.Answer(prompts[0])); !bytes.Contains(s.requests[1].Body, first[1:len(first)-1]) {
				t.Errorf("the second request does not carry the first answer %s", first)
			}
			l.geminiReplayEqual(s, "--requests", "fail")
		})
	}
}

func TestGeminiCancel(t *testing.T) {
	for _, r := range routesOf(baseURLRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newGeminiLab(t)
			// The fake streams SlowChunks chunks, 50ms apart, then holds
			// the response open until the agent leaves, so the turn can
			// end only by the cancel. The editor cancels once it has all
			// the chunks: counting message chunks only, since gemini-cli's
			// available_commands_update comes before or after the prompt.
			sc := geminiScenario{prompts: []string{"Answer slowly"}, cancelText: fakegemini.SlowChunks}
			s := l.recordGemini("cancel", r, sc, fakegemini.Options{Delay: 50 * time.Millisecond})
			if got, want := s.stopReasons(), []string{"cancelled"}; !slices.Equal(got, want) {
				t.Errorf("stop reasons %q, want %q", got, want)
			}
			if got, want := s.steps, []string{"slow"}; !slices.Equal(got, want) {
				t.Errorf("the fake answered %q, want %q", got, want)
			}
			if !s.sentCancel() {
				t.Errorf("the editor never sent session/cancel")
			}
			l.geminiReplayEqual(s, "--requests", "fail")
		})
	}
}

func TestGeminiFaults(t *testing.T) {
	for _, r := range routesOf(baseURLRoute) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newGeminiLab(t)
			prompt := "Say hi"
			// The first request gets the 429 of a server out of capacity
			// for the model, which gemini-cli retries after the
			// RetryInfo's delay (any other 429 or 5xx after 5s or more).
			s := l.recordGemini("faults", r, geminiScenario{prompts: []string{prompt}},
				fakegemini.Options{Faults: []int{429}, NoCapacity: true, RetryDelay: 100 * time.Millisecond})
			if got, want := s.answers, fakellm.Answer(prompt)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got, want := s.steps, []string{"fault", "text"}; !slices.Equal(got, want) {
				t.Fatalf("the fake answered %q, want %q", got, want)
			}
			// The recorded 429 answers the first try, the recorded answer
			// the retry, which is the same request.
			l.geminiReplayEqual(s, "--requests", "fail")

			// The control: with one attempt allowed, the 429 ends the
			// turn, so the replays above did meet it.
			res := l.geminiReplay(s, "--workspace", l.geminiWorkspace(1, ""))
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL faults:") || !strings.Contains(res.stdout, "was recorded but never requested") {
				t.Errorf("replay with maxAttempts 1: got %s\nwant exit 1 and the recorded answer never requested", clip(res.String(), 6000))
			}

			// A 503 injected in place of the recorded answer: gemini-cli
			// retries it too (after its 5s backoff), and the recorded
			// answer answers the retry.
			res = l.geminiReplay(s, "--requests", "fail", "--fault", "2=status:503")
			if want := "PASS faults ("; res.code != 0 || !strings.HasPrefix(res.stdout, want) || !strings.Contains(res.stdout, fmt.Sprintf(" %d LLM exchanges served", s.exchanges)) {
				t.Errorf("replay with a 503 on llm #2: got %s\nwant exit 0 and a PASS with %d exchanges served", clip(res.String(), 6000), s.exchanges)
			}
		})
	}
}

// TestGeminiRunsNormalizeEqual records the same session twice and checks
// that acptap's default normalization makes the two runs' agent output and
// LLM requests equal: whatever gemini-cli varies from run to run (the
// session id, the toolCallId it makes from the clock, the date, HOME, the
// workspace, the process group id in the shell tool's output, ...) must be
// covered by the default rules.
func TestGeminiRunsNormalizeEqual(t *testing.T) {
	l := newGeminiLab(t)
	sc := geminiScenario{prompts: []string{"Please run the command", "Say bye"}}
	a := l.recordGemini("run-a", proxyRoute, sc, fakegemini.Options{})
	b := l.recordGemini("run-b", proxyRoute, sc, fakegemini.Options{})
	ea, _ := l.show(a.name)
	eb, _ := l.show(b.name)
	opts := func(s *geminiSession) normalize.Options {
		return normalize.Options{Cwd: []string{s.ws}, Home: []string{s.home}, Tmp: []string{os.TempDir()}}
	}

	transcript := func(s *geminiSession, events []event) *normalize.Transcript {
		var frames []lane.Line
		for _, e := range events {
			if e.Lane == "agent" && strings.TrimSpace(e.Raw) != "" {
				frames = append(frames, lane.Line{Lane: lane.Agent, Data: []byte(e.Raw)})
			}
		}
		return normalize.New(opts(s)).Transcript(frames)
	}
	if d := normalize.Compare(transcript(a, ea), transcript(b, eb)).Diff; d != nil {
		t.Errorf("the normalized agent output of two runs differs in turn %d, %s, value %d, at %s: %s vs %s", d.Turn, d.Stream, d.Index, d.Path, brief(d.Recorded), brief(d.Live))
	}

	xa, xb := llm(ea), llm(eb)
	if len(xa) != len(xb) {
		t.Fatalf("%d and %d LLM exchanges", len(xa), len(xb))
	}
	na, nb := normalize.New(opts(a)), normalize.New(opts(b))
	var differ []string
	for i := range xa {
		ra := na.Request(xa[i].Method, xa[i].URL, xa[i].RequestHeaders, []byte(xa[i].RequestBody))
		rb := nb.Request(xb[i].Method, xb[i].URL, xb[i].RequestHeaders, []byte(xb[i].RequestBody))
		for _, m := range normalize.Mismatches(ra, rb) {
			differ = append(differ, fmt.Sprintf("llm #%d at %s: %s vs %s", i+1, m.Path, brief(m.Recorded), brief(m.Live)))
		}
	}
	if len(differ) > 0 {
		t.Errorf("the normalized requests of two runs differ: %s", strings.Join(differ, "; "))
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/fakeanthropic"
	"github.com/acptap/acptap/internal/testing/fakellm"
)

// qwen is qwen-code (npm @qwen-code/qwen-code), run as `qwen --acp`.
var qwen = &agentBin{
	envVar: "ACPTAP_QWEN_CODE",
	pkg:    "@qwen-code/qwen-code",
	check: func(path string) error {
		out, err := commandOutput(path, "--version")
		if err != nil {
			return err
		}
		if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+\S*\n?$`).MatchString(out) {
			return fmt.Errorf("it does not look like qwen-code: --version printed %q", clip(out, 200))
		}
		return nil
	},
}

// qwenSettings is the workspace's .qwen/settings.json: the Anthropic
// API (its key from ANTHROPIC_API_KEY, its base URL from
// ANTHROPIC_BASE_URL), and off what qwen-code does besides the turn: the
// usage statistics it posts to Alibaba Cloud's RUM, the managed memory
// extraction and consolidation subagents it runs after a turn (more
// requests to the model, racing the session's end), the suggestion of
// the user's next prompt it asks the model for, and the update check.
const qwenSettings = `{
  "security": {"auth": {"selectedType": "anthropic"}},
  "privacy": {"usageStatisticsEnabled": false},
  "memory": {"enableManagedAutoMemory": false, "enableManagedAutoDream": false},
  "ui": {"enableFollowupSuggestions": false},
  "general": {"disableAutoUpdate": true}
}
`

// A qwenScenario is what the editor does and how qwen-code is run.
type qwenScenario struct {
	prompts []string
	// approval is --approval-mode: "default" (asks before running a
	// command) unless set. In ACP its default is "auto", which asks the
	// model to classify each command first.
	approval string
	// context, when not empty, is the workspace's QWEN.md.
	context string
}

func (sc qwenScenario) workspace(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, ".qwen"), 0o755); err != nil {
		return err
	}
	if sc.context != "" {
		if err := os.WriteFile(filepath.Join(dir, "QWEN.md"), []byte(sc.context), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, ".qwen", "settings.json"), []byte(qwenSettings), 0o644)
}

// qwenAgent returns the agent command for route r with the fake at
// fakeURL: on the proxy route ANTHROPIC_BASE_URL names the HTTPS fake; on
// the base-URL route acptap sets it.
func qwenAgent(r route, fakeURL string, sc qwenScenario) []string {
	approval := sc.approval
	if approval == "" {
		approval = "default"
	}
	argv := []string{"env"}
	if r.tls {
		argv = append(argv, anthropicBaseURLVar+"="+fakeURL)
	}
	return append(argv, qwen.path, "--acp", "-m", anthropicModel, "--approval-mode", approval)
}

func (l *lab) recordQwen(name string, r route, sc qwenScenario, opts fakeanthropic.Options) *anthropicSession {
	l.t.Helper()
	// qwen-code sends an available_commands_update when it has loaded
	// its skills, which may be a moment after the first turn: an editor
	// that stays open gets it, as the replays do.
	return l.recordAnthropic(name, r, sc.prompts, []string{"--linger", "3s"},
		func(s *session) error { return sc.workspace(s.ws) },
		func(url string) []string { return qwenAgent(r, url, sc) },
		opts)
}

// qwenTurnDelay is how long the fake waits before it answers a plain
// turn of qwen-code (see TestQwenPlainAnswer).
const qwenTurnDelay = 2 * time.Second

func TestQwenPlainAnswer(t *testing.T) {
	needExtra(t)
	t.Parallel()
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newAnthropicLab(t, qwen)
			prompt := "Say hi"
			sc := qwenScenario{prompts: []string{prompt}, context: "Answer in English.\n"}
			// qwen-code sends its available_commands_update once it has
			// loaded its skills, about a second after it starts: after a
			// quick turn's end, racing the session's end, which a replay
			// reaches sooner or later than the recording did. The fake
			// answers after qwenTurnDelay, and the replays keep the
			// recorded timing, for the update to land in the turn.
			s := l.recordQwen("plain", r, sc, fakeanthropic.Options{TurnDelay: qwenTurnDelay})
			if got, want := s.answers, fakellm.Answer(prompt)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got, want := s.stopReasons(), []string{"end_turn"}; !slices.Equal(got, want) {
				t.Errorf("stop reasons %q, want %q", got, want)
			}
			if got, want := s.steps, []string{"text"}; !slices.Equal(got, want) {
				t.Errorf("the fake answered %q, want %q", got, want)
			}
			// Calibrated at the recorded pace too, the runs agree with the
			// recording: nothing varies.
			res := l.run(l.dir, l.env(""), filepath.Join(binDir, "acptap"), "calibrate", "--store", l.store, "--grace", grace, "--speed", "1", "--runs", "3", s.name)
			if res.code != 0 || !strings.HasPrefix(res.stdout, "CALIBRATED plain (3 runs): nothing varies") {
				t.Errorf("acptap calibrate --speed 1: got %s\nwant exit 0 and nothing varying", clip(res.String(), 4000))
			}
			l.replayEqual(s.session, "--requests", "fail", "--speed", "1")

			// A changed prompt: the project's QWEN.md says something
			// else.
			changed := sc
			changed.context = "Answer in French.\n"
			ws := filepath.Join(l.dir, "ws-changed")
			if err := changed.workspace(ws); err != nil {
				t.Fatal(err)
			}
			res = l.replay(s.name, "--requests", "fail", "--workspace", ws)
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL plain:") ||
				!strings.Contains(res.stdout, "the request differs from the recording") || !strings.Contains(res.stdout, "Answer in French.") {
				t.Errorf("replay with another QWEN.md: got %s\nwant exit 1, FAIL and the request that differs by it", clip(res.String(), 6000))
			}
		})
	}
}

func TestQwenShellTool(t *testing.T) {
	needExtra(t)
	t.Parallel()
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newAnthropicLab(t, qwen)
			sc := qwenScenario{prompts: []string{"Please run the command"}}
			s := l.recordQwen("shell", r, sc, fakeanthropic.Options{})
			if got, want := s.answers, fakeanthropic.ToolPreamble+fakellm.ToolAnswer(fakeanthropic.BashOutput, fakeanthropic.BashOutput)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got := s.agentRequests(); !slices.Contains(got, "session/request_permission") {
				t.Errorf("the agent sent the requests %q, want session/request_permission among them", got)
			}
			if got, want := s.steps, []string{"bash", "tool-answer"}; !slices.Equal(got, want) {
				t.Fatalf("the fake answered %q, want %q", got, want)
			}
			if _, err := os.Stat(filepath.Join(s.ws, "ran.txt")); err != nil {
				t.Errorf("the command did not run in the session's cwd: %v", err)
			}
			var in struct {
				Messages []json.RawMessage `json:"messages"`
			}
			json.Unmarshal(s.requests[1].Body, &in)
			if len(in.Messages) == 0 || !strings.Contains(string(in.Messages[len(in.Messages)-1]), "Process Group PGID: ") {
				t.Fatalf("the second request does not end with the shell's output and its PGID:\n%s", clip(string(s.requests[1].Body), 3000))
			}
			// The command's output ends with its process group id, which
			// the default normalization covers; calibrate learns what
			// else varies (craft/drainMidTurnQueue, a request qwen-code
			// sends after a tool in some runs only), if anything.
			res := l.run(l.dir, l.env(""), filepath.Join(binDir, "acptap"), "calibrate", "--store", l.store, "--grace", grace, "--runs", "4", s.name)
			if res.code != 0 || !strings.HasPrefix(res.stdout, "CALIBRATED shell (") || strings.Contains(res.stdout, "PGID") {
				t.Fatalf("acptap calibrate: got %s\nwant exit 0 and no PGID rule", clip(res.String(), 6000))
			}
			l.replayEqual(s.session, "--requests", "fail")

			// A changed agent: one that no longer asks before running a
			// command.
			changed := sc
			changed.approval = "yolo"
			res = l.replay(s.name, append([]string{"--"}, qwenAgent(r, s.fakeURL, changed)...)...)
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL shell:") ||
				!strings.Contains(res.stdout, "the agent did not send session/request_permission #1") {
				t.Errorf("replay with --approval-mode yolo: got %s\nwant exit 1, FAIL and the permission request lost", clip(res.String(), 8000))
			}
		})
	}
}

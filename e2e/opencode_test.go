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

	"github.com/acptap/acptap/internal/testing/fakeanthropic"
	"github.com/acptap/acptap/internal/testing/fakellm"
)

// opencode is opencode (npm opencode-ai), run as `opencode acp`.
var opencode = &agentBin{
	envVar: "ACPTAP_OPENCODE",
	pkg:    "opencode-ai",
	check: func(path string) error {
		out, err := commandOutput(path, "--version")
		if err != nil {
			return err
		}
		if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+\S*\n?$`).MatchString(out) {
			return fmt.Errorf("it does not look like opencode: --version printed %q", clip(out, 200))
		}
		return nil
	},
}

// opencodeVersion is the version of opencode-ai that e2e/install.sh pins:
// the version of @opencode-ai/plugin that opencode installs into its
// configuration directory unless a package-lock.json there names it.
const opencodeVersion = "1.18.33"

// An opencodeScenario is what the editor does and how opencode is
// configured.
type opencodeScenario struct {
	prompts []string
	// bash is the permission of the bash tool: "ask" (the default here)
	// or "allow".
	bash string
	// agentsMD, when not empty, is the workspace's AGENTS.md, which
	// opencode quotes in its system prompt.
	agentsMD string
}

// opencodeWorkspace writes the scenario's project into dir:
//
//   - opencode.json: the model, the anthropic provider's base URL from
//     ANTHROPIC_BASE_URL (opencode's {env:} substitution), the bash
//     permission, no autoupdate and no sharing;
//   - .config/opencode, the configuration directory (XDG_CONFIG_HOME is
//     the workspace's .config, see opencodeAgent), with a node_modules
//     and a package-lock.json naming @opencode-ai/plugin: without them
//     opencode installs the plugin package with npm at every start, some
//     30 requests to the npm registry;
//   - AGENTS.md, if the scenario has one.
func (sc opencodeScenario) workspace(dir string) error {
	bash := sc.bash
	if bash == "" {
		bash = "ask"
	}
	cfg := map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"model":      "anthropic/" + anthropicModel,
		"autoupdate": false,
		"share":      "disabled",
		"permission": map[string]any{"bash": bash},
		"provider": map[string]any{"anthropic": map[string]any{"options": map[string]any{
			"baseURL": "{env:" + anthropicBaseURLVar + "}/v1",
		}}},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	conf := filepath.Join(dir, ".config", "opencode")
	lock := fmt.Sprintf(`{"packages":{"":{"dependencies":{"@opencode-ai/plugin":%q}}}}`+"\n", opencodeVersion)
	files := map[string]string{
		filepath.Join(dir, "opencode.json"):          string(b) + "\n",
		filepath.Join(conf, "package-lock.json"):     lock,
		filepath.Join(conf, "node_modules", ".keep"): "",
		filepath.Join(dir, "AGENTS.md"):              sc.agentsMD,
	}
	for path, content := range files {
		if content == "" && filepath.Base(path) == "AGENTS.md" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// opencodeAgent returns the agent command for route r with the fake at
// fakeURL: a shell that makes the workspace's .config the configuration
// home (the replay's HOME is empty, its workspace the snapshot), then
// opencode with the models.dev fetch and the autoupdate off. On the
// proxy route ANTHROPIC_BASE_URL names the HTTPS fake; on the base-URL
// route acptap sets it.
func opencodeAgent(r route, fakeURL string) []string {
	argv := []string{"sh", "-c", `export XDG_CONFIG_HOME="$PWD/.config"; exec "$@"`, "sh",
		"env", "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1"}
	if r.tls {
		argv = append(argv, anthropicBaseURLVar+"="+fakeURL)
	}
	return append(argv, opencode.path, "acp")
}

func (l *lab) recordOpencode(name string, r route, sc opencodeScenario) *anthropicSession {
	l.t.Helper()
	return l.recordAnthropic(name, r, sc.prompts, nil,
		func(s *session) error { return sc.workspace(s.ws) },
		func(url string) []string { return opencodeAgent(r, url) },
		fakeanthropic.Options{})
}

// opencodeWorkspace returns a new directory holding the project of sc,
// for replay --workspace.
func (l *lab) opencodeWorkspace(sc opencodeScenario) string {
	l.t.Helper()
	dir, err := os.MkdirTemp(l.dir, "workspace-")
	if err == nil {
		err = sc.workspace(dir)
	}
	if err != nil {
		l.t.Fatal(err)
	}
	return dir
}

func TestOpencodePlainAnswer(t *testing.T) {
	needExtra(t)
	t.Parallel()
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newAnthropicLab(t, opencode)
			prompt := "Say hi"
			sc := opencodeScenario{prompts: []string{prompt}}
			s := l.recordOpencode("plain", r, sc)
			if got, want := s.answers, fakellm.Answer(prompt)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got, want := s.stopReasons(), []string{"end_turn"}; !slices.Equal(got, want) {
				t.Errorf("stop reasons %q, want %q", got, want)
			}
			// The turn, and the session's title asked of the small model
			// at once, in a queue of its own.
			if got, want := s.stepsOf(anthropicModel), []string{"text"}; !slices.Equal(got, want) {
				t.Errorf("the fake answered the turns %q, want %q", got, want)
			}
			if len(s.steps) != 2 {
				t.Errorf("the fake answered %q, want the turn and the title", s.steps)
			}
			l.replayEqual(s.session, "--requests", "fail")

			// A changed prompt: an AGENTS.md in the workspace, which
			// opencode quotes to the model.
			changed := sc
			changed.agentsMD = "Always answer in French.\n"
			res := l.replay(s.name, "--requests", "fail", "--workspace", l.opencodeWorkspace(changed))
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL plain:") ||
				!strings.Contains(res.stdout, "the request differs from the recording") || !strings.Contains(res.stdout, "Instructions from: <cwd>/AGENTS.md") {
				t.Errorf("replay with an AGENTS.md: got %s\nwant exit 1, FAIL and the request that differs by the AGENTS.md", clip(res.String(), 6000))
			}
		})
	}
}

func TestOpencodeBashTool(t *testing.T) {
	needExtra(t)
	t.Parallel()
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			l := newAnthropicLab(t, opencode)
			sc := opencodeScenario{prompts: []string{"Please run the command"}}
			s := l.recordOpencode("bash", r, sc)
			if got, want := s.answers, fakeanthropic.ToolPreamble+fakellm.ToolAnswer(fakeanthropic.BashOutput, fakeanthropic.BashOutput)+"\n"; got != want {
				t.Errorf("the editor got the answer %q, want %q", got, want)
			}
			if got, want := s.agentRequests(), []string{"session/request_permission"}; !slices.Equal(got, want) {
				t.Errorf("the agent sent the requests %q, want %q", got, want)
			}
			if got, want := s.stepsOf(anthropicModel), []string{"bash", "tool-answer"}; !slices.Equal(got, want) {
				t.Fatalf("the fake answered the turns %q, want %q", got, want)
			}
			if _, err := os.Stat(filepath.Join(s.ws, "ran.txt")); err != nil {
				t.Errorf("the command did not run in the session's cwd: %v", err)
			}
			l.replayEqual(s.session, "--requests", "fail")

			// A changed agent: one that no longer asks before running a
			// command.
			changed := sc
			changed.bash = "allow"
			res := l.replay(s.name, "--workspace", l.opencodeWorkspace(changed))
			if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL bash:") ||
				!strings.Contains(res.stdout, "the agent did not send session/request_permission #1") {
				t.Errorf("replay with the bash permission allow: got %s\nwant exit 1, FAIL and the permission request lost", clip(res.String(), 8000))
			}
		})
	}
}

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/fakeanthropic"
	"github.com/acptap/acptap/internal/testing/fakegemini"
	"github.com/acptap/acptap/internal/testing/fakeresponses"
)

// matrixEnv opts into TestAgentMatrix (scripts/agent-matrix): long, and
// CPU-hungry while it records on a busy machine; run it alone.
const matrixEnv = "ACPTAP_E2E_MATRIX"

// A matrixAgent is one agent configuration of the matrix: how to record
// its plain and tool turns by a route, and the replay flags it needs.
type matrixAgent struct {
	name   string
	bin    *agentBin
	lab    func(t *testing.T) *lab
	record func(l *lab, name string, r route, tool bool) *session
	// flags are replay's and calibrate's flags.
	flags func(tool bool) []string
}

var matrixAgents = []matrixAgent{
	{
		name: "claude-agent-acp", bin: claude, lab: newClaudeLab,
		record: func(l *lab, name string, r route, tool bool) *session {
			p := claudeHello
			if tool {
				p = claudeRun
			}
			return l.recordClaude(name, r, claudeScenario{prompts: []string{p}}, fakeanthropic.Options{}).session
		},
		flags: func(bool) []string { return claudeFlags() },
	},
	{
		name: "gemini-cli", bin: gemini, lab: newGeminiLab,
		record: func(l *lab, name string, r route, tool bool) *session {
			p := "Say hi"
			if tool {
				p = "Please run the command"
			}
			return l.recordGemini(name, r, geminiScenario{prompts: []string{p}}, fakegemini.Options{}).session
		},
		flags: func(bool) []string { return []string{"--timeout", geminiSilence} },
	},
	codexMatrixAgent("codex-acp (WebSockets on)", true),
	codexMatrixAgent("codex-acp (WebSockets off)", false),
	{
		name: "opencode", bin: opencode, lab: func(t *testing.T) *lab { return newAnthropicLab(t, opencode) },
		record: func(l *lab, name string, r route, tool bool) *session {
			p := "Say hi"
			if tool {
				p = "Please run the command"
			}
			return l.recordOpencode(name, r, opencodeScenario{prompts: []string{p}}).session
		},
		flags: func(bool) []string { return nil },
	},
	{
		name: "qwen-code", bin: qwen, lab: func(t *testing.T) *lab { return newAnthropicLab(t, qwen) },
		record: func(l *lab, name string, r route, tool bool) *session {
			if tool {
				return l.recordQwen(name, r, qwenScenario{prompts: []string{"Please run the command"}}, fakeanthropic.Options{}).session
			}
			return l.recordQwen(name, r, qwenScenario{prompts: []string{"Say hi"}}, fakeanthropic.Options{TurnDelay: qwenTurnDelay}).session
		},
		flags: func(tool bool) []string {
			if tool {
				return nil
			}
			return []string{"--speed", "1"}
		},
	},
}

func codexMatrixAgent(name string, websockets bool) matrixAgent {
	return matrixAgent{
		name: name, bin: codex, lab: newCodexLab,
		record: func(l *lab, name string, r route, tool bool) *session {
			sc := scenario{prompts: []string{"Say hi"}}
			if tool {
				sc = shellScenario("untrusted", "Please run the command")
			}
			sc.websockets = websockets
			return l.recordCodex(name, r, sc, fakeresponses.Options{}).session
		},
		flags: func(bool) []string { return nil },
	}
}

// A matrixRow is one line of the table.
type matrixRow struct {
	agent, turn, route, machine string
	// before and after calibrate: replays green without and with
	// --requests fail.
	before, after [2]int
	calibrated    string
	notes         []string
}

// TestAgentMatrix records each agent's plain and tool turns by each
// route, replays each recording ACPTAP_MATRIX_REPLAYS times (default 20)
// before and after `acptap calibrate`, counting the replays green
// without and with --requests fail, and does the same for a tool turn
// recorded while every CPU is busy. It fails on nothing but a broken
// set-up: it measures, and writes the table to ACPTAP_MATRIX_OUT (and
// the log).
func TestAgentMatrix(t *testing.T) {
	if os.Getenv(matrixEnv) != "1" {
		t.Skipf("set %s=1 to measure the real agents (scripts/agent-matrix)", matrixEnv)
	}
	n := 20
	if v := os.Getenv("ACPTAP_MATRIX_REPLAYS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("ACPTAP_MATRIX_REPLAYS=%q: want a count", v)
		}
	}
	// ACPTAP_MATRIX_AGENTS: parts of the names of the agents to run,
	// comma-separated, else all.
	only := strings.FieldsFunc(os.Getenv("ACPTAP_MATRIX_AGENTS"), func(r rune) bool { return r == ',' })
	var mu sync.Mutex
	var rows []matrixRow
	for _, a := range matrixAgents {
		if len(only) > 0 && !slices.ContainsFunc(only, func(part string) bool { return strings.Contains(a.name, part) }) {
			continue
		}
		for _, tool := range []bool{false, true} {
			for _, r := range routes {
				machines := []string{"quiet"}
				if tool {
					machines = append(machines, "busy")
				}
				for _, machine := range machines {
					turn := "plain"
					if tool {
						turn = "tool"
					}
					t.Run(strings.Join([]string{a.name, turn, r.name, machine}, "/"), func(t *testing.T) {
						row := matrixRow{agent: a.name, turn: turn, route: r.name, machine: machine, calibrated: "not run"}
						defer func() {
							mu.Lock()
							rows = append(rows, row)
							mu.Unlock()
							t.Logf("%s", row.line(n))
						}()
						l := a.lab(t)
						var stop func()
						if machine == "busy" {
							stop = loadCPUs(t, runtime.NumCPU())
						}
						var s *session
						func() {
							defer func() {
								if stop != nil {
									stop()
								}
							}()
							row.notes = append(row.notes, "record failed") // until it returns
							s = a.record(l, "m", r, tool)
							row.notes = row.notes[:0]
						}()
						flags := a.flags(tool)
						row.before = l.matrixReplays(s, n, flags, &row.notes)
						calib := append([]string{"calibrate", "--store", l.store, "--grace", grace, "--runs", "4"}, flags...)
						res := l.run(l.dir, l.env(""), append([]string{filepath.Join(binDir, "acptap")}, append(calib, s.name)...)...)
						row.calibrated, _, _ = strings.Cut(res.stdout, "\n")
						row.after = l.matrixReplays(s, n, flags, &row.notes)
					})
				}
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| agent | turn | route | recorded on | green of %d, before calibrate | --requests fail | green of %d, after calibrate | --requests fail | calibrate said |\n", n, n)
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		b.WriteString(r.line(n) + "\n")
	}
	b.WriteString("\nFirst failures:\n\n")
	for _, r := range rows {
		for _, note := range r.notes {
			fmt.Fprintf(&b, "- %s %s %s %s: %s\n", r.agent, r.turn, r.route, r.machine, note)
		}
	}
	t.Logf("\n%s", b.String())
	if out := os.Getenv("ACPTAP_MATRIX_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func (r matrixRow) line(n int) string {
	return fmt.Sprintf("| %s | %s | %s | %s | %d | %d | %d | %d | %s |", r.agent, r.turn, r.route, r.machine,
		r.before[0], r.before[1], r.after[0], r.after[1], strings.NewReplacer("|", "\\|", "\n", " ").Replace(clip(r.calibrated, 160)))
}

// matrixReplays replays s n times in a row with --requests warn and
// counts the replays green ([0]) and green with no request drift warned,
// which --requests fail would have failed ([1]); the first failure of
// each kind goes to notes.
func (l *lab) matrixReplays(s *session, n int, flags []string, notes *[]string) (green [2]int) {
	l.t.Helper()
	want := fmt.Sprintf("PASS %s (", s.name)
	served := fmt.Sprintf(" %d LLM exchanges served", s.exchanges)
	var failed, drifted bool
	start := time.Now()
	for range n {
		res := l.replay(s.name, flags...)
		if res.code != 0 || !strings.HasPrefix(res.stdout, want) || !strings.Contains(res.stdout, served) {
			if !failed {
				failed = true
				first, _, _ := strings.Cut(res.stdout+res.stderr, "\n")
				*notes = append(*notes, "FAIL: "+clip(first, 400))
			}
			continue
		}
		green[0]++
		if i := strings.Index(res.stdout, "the request differs from the recording"); i >= 0 {
			if !drifted {
				drifted = true
				line := res.stdout[strings.LastIndex(res.stdout[:i], "\n")+1:]
				line, _, _ = strings.Cut(line, "\n")
				*notes = append(*notes, "request drift: "+clip(strings.TrimSpace(line), 400))
			}
			continue
		}
		green[1]++
	}
	l.t.Logf("%s: %d replays in %v: %d green, %d without request drift", s.name, n, time.Since(start).Round(time.Second), green[0], green[1])
	return green
}

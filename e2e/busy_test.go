package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/acptap/acptap/internal/testing/fakeresponses"
)

// busyEnv opts into TestCodexBusyMachine, which loads every CPU of the
// machine while it records: run it alone (scripts/e2e-busy), never beside
// other tests, whose processes it would slow down.
const busyEnv = "ACPTAP_E2E_BUSY"

// TestCodexBusyMachine records codex-acp's shell-tool session by both
// routes while every CPU is busy (a recording made on a loaded machine
// catches the rarer interleavings of the agent's concurrent tasks), then
// replays each 10 times on the quiet machine: each replay must be equal,
// with every recorded exchange served.
func TestCodexBusyMachine(t *testing.T) {
	if os.Getenv(busyEnv) != "1" {
		t.Skipf("set %s=1 to record codex-acp on a loaded machine (scripts/e2e-busy)", busyEnv)
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			l := newCodexLab(t)
			stop := loadCPUs(t, runtime.NumCPU())
			s := l.recordCodex("busy-shell", r, shellScenario("untrusted", "Please run the command"), fakeresponses.Options{})
			stop()
			const n = 10
			want := fmt.Sprintf("PASS %s (", s.name)
			served := fmt.Sprintf(" %d LLM exchanges served", s.exchanges)
			passed := 0
			for i := range n {
				res := l.replay(s.name, "--requests", "fail")
				if res.code == 0 && strings.HasPrefix(res.stdout, want) && strings.Contains(res.stdout, served) {
					passed++
				} else if passed == i {
					t.Errorf("replay %d/%d: %s\nwant exit 0, %q and%q", i+1, n, clip(res.String(), 6000), want, served)
				}
			}
			t.Logf("%s: %d/%d replays equal", r.name, passed, n)
			if passed != n {
				t.Errorf("%d/%d replays of a recording made on a busy machine were equal, want %d/%d", passed, n, n, n)
			}
		})
	}
}

// loadCPUs starts n processes that spin until the returned function (or
// the test's end) kills them.
func loadCPUs(t *testing.T, n int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatalf("loading the CPUs: %v", err)
		}
		cmds = append(cmds, cmd)
	}
	stop = func() {
		cancel()
		for _, c := range cmds {
			c.Wait()
		}
		cmds = nil
	}
	t.Cleanup(stop)
	return stop
}

// TestCodexCausalOrderUnderLoad records codex-acp's two-prompt and
// shell-tool sessions by both routes while every CPU is busy, the tap in
// its own process: each recording's order agrees with what caused what
// (every LLM request after the prompt it holds, every message chunk after
// the answer it repeats) and its times with its order. Every recording of
// this package is so checked (checkRecording); this one on a loaded
// machine, where scheduling delays the recorder most.
func TestCodexCausalOrderUnderLoad(t *testing.T) {
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			l := newCodexLab(t)
			stop := loadCPUs(t, runtime.NumCPU())
			defer stop()
			for i, sc := range []scenario{
				{prompts: []string{"Say hi", "Say bye"}},
				shellScenario("untrusted", "Please run the command"),
			} {
				s := l.recordCodex(fmt.Sprintf("causal-%d", i), r, sc, fakeresponses.Options{})
				if s.causalPairs < 2 {
					t.Errorf("%s: checked %d causal pairs, want at least 2", s.name, s.causalPairs)
				}
			}
		})
	}
}

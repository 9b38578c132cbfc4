package e2e

import (
	"strings"
	"testing"
)

// TestScenarioAgents records the tool turn of each real agent of the suite
// (codex-acp with WebSockets on, its default; claude-agent-acp;
// gemini-cli) with `acptap record --scenario` against its scripted
// upstream, by the proxy route, and replays it 5 times in a row, green
// with --requests fail: a scenario's recording is an ordinary recording.
func TestScenarioAgents(t *testing.T) {
	for _, a := range matrixAgents {
		if !strings.HasPrefix(a.name, "claude") && !strings.HasPrefix(a.name, "gemini") && a.name != "codex-acp (WebSockets on)" {
			continue
		}
		t.Run(strings.Fields(a.name)[0], func(t *testing.T) {
			a.bin.need(t)
			t.Parallel()
			l := a.lab(t)
			l.viaScenario = true
			s := a.record(l, "scenario", proxyRoute, true)
			var notes []string
			if green := l.matrixReplays(s, 5, append(a.flags(true), "--requests", "fail"), &notes); green[0] != 5 {
				t.Errorf("%d of 5 replays green: %s", green[0], strings.Join(notes, "; "))
			}
		})
	}
}

package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/fakeanthropic"
)

// TestClaudeStdioFaults breaks the editor side of a replay of
// claude-agent-acp running a command behind a permission request: the
// prompt sent twice, and the agent's stdin closed mid-turn in place of
// the permission answer. Either way the replay fails, says which fault it
// applied, and ends well within its timeout: an agent that lost its
// editor mid-turn never answers the prompt, and the replay says so
// rather than hang.
func TestClaudeStdioFaults(t *testing.T) {
	t.Parallel()
	l := newClaudeLab(t)
	s := l.recordClaude("faults", baseURLRoute, claudeScenario{prompts: []string{claudeRun}}, fakeanthropic.Options{})
	events, _ := l.show(s.name)
	var answer int // the editor's answer to the permission request
	for _, e := range events {
		var m struct {
			Result struct {
				Outcome json.RawMessage `json:"outcome"`
			} `json:"result"`
		}
		if e.Lane == "editor" && json.Unmarshal([]byte(e.Raw), &m) == nil && m.Result.Outcome != nil && answer == 0 {
			answer = e.Seq
		}
	}
	if answer == 0 {
		t.Fatalf("no permission answer of the editor's in the recording:\n%v", events)
	}

	const timeout = 20 * time.Second
	for _, tc := range []struct {
		fault string
		want  []string // in the report
	}{{
		fault: "session/prompt#1=dup",
		want:  []string{"  stdio fault session/prompt#1=dup (frame "},
	}, {
		fault: strconv.Itoa(answer) + "=close",
		want: []string{
			"  stdio fault " + strconv.Itoa(answer) + "=close (response id=",
			"  also: editor side: the agent did not answer after its stdin was closed in place of response id=",
			"for: the response to editor request id=2 (session/prompt)",
		},
	}} {
		start := time.Now()
		res := l.replay(s.name, claudeFlags("--timeout", timeout.String(), "--stdio-fault", tc.fault)...)
		took := time.Since(start)
		report, _, _ := strings.Cut(res.stdout, "--- recorded")
		t.Logf("--stdio-fault %s, in %v:\n%s", tc.fault, took.Round(time.Millisecond), report)
		if res.code != 1 || !strings.HasPrefix(res.stdout, "FAIL faults: ") {
			t.Errorf("--stdio-fault %s: got %s\nwant exit 1 and FAIL", tc.fault, clip(res.String(), 6000))
		}
		for _, w := range tc.want {
			if !strings.Contains(res.stdout, w) {
				t.Errorf("--stdio-fault %s: the report lacks %q:\n%s", tc.fault, w, clip(res.stdout, 6000))
			}
		}
		if !strings.Contains(res.stdout, "): applied\n") {
			t.Errorf("--stdio-fault %s: the fault not applied:\n%s", tc.fault, clip(res.stdout, 6000))
		}
		if took > timeout {
			t.Errorf("--stdio-fault %s: the replay took %v, more than its timeout", tc.fault, took)
		}
	}
}

package testagent_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/testing/testeditor"
)

// TestFlaky checks that --flaky sends each frame it names in some runs
// and not in others, and nothing else otherwise: 40 runs with both
// flaky, every combination seen (each run has 1 chance in 4 of each).
func TestFlaky(t *testing.T) {
	base := []string{"tool_call", "session/request_permission", "fs/read_text_file"}
	seen := map[string]int{}
	for range 40 {
		tr, _ := mustSession(t, testeditor.Options{Cwd: workspace(t, "one line\n")}, nil, "--read", "notes.txt", "--flaky", "tool-done,drain")
		got := recvShape(decode(t, tr))
		i := slices.Index(got, "fs/read_text_file")
		if i < 0 || !slices.Equal(got[i-2:i+1], base) {
			t.Fatalf("the agent sent %q, want a read tool call", got)
		}
		rest := strings.Join(got[i+1:], " ")
		switch rest {
		case "tool_call_update completed _testagent/drainQueue agent_message_chunk answer",
			"tool_call_update completed agent_message_chunk answer",
			"_testagent/drainQueue agent_message_chunk answer",
			"agent_message_chunk answer":
			seen[rest]++
		default:
			t.Fatalf("after the read, the agent sent %q", rest)
		}
	}
	if len(seen) != 4 {
		t.Errorf("in 40 runs, the agent sent after the read only %v; want each of the 4 combinations", seen)
	}
}

package replay

import (
	"slices"
	"strings"
	"testing"
)

// TestRunMCPOverACP: a recording whose agent called the lookup tool of an
// MCP server the editor hosts over ACP replays equal; an agent that calls
// it with other arguments diverges with MCPUnanswered, naming the server
// and the call, and MCPUnrequested for the recorded call never made, as a
// stdio server's stand-in reports them.
func TestRunMCPOverACP(t *testing.T) {
	st := openStore(t)
	argv := recordSession(t, st, "acp", session{args: []string{"--features", "mcp-acp", "--mcp-call", `lookup={"topic":"answer"}`}, mcpOverACP: []string{"tools"}})
	res := replayIt(t, st, "acp", runOptions(t))
	if !res.Equal() {
		t.Fatalf("replay diverged: %v\n%s", res.Divergences, res.Diff)
	}
	opts := runOptions(t)
	opts.Argv = append(slices.Clone(argv[:len(argv)-2]), "--mcp-call", `lookup={"topic":"weather"}`)
	res = replayIt(t, st, "acp", opts)
	var got []string
	for _, d := range res.Divergences {
		if d.Kind == MCPUnanswered || d.Kind == MCPUnrequested {
			got = append(got, d.Kind.String()+": "+d.Message)
		}
	}
	want := []string{
		`mcp-unanswered: MCP server tools: the agent asked tools/call lookup {"topic":"weather"}, which the recording has no answer for`,
		`mcp-unrequested: MCP server tools: the recorded tools/call lookup {"topic":"answer"} was never asked`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("MCP divergences:\n got %q\nwant %q\nall: %v", got, want, res.Divergences)
	}
	if kinds(res.Divergences)[0] != OutputDiffers || !strings.Contains(res.Diff, `"weather"`) {
		t.Errorf("first divergence %v, want the agent's output differing on the call", res.Divergences[0])
	}
}

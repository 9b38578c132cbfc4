package lane

import "testing"

func TestStringParse(t *testing.T) {
	for _, l := range []Lane{Editor, Agent, Stderr, LLM} {
		got, ok := Parse(l.String())
		if !ok || got != l {
			t.Errorf("Parse(%q) = %v, %v; want %v, true", l.String(), got, ok, l)
		}
	}
	for _, s := range []string{"", "stdin", "lane(0)", "Editor"} {
		if l, ok := Parse(s); ok {
			t.Errorf("Parse(%q) = %v, true; want false", s, l)
		}
	}
	if got := Lane(0).String(); got != "lane(0)" {
		t.Errorf("Lane(0).String() = %q, want lane(0)", got)
	}
}

func TestMCP(t *testing.T) {
	seen := map[Lane]bool{Editor: true, Agent: true, Stderr: true, LLM: true}
	for i := range MaxMCPServers {
		for _, d := range []MCPDir{ToServer, FromServer, ServerStderr} {
			l := MCP(i, d)
			if seen[l] {
				t.Fatalf("MCP(%d, %v) = %d, a lane taken", i, d, l)
			}
			seen[l] = true
			gi, gd, ok := l.MCP()
			if !ok || gi != i || gd != d || l.String() != "mcp" {
				t.Errorf("MCP(%d, %v) = %d reads as %d, %v, %v, %q", i, d, l, gi, gd, ok, l)
			}
		}
	}
	if _, _, ok := LLM.MCP(); ok {
		t.Error("LLM is an MCP lane")
	}
}

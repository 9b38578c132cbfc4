package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// recordMCPOverACP records, as NAME in dir's s.db, two turns of a test
// agent calling the lookup tool of an MCP server named tools that the
// editor hosts on the ACP connection (testeditor --mcp-acp, the RFD
// "MCP-over-ACP"), and returns the store.
func recordMCPOverACP(t *testing.T, dir, name string) string {
	t.Helper()
	db := filepath.Join(dir, "s.db")
	out, err := runEditor(dir, "--mcp-acp", "tools", "--prompt", "look it up", "--prompt", "again", "--",
		"acptap", "record", "--store", db, "--name", name, "--", "testagent", "--features", "mcp-acp", "--mcp-call", `lookup={"topic":"answer"}`)
	if err != nil || strings.Count(string(out), "mcp tools lookup: 42") != 2 {
		t.Fatalf("recording: %v\n%s", err, out)
	}
	return db
}

// TestMCPOverACPRecorded: an MCP server the editor hosts over ACP is
// recorded with the ACP stream: the session/new that declares it, and in
// each turn the agent's mcp/connect with the declared id, its MCP
// messages as mcp/message requests and notifications of the connection
// the editor's answer gave, the editor's answers, and mcp/disconnect, all
// before the turn's answer; show lists them with the tool call and its
// result.
func TestMCPOverACPRecorded(t *testing.T) {
	dir := workspace(t)
	db := recordMCPOverACP(t, dir, "acp")
	var declared string
	var got []string // the agent's MCP requests and the turns' answers, in order
	conns := map[string]bool{}
	for _, e := range showJSON(t, db, "acp") {
		if e.Raw == nil || e.Lane != "editor" && e.Lane != "agent" {
			continue
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				MCPServers []struct {
					Type, Name, ID string
				} `json:"mcpServers"`
				AcpID        string `json:"acpId"`
				ConnectionID string `json:"connectionId"`
				Method       string `json:"method"`
			} `json:"params"`
			Result struct {
				ConnectionID string `json:"connectionId"`
				StopReason   string `json:"stopReason"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(*e.Raw), &m); err != nil {
			t.Fatalf("frame %d: %v", e.Seq, err)
		}
		switch {
		case e.Lane == "editor" && m.Method == "session/new":
			if s := m.Params.MCPServers; len(s) != 1 || s[0].Type != "acp" || s[0].Name != "tools" || s[0].ID == "" {
				t.Fatalf("the recorded session/new declares %+v, want the server tools of type acp", s)
			}
			declared = m.Params.MCPServers[0].ID
		case e.Lane == "editor" && m.Result.ConnectionID != "":
			conns[m.Result.ConnectionID] = true
		case e.Lane == "agent" && m.Method == "mcp/connect":
			if m.Params.AcpID != declared {
				t.Errorf("mcp/connect names %q, want the declared id %q", m.Params.AcpID, declared)
			}
			got = append(got, "connect")
		case e.Lane == "agent" && (m.Method == "mcp/message" || m.Method == "mcp/disconnect"):
			if !conns[m.Params.ConnectionID] {
				t.Errorf("frame %d: %s of connection %q, which no recorded mcp/connect answer gave", e.Seq, m.Method, m.Params.ConnectionID)
			}
			got = append(got, strings.TrimSpace(strings.TrimPrefix(m.Method, "mcp/")+" "+m.Params.Method))
		case e.Lane == "agent" && m.Result.StopReason != "":
			got = append(got, "answer")
		}
	}
	turn := "connect message initialize message notifications/initialized message tools/list message tools/call disconnect answer"
	if want := turn + " " + turn; strings.Join(got, " ") != want {
		t.Errorf("recorded MCP-over-ACP frames:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	shown, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "acp")
	for _, want := range []string{"request  mcp/connect id=", "acpId=" + declared, "connectionId=conn-1",
		`request  mcp/message id=`, `conn-1 tools/call lookup {"topic":"answer"}`, `→ "42"`, "notify   mcp/message conn-2 notifications/initialized",
		"request  mcp/disconnect id="} {
		if !strings.Contains(shown, want) {
			t.Errorf("show lacks %q:\n%s", want, shown)
		}
	}
}

// TestMCPOverACPReplay: the recording replays green 5 times, the MCP
// server's answers played from it; an agent calling the tool with other
// arguments diverges, the report naming the server and the call the
// recording has no answer for, and the recorded call never made; an
// agent that makes no call diverges with the recorded calls never made.
func TestMCPOverACPReplay(t *testing.T) {
	dir := workspace(t)
	db := recordMCPOverACP(t, dir, "acp")
	for i := range 5 {
		out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "acp")
		if code != 0 {
			t.Fatalf("replay #%d: exit %d\n%s%s", i+1, code, out, errOut)
		}
	}
	for _, tc := range []struct {
		name  string
		agent []string
		want  []string
	}{
		{"other arguments", []string{"testagent", "--features", "mcp-acp", "--mcp-call", `lookup={"topic":"weather"}`}, []string{
			`MCP server tools: the agent asked tools/call lookup {"topic":"weather"}, which the recording has no answer for`,
			`MCP server tools: the recorded tools/call lookup {"topic":"answer"} was never asked`,
		}},
		{"no call", []string{"testagent", "--features", "mcp-acp"}, []string{
			`MCP server tools: the recorded tools/call lookup {"topic":"answer"} was never asked`,
		}},
	} {
		out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), append([]string{"replay", "--store", db, "acp", "--"}, tc.agent...)...)
		if code != ExitDiverged {
			t.Errorf("%s: exit %d, want %d\n%s%s", tc.name, code, ExitDiverged, out, errOut)
		}
		for _, want := range tc.want {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the report lacks %q:\n%s", tc.name, want, out)
			}
		}
		if strings.Contains(out+errOut, "timed out") {
			t.Errorf("%s: the replay waited for what never came:\n%s%s", tc.name, out, errOut)
		}
	}
}

package testagent_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/testing/testeditor"
)

// TestMCPOverACP: the agent advertises mcpCapabilities.acp and reaches an
// MCP server the editor hosts on the ACP connection as the RFD
// "MCP-over-ACP" has it: in each turn, mcp/connect with the id of the
// session/new entry, the MCP handshake, tools/list and the tools/call as
// mcp/message requests and notifications of the connection it got, then
// mcp/disconnect of that connection, all before the turn's answer.
func TestMCPOverACP(t *testing.T) {
	tr, _ := mustSession(t, testeditor.Options{Prompts: []string{"one", "two"}, MCPOverACP: []string{"tools"}}, nil,
		"--features", "mcp-acp", "--mcp-call", `lookup={"topic":"answer"}`)
	msgs := decode(t, tr)
	if acpCap := get(msgs[1].Result, "agentCapabilities", "mcpCapabilities", "acp"); acpCap != true {
		t.Errorf("initialize's mcpCapabilities.acp = %v, want true", acpCap)
	}
	var serverID string
	for _, m := range msgs {
		if m.Method == "session/new" {
			servers, _ := m.Params["mcpServers"].([]any)
			if len(servers) != 1 || get(servers[0], "type") != "acp" || get(servers[0], "name") != "tools" {
				t.Fatalf("session/new's mcpServers = %v, want the one server tools of type acp", servers)
			}
			serverID, _ = get(servers[0], "id").(string)
		}
	}
	var got []string // per turn: what the agent sent on the ACP connection for MCP, then the answer
	conns := map[string]bool{}
	for _, m := range msgs {
		switch {
		case m.Dir == "recv" && m.Method == "mcp/connect":
			if m.Params["acpId"] != serverID {
				t.Errorf("mcp/connect acpId = %v, want the session/new entry's id %q", m.Params["acpId"], serverID)
			}
			got = append(got, "connect")
		case m.Dir == "send" && m.Result != nil && m.Result["connectionId"] != nil:
			conns[m.Result["connectionId"].(string)] = true
		case m.Dir == "recv" && (m.Method == "mcp/message" || m.Method == "mcp/disconnect"):
			if conn, _ := m.Params["connectionId"].(string); !conns[conn] {
				t.Errorf("%s on connection %q, which no mcp/connect answer gave", m.Method, conn)
			}
			kind := "request"
			if m.ID == nil {
				kind = "notification"
			}
			what := strings.TrimPrefix(m.Method, "mcp/")
			if inner, ok := m.Params["method"].(string); ok {
				what += " " + inner + " " + kind
			}
			got = append(got, what)
		case m.Dir == "recv" && m.Result != nil && m.Result["stopReason"] != nil:
			got = append(got, "answer")
		}
	}
	turn := []string{"connect", "message initialize request", "message notifications/initialized notification",
		"message tools/list request", "message tools/call request", "disconnect", "answer"}
	if want := slices.Concat(turn, turn); !slices.Equal(got, want) {
		t.Errorf("MCP-over-ACP messages and answers:\n got %q\nwant %q", got, want)
	}
	if len(conns) != 2 {
		t.Errorf("%d connections, want one per turn: %v", len(conns), conns)
	}
	for i, turn := range tr.Turns {
		if !strings.Contains(turn.Text, "mcp tools lookup: 42") {
			t.Errorf("turn %d answered %q, want the lookup's answer", i+1, turn.Text)
		}
	}
}

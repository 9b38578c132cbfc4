package testeditor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/acp"
)

// TestACPHost: the editor's MCP server over ACP answers mcp/connect for
// its id (acpId, or serverId as the schema now names it) with a fresh
// connectionId, the MCP messages of an open connection with the inner
// result as the result and an inner error as the error, and refuses an
// unknown id or connection, and a connection once disconnected.
func TestACPHost(t *testing.T) {
	h := newACPHost([]string{"tools"})
	h.offered = true
	entries, _ := json.Marshal(h.entries())
	id := h.servers[0].id
	if want := `[{"id":"` + id + `","name":"tools","type":"acp"}]`; string(entries) != want {
		t.Errorf("entries = %s, want %s", entries, want)
	}
	serve := func(method, params string) (string, *acp.ResponseError) {
		t.Helper()
		res, rerr, ok := h.serve(&acp.Envelope{ID: json.RawMessage("7"), Method: method, Params: json.RawMessage(params)})
		if !ok {
			t.Fatalf("serve(%s) did not take the method", method)
		}
		b, _ := json.Marshal(res)
		return string(b), rerr
	}
	if _, rerr := serve("mcp/connect", `{"acpId":"no-such-id"}`); rerr == nil || rerr.Code != acp.CodeInvalidParams {
		t.Errorf("mcp/connect of an unknown id: error %v, want invalid params", rerr)
	}
	first, _ := serve("mcp/connect", `{"acpId":"`+id+`"}`)
	second, _ := serve("mcp/connect", `{"serverId":"`+id+`"}`)
	if first != `{"connectionId":"conn-1"}` || second != `{"connectionId":"conn-2"}` {
		t.Errorf("mcp/connect answered %s and %s, want conn-1 and conn-2", first, second)
	}
	got, rerr := serve("mcp/message", `{"connectionId":"conn-1","method":"tools/call","params":{"name":"lookup","arguments":{"topic":"answer"}}}`)
	if rerr != nil || got != `{"content":[{"text":"42","type":"text"}],"isError":false}` {
		t.Errorf("tools/call lookup answered %s, error %v; want the tool result 42", got, rerr)
	}
	if _, rerr := serve("mcp/message", `{"connectionId":"conn-2","method":"no/such/method"}`); rerr == nil || rerr.Code != acp.CodeMethodNotFound {
		t.Errorf("an unknown MCP method: error %v, want the server's method-not-found as the answer's error", rerr)
	}
	if got, rerr := serve("mcp/disconnect", `{"connectionId":"conn-1"}`); rerr != nil || got != `{}` {
		t.Errorf("mcp/disconnect answered %s, error %v; want {}", got, rerr)
	}
	if _, rerr := serve("mcp/message", `{"connectionId":"conn-1","method":"tools/list"}`); rerr == nil || !strings.Contains(rerr.Message, "no open MCP connection") {
		t.Errorf("a message on a closed connection: error %v, want no open MCP connection", rerr)
	}
	if _, _, ok := h.serve(&acp.Envelope{ID: json.RawMessage("8"), Method: "fs/read_text_file"}); ok {
		t.Error("serve took fs/read_text_file")
	}
	h.offered = false
	if h.entries() != nil {
		t.Errorf("entries for an agent without mcpCapabilities.acp = %v, want none", h.entries())
	}
}

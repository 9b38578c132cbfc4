package testeditor

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/internal/testing/testmcp"
)

// The editor hosts MCP servers on the ACP connection as the RFD
// "MCP-over-ACP" (agentclientprotocol.com/rfds/mcp-over-acp) has a
// client do: each is an mcpServers entry {"type":"acp","name":...,
// "id":...} of session/new and session/load, sent only to an agent whose
// initialize answer has mcpCapabilities.acp; the agent opens a connection
// with mcp/connect {acpId}, which answers a fresh connectionId, sends the
// server's MCP messages as mcp/message requests and notifications of that
// connection (the inner method and params flattened into the params; the
// inner result the answer's result, an inner error its error), and ends
// it with mcp/disconnect {connectionId}. Each server is a testmcp.Server,
// whose lookup tool answers from testmcp's table.

// acpHost is the editor's MCP servers over ACP. Run's goroutine uses it.
type acpHost struct {
	servers []acpServer
	conns   map[string]*testmcp.Server // open connections, by connectionId
	opened  int                        // connections opened so far, for their ids
	offered bool                       // the agent advertised mcpCapabilities.acp
}

// acpServer is one MCP server the editor hosts.
type acpServer struct {
	name, id string
	server   *testmcp.Server
}

func newACPHost(names []string) *acpHost {
	h := &acpHost{conns: map[string]*testmcp.Server{}}
	for _, name := range names {
		// The id is the providing component's to make; a fresh one per
		// run, as an editor makes them, so that nothing relies on it.
		h.servers = append(h.servers, acpServer{name: name, id: newUUID(), server: testmcp.New(testmcp.Options{Name: name})})
	}
	return h
}

// entries returns the mcpServers entries of the hosted servers, none if
// the agent cannot reach them.
func (h *acpHost) entries() []any {
	if !h.offered {
		return nil
	}
	var out []any
	for _, s := range h.servers {
		out = append(out, map[string]any{"type": "acp", "name": s.name, "id": s.id})
	}
	return out
}

// serve answers an mcp/connect, mcp/message or mcp/disconnect request;
// false for another method.
func (h *acpHost) serve(m *acp.Envelope) (any, *acp.ResponseError, bool) {
	switch m.Method {
	case "mcp/connect":
		// acpId as the RFD names it; serverId as the unstable schema
		// has since renamed it.
		var p struct {
			AcpID    string `json:"acpId"`
			ServerID string `json:"serverId"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, invalidParams(m, err), true
		}
		if p.AcpID == "" {
			p.AcpID = p.ServerID
		}
		for _, s := range h.servers {
			if s.id == p.AcpID {
				h.opened++
				id := "conn-" + strconv.Itoa(h.opened)
				h.conns[id] = s.server
				return map[string]any{"connectionId": id}, nil, true
			}
		}
		return nil, invalidParams(m, fmt.Errorf("no MCP server of id %q", p.AcpID)), true
	case "mcp/message":
		server, p, rerr := h.connection(m)
		if rerr != nil {
			return nil, rerr, true
		}
		// The inner message is a request when the outer one is.
		inner := map[string]any{"jsonrpc": "2.0", "id": 1, "method": p.Method}
		if p.Params != nil && string(p.Params) != "null" {
			inner["params"] = p.Params
		}
		line, _ := json.Marshal(inner)
		var answer struct {
			Result json.RawMessage    `json:"result"`
			Error  *acp.ResponseError `json:"error"`
		}
		if err := json.Unmarshal(server.Handle(line), &answer); err != nil {
			return nil, &acp.ResponseError{Code: acp.CodeInternalError, Message: "the MCP server's answer: " + err.Error()}, true
		}
		if answer.Error != nil {
			return nil, answer.Error, true
		}
		return answer.Result, nil, true
	case "mcp/disconnect":
		_, p, rerr := h.connection(m)
		if rerr != nil {
			return nil, rerr, true
		}
		delete(h.conns, p.ConnectionID)
		return map[string]any{}, nil, true
	}
	return nil, nil, false
}

// mcpParams are the params of mcp/message and mcp/disconnect.
type mcpParams struct {
	ConnectionID string          `json:"connectionId"`
	Method       string          `json:"method"`
	Params       json.RawMessage `json:"params"`
}

// connection returns the server of the open connection m names.
func (h *acpHost) connection(m *acp.Envelope) (*testmcp.Server, mcpParams, *acp.ResponseError) {
	var p mcpParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, p, invalidParams(m, err)
	}
	server := h.conns[p.ConnectionID]
	if server == nil {
		return nil, p, invalidParams(m, fmt.Errorf("no open MCP connection %q", p.ConnectionID))
	}
	return server, p, nil
}

// notify hands an mcp/message notification to its server, which answers
// none.
func (h *acpHost) notify(m *acp.Envelope) {
	var p mcpParams
	if json.Unmarshal(m.Params, &p) != nil || h.conns[p.ConnectionID] == nil {
		return
	}
	inner := map[string]any{"jsonrpc": "2.0", "method": p.Method}
	if p.Params != nil && string(p.Params) != "null" {
		inner["params"] = p.Params
	}
	line, _ := json.Marshal(inner)
	h.conns[p.ConnectionID].Handle(line)
}

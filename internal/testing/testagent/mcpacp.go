package testagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// MCP servers of type acp are hosted by the editor and reached over the
// ACP connection itself, as the RFD "MCP-over-ACP"
// (agentclientprotocol.com/rfds/mcp-over-acp) has it: the agent sends
// mcp/connect {acpId} and gets a connectionId, then wraps each MCP
// message in an mcp/message request or notification of that connection
// (the inner method and params flattened into its params, the inner
// result its result, an inner error its error), and ends with
// mcp/disconnect {connectionId}.

// clients returns the session's MCP servers the running turn can call:
// those connected at session/new, then those the turn connected over ACP.
func (s *session) clients() []*mcpClient {
	if len(s.acpMCP) == 0 {
		return s.mcp
	}
	return append(slices.Clone(s.mcp), s.acpMCP...)
}

// connectACP connects the session's ACP-hosted MCP servers for a turn, in
// the order of session/new; a server that fails is left out of the turn,
// its error said in the answer, as a stdio server's is.
func (a *agent) connectACP(ctx context.Context, s *session) {
	s.acpMCP, s.acpErrs = nil, nil
	for _, c := range s.acp {
		client, err := a.connectACPOne(ctx, c)
		if err != nil {
			a.log.Printf("mcp server %s: %v", c.Name, err)
			s.acpErrs = append(s.acpErrs, fmt.Errorf("mcp server %s: %w", c.Name, err))
			continue
		}
		s.acpMCP = append(s.acpMCP, client)
	}
}

func (a *agent) connectACPOne(ctx context.Context, c mcpServerConfig) (*mcpClient, error) {
	var res struct {
		ConnectionID string `json:"connectionId"`
	}
	if err := a.c.call(ctx, "mcp/connect", map[string]any{"acpId": c.acpID()}, &res); err != nil {
		return nil, err
	}
	if res.ConnectionID == "" {
		return nil, errors.New("mcp/connect: no connectionId in the answer")
	}
	return initClient(ctx, c.Name, &mcpACP{c: a.c, conn: res.ConnectionID})
}

// disconnectACP ends the turn's ACP connections.
func (a *agent) disconnectACP(s *session) {
	for _, c := range s.acpMCP {
		c.rpc.close()
	}
	s.acpMCP, s.acpErrs = nil, nil
}

// mcpACP is one connection to an MCP server the editor hosts.
type mcpACP struct {
	c    *conn
	conn string // the connectionId mcp/connect gave
}

// message returns the params of an mcp/message: the connection, and the
// inner message's method and params (none when nil).
func (t *mcpACP) message(method string, params any) map[string]any {
	p := map[string]any{"connectionId": t.conn, "method": method}
	if params != nil {
		p["params"] = params
	}
	return p
}

func (t *mcpACP) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	var res json.RawMessage
	if err := t.c.call(ctx, "mcp/message", t.message(method, params), &res); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return res, nil
}

func (t *mcpACP) notify(method string, params any) error {
	return t.c.notify("mcp/message", t.message(method, params))
}

// close sends mcp/disconnect and waits a while for its answer, which an
// editor that has gone never gives.
func (t *mcpACP) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t.c.call(ctx, "mcp/disconnect", map[string]any{"connectionId": t.conn}, nil)
}

package testagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// mcpProtocolVersion is the MCP revision the test agent asks for.
const mcpProtocolVersion = "2025-06-18"

// mcpServerConfig is one entry of session/new's mcpServers: a stdio server
// (command, args, env), an HTTP one (type http, url, headers), or one the
// editor hosts on the ACP connection itself (type acp, id: the RFD
// "MCP-over-ACP").
type mcpServerConfig struct {
	Type    string    `json:"type"`
	Name    string    `json:"name"`
	Command string    `json:"command"`
	Args    []string  `json:"args"`
	Env     []nameVal `json:"env"`
	URL     string    `json:"url"`
	Headers []nameVal `json:"headers"`
	// ID is an ACP-hosted server's id, which mcp/connect names. The RFD
	// calls it "id"; the unstable schema has since renamed it
	// "serverId", which is read too.
	ID       string `json:"id"`
	ServerID string `json:"serverId"`
}

// acpID returns an ACP-hosted server's id, by either name.
func (c mcpServerConfig) acpID() string {
	if c.ID != "" {
		return c.ID
	}
	return c.ServerID
}

type nameVal struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// mcpClient is a connection to one MCP server of a session.
type mcpClient struct {
	name    string
	tools   []string
	schemas map[string]mcpToolSchema // by tool name, for the LLM mode
	rpc     mcpTransport
}

// mcpToolSchema is what tools/list says of a tool, offered to the model.
type mcpToolSchema struct {
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// mcpTransport sends a request and returns its result, or sends a
// notification (result nil).
type mcpTransport interface {
	call(ctx context.Context, method string, params any) (json.RawMessage, error)
	notify(method string, params any) error
	close()
}

// mcpError is an MCP server's error answer.
type mcpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *mcpError) Error() string { return fmt.Sprintf("error %d: %s", e.Code, e.Message) }

// connectMCP connects to a session's MCP servers, as a real agent does at
// session/new: it starts the stdio ones, initializes each and lists its
// tools. A server that fails is left out, its error returned with the
// others' names.
func (a *agent) connectMCP(ctx context.Context, configs []mcpServerConfig) ([]*mcpClient, []error) {
	var clients []*mcpClient
	var errs []error
	for _, c := range configs {
		if c.Type == "acp" {
			continue // connected over ACP in each turn (see connectACP)
		}
		client, err := connectOne(ctx, c)
		if err != nil {
			errs = append(errs, fmt.Errorf("mcp server %s: %w", c.Name, err))
			continue
		}
		clients = append(clients, client)
	}
	return clients, errs
}

func connectOne(ctx context.Context, c mcpServerConfig) (*mcpClient, error) {
	var t mcpTransport
	var err error
	switch {
	case c.Type == "http" || c.Type == "sse" || c.URL != "":
		t = &mcpHTTP{url: c.URL, headers: c.Headers}
	default:
		t, err = startMCPStdio(c)
	}
	if err != nil {
		return nil, err
	}
	return initClient(ctx, c.Name, t)
}

// initClient initializes an MCP server over t and lists its tools; t is
// closed if that fails.
func initClient(ctx context.Context, name string, t mcpTransport) (*mcpClient, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := t.call(ctx, "initialize", map[string]any{
		"protocolVersion": mcpProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "testagent", "version": "1.0.0"},
	}); err != nil {
		t.close()
		return nil, err
	}
	if err := t.notify("notifications/initialized", nil); err != nil {
		t.close()
		return nil, err
	}
	res, err := t.call(ctx, "tools/list", map[string]any{})
	if err != nil {
		t.close()
		return nil, err
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
			mcpToolSchema
		} `json:"tools"`
	}
	if err := json.Unmarshal(res, &list); err != nil {
		t.close()
		return nil, fmt.Errorf("tools/list: %w", err)
	}
	client := &mcpClient{name: name, rpc: t, schemas: map[string]mcpToolSchema{}}
	for _, tool := range list.Tools {
		client.tools = append(client.tools, tool.Name)
		client.schemas[tool.Name] = tool.mcpToolSchema
	}
	return client, nil
}

// callTool calls tool with args and returns the text of its result, and
// whether the result is an error.
func (c *mcpClient) callTool(ctx context.Context, tool string, args json.RawMessage) (string, bool, error) {
	res, err := c.rpc.call(ctx, "tools/call", map[string]any{"name": tool, "arguments": args})
	if err != nil {
		return "", false, err
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return "", false, fmt.Errorf("tools/call: %w", err)
	}
	var texts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			texts = append(texts, c.Text)
		}
	}
	return strings.Join(texts, "\n"), r.IsError, nil
}

// mcpStdio is a stdio MCP server the agent started.
type mcpStdio struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu      sync.Mutex // guards the fields below and writes to stdin
	nextID  int
	waiting map[string]chan mcpReply
	ended   error // why the server's output ended; nil while it runs
}

type mcpReply struct {
	result json.RawMessage
	err    error
}

func startMCPStdio(c mcpServerConfig) (*mcpStdio, error) {
	if c.Command == "" {
		return nil, errors.New("no command")
	}
	cmd := exec.Command(c.Command, c.Args...)
	cmd.Env = os.Environ()
	for _, e := range c.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Stderr = os.Stderr // the server's log is the agent's
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &mcpStdio{cmd: cmd, stdin: stdin, waiting: map[string]chan mcpReply{}}
	go s.read(stdout)
	return s, nil
}

// read delivers the server's answers to their callers; a line that is not
// JSON-RPC is skipped, as clients do.
func (s *mcpStdio) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *mcpError       `json:"error"`
		}
		if json.Unmarshal(bytes.TrimSpace(line), &m) == nil && m.ID != nil {
			reply := mcpReply{result: m.Result}
			if m.Error != nil {
				reply.err = m.Error
			}
			s.mu.Lock()
			ch := s.waiting[string(m.ID)]
			delete(s.waiting, string(m.ID))
			s.mu.Unlock()
			if ch != nil {
				ch <- reply
			}
		}
		if err != nil {
			s.mu.Lock()
			s.ended = fmt.Errorf("the server's output ended: %w", err)
			for id, ch := range s.waiting {
				ch <- mcpReply{err: s.ended}
				delete(s.waiting, id)
			}
			s.mu.Unlock()
			return
		}
	}
}

func (s *mcpStdio) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = s.stdin.Write(append(b, '\n'))
	return err
}

func (s *mcpStdio) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	s.mu.Lock()
	if s.ended != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", method, s.ended)
	}
	s.nextID++
	id := fmt.Sprint(s.nextID)
	ch := make(chan mcpReply, 1)
	s.waiting[id] = ch
	err := s.write(map[string]any{"jsonrpc": "2.0", "id": s.nextID, "method": method, "params": params})
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%s: %w", method, r.err)
		}
		return r.result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

func (s *mcpStdio) notify(method string, params any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	return s.write(m)
}

// close ends the server: its stdin closed, then killed if it lingers.
func (s *mcpStdio) close() {
	s.stdin.Close()
	done := make(chan struct{})
	go func() {
		s.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// mcpHTTP is a Streamable HTTP MCP server.
type mcpHTTP struct {
	url     string
	headers []nameVal

	mu      sync.Mutex // guards nextID and session
	nextID  int
	session string // Mcp-Session-Id, once initialize gave one
}

func (h *mcpHTTP) post(ctx context.Context, msg map[string]any) (*http.Response, error) {
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcpProtocolVersion)
	for _, hv := range h.headers {
		req.Header.Set(hv.Name, hv.Value)
	}
	h.mu.Lock()
	if h.session != "" {
		req.Header.Set("Mcp-Session-Id", h.session)
	}
	h.mu.Unlock()
	return http.DefaultClient.Do(req)
}

func (h *mcpHTTP) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	h.mu.Lock()
	h.nextID++
	id := h.nextID
	h.mu.Unlock()
	resp, err := h.post(ctx, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		h.mu.Lock()
		h.session = s
		h.mu.Unlock()
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", method, resp.Status)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The answer as the one data event of a stream.
		for line := range strings.Lines(string(body)) {
			if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data:"); ok {
				body = []byte(strings.TrimSpace(data))
			}
		}
	}
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  *mcpError       `json:"error"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if m.Error != nil {
		return nil, fmt.Errorf("%s: %w", method, m.Error)
	}
	return m.Result, nil
}

func (h *mcpHTTP) notify(method string, params any) error {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	resp, err := h.post(context.Background(), m)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	resp.Body.Close()
	return nil
}

func (h *mcpHTTP) close() {}

// mcpCall is an MCP tool call of --mcp-call.
type mcpCall struct {
	tool string
	args json.RawMessage
}

// mcpRounds makes the --mcp-call calls of a scripted turn, each as a tool
// call of the session, and returns what the answer says of them, and of
// the session's MCP servers that could not be connected.
func (a *agent) mcpRounds(ctx context.Context, s *session) (string, error) {
	var said []string
	for _, err := range append(slices.Clone(s.mcpErrs), s.acpErrs...) {
		said = append(said, err.Error())
	}
	clients := s.clients()
	if n := a.cfg.mcpBench; n > 0 && len(clients) > 0 {
		rtts := make([]time.Duration, 0, n)
		args := json.RawMessage(`{"topic":"answer"}`)
		for range n {
			start := time.Now()
			if _, _, err := clients[0].callTool(ctx, "lookup", args); err != nil {
				return "", err
			}
			rtts = append(rtts, time.Since(start))
		}
		slices.Sort(rtts)
		said = append(said, fmt.Sprintf("mcp bench: %d calls, p50 %d ns, p99 %d ns", n, rtts[n/2], rtts[n*99/100]))
	}
	for _, c := range a.cfg.mcpCalls {
		var servers []*mcpClient
		for _, m := range clients {
			if slices.Contains(m.tools, c.tool) {
				servers = append(servers, m)
			}
		}
		if len(servers) == 0 {
			said = append(said, "mcp "+c.tool+": no MCP server of the session has it")
			continue
		}
		for _, server := range servers {
			text, err := a.mcpToolCall(ctx, s, server, c)
			if err != nil {
				return "", err
			}
			said = append(said, "mcp "+server.name+" "+c.tool+": "+text)
		}
	}
	if len(said) == 0 {
		return "", nil
	}
	return strings.Join(said, "; ") + "\n", nil
}

// mcpToolCall makes one MCP tool call as a tool call of the session and
// returns its text, clipped; errCancelled if the turn ended.
func (a *agent) mcpToolCall(ctx context.Context, s *session, server *mcpClient, c mcpCall) (string, error) {
	callID := "call_" + randHex(12)
	title := "mcp " + server.name + " " + c.tool
	if a.noise != nil {
		c.args = a.noise.mcpArguments(c.args)
	}
	a.update(s, toolCall{SessionUpdate: "tool_call", ToolCallID: callID, Title: title, Kind: "fetch", Status: "pending",
		RawInput: map[string]any{"server": server.name, "tool": c.tool, "arguments": c.args}})
	text, isError, err := server.callTool(ctx, c.tool, c.args)
	if ctx.Err() != nil {
		return "", errCancelled
	}
	status := "completed"
	switch {
	case err != nil:
		text, status = "error: "+err.Error(), "failed"
	case isError:
		status = "failed"
	}
	a.update(s, toolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: callID, Status: status, Content: textContent(clipText(text))})
	return clipText(text), nil
}

// clipText shortens a long tool result for the agent's output.
func clipText(s string) string {
	if len(s) <= 200 {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:200], len(s))
}

// closeMCP ends every session's MCP servers.
func (a *agent) closeMCP() {
	a.mu.Lock()
	var clients []*mcpClient
	for _, s := range a.sessions {
		clients = append(clients, s.mcp...)
	}
	a.mu.Unlock()
	for _, c := range clients {
		c.rpc.close()
	}
}

// mcpFunctions are the session's MCP tools as functions offered to the
// model (LLM mode), named mcp__SERVER__TOOL as agents name them.
func (s *session) mcpFunctions() []any {
	var out []any
	for _, c := range s.clients() {
		for _, tool := range c.tools {
			schema := c.schemas[tool]
			params := schema.InputSchema
			if len(params) == 0 {
				params = json.RawMessage(`{"type":"object"}`)
			}
			out = append(out, map[string]any{"type": "function", "function": map[string]any{
				"name": "mcp__" + c.name + "__" + tool, "description": schema.Description, "parameters": params,
			}})
		}
	}
	return out
}

// mcpFunction runs a model's call of an MCP function (see mcpFunctions)
// as a tool call of the session; ok is false for another function.
func (a *agent) mcpFunction(ctx context.Context, s *session, name, args string) (result string, ok bool, err error) {
	rest, found := strings.CutPrefix(name, "mcp__")
	server, tool, found2 := strings.Cut(rest, "__")
	if !found || !found2 {
		return "", false, nil
	}
	for _, c := range s.clients() {
		if c.name == server && slices.Contains(c.tools, tool) {
			text, err := a.mcpToolCall(ctx, s, c, mcpCall{tool: tool, args: json.RawMessage(args)})
			return text, true, err
		}
	}
	return "", false, nil
}

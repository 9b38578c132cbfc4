package driver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/replay/mcpstandin"
)

// MCP servers the editor hosts on the ACP connection (the RFD
// "MCP-over-ACP", agentclientprotocol.com/rfds/mcp-over-acp): the editor
// declares each in the mcpServers of session/new (or session/load,
// session/resume) as {"type":"acp","name":...,"id":...}; the agent opens
// a connection with the request mcp/connect {acpId}, which the editor
// answers {connectionId}, sends the server its MCP messages as mcp/message
// requests and notifications of the connection ({connectionId, method,
// params}: the inner message flattened; the answer's result is the inner
// result, its error the inner error), and closes it with mcp/disconnect
// {connectionId}.
//
// The agent's mcp/connect and mcp/disconnect get the editor's recorded
// answers as any agent request does, counted per server (the k-th
// mcp/connect of a server gets the recorded answer to the k-th) and per
// connection. An mcp/message is answered by its inner MCP message, as
// the stand-in of a stdio MCP server answers (package mcpstandin): a
// Matcher per server, made from the server's recorded mcp/message
// requests and the editor's answers, picks the recorded request of the
// same method (a tools/call of the same tool and normalized arguments),
// whose recorded answer is sent; one the recording cannot answer gets the
// Matcher's error as the answer's error, and Result.MCP says so, as it
// says which recorded calls were never made.

// MCP methods of the ACP connection.
const (
	mcpConnect    = "mcp/connect"
	mcpMessage    = "mcp/message"
	mcpDisconnect = "mcp/disconnect"
)

// MCPMatching is how an MCP tool call's arguments are normalized before
// they are matched with the recorded ones (see mcpstandin.Plan): under
// the recorded directories and the replay's, with Rules, a rules file
// (normalize.FormatRules), applied besides the defaults.
type MCPMatching struct {
	Cwd, Home, Tmp []string
	Rules          string
}

// mcpParams are what the driver reads of the params of mcp/connect,
// mcp/message and mcp/disconnect.
type mcpParams struct {
	// AcpID is mcp/connect's server id as the RFD names it; ServerID as
	// the unstable schema has since renamed it.
	AcpID        string          `json:"acpId"`
	ServerID     string          `json:"serverId"`
	ConnectionID string          `json:"connectionId"`
	Method       string          `json:"method"`
	Params       json.RawMessage `json:"params"`
}

func readMCPParams(params json.RawMessage) mcpParams {
	var p mcpParams
	json.Unmarshal(params, &p)
	if p.AcpID == "" {
		p.AcpID = p.ServerID
	}
	return p
}

// isMCP reports whether method is one of the MCP methods of the ACP
// connection.
func isMCP(method string) bool {
	return method == mcpConnect || method == mcpMessage || method == mcpDisconnect
}

// mcpSeries returns the series of an agent request of an MCP method,
// given its recorded connection: the requests of a server's connections
// interleave with other sessions' and connections' as the agent's tasks
// run, but keep their order within a connection, as mcp/connect does per
// server.
func mcpSeries(method string, p mcpParams, conn string) reqSeries {
	if method == mcpConnect {
		return reqSeries{session: "mcp server " + p.AcpID, method: method}
	}
	return reqSeries{session: "mcp connection " + conn, method: method}
}

// mcpServer is one MCP server the recorded editor hosted over ACP.
type mcpServer struct {
	name, id string
	// lines are its recorded MCP messages: each mcp/message request of
	// the agent's as the inner request, its Exchange the request's frame
	// index + 1 (so that a Matcher's Reply names the recorded request it
	// matched), and the editor's answer as the inner answer, their id
	// the request's number among the server's.
	lines []mcpstandin.PlanLine
	plan  *mcpstandin.Plan // made by NewFrom
}

// mcpPlan is what a plan knows of the recording's MCP servers over ACP.
type mcpPlan struct {
	servers []*mcpServer          // in the order the editor declared them
	byID    map[string]*mcpServer // by the id the editor gave them
	conns   map[string]*mcpServer // by recorded connectionId
	// answers are the editor's answers to the mcp/message requests of
	// servers, by the request's frame index.
	answers map[int]answer
	// pending are the agent's mcp/connect and mcp/message requests not
	// answered yet in the recording, by id (IDKey).
	pending map[string]mcpPending
}

// mcpPending is an MCP request of the agent's awaiting its recorded answer.
type mcpPending struct {
	method string
	acpID  string     // of an mcp/connect
	server *mcpServer // of an mcp/message
	frame  int        // of an mcp/message
	n      int        // of an mcp/message: the inner id
}

func newMCPPlan() *mcpPlan {
	return &mcpPlan{byID: map[string]*mcpServer{}, conns: map[string]*mcpServer{}, answers: map[int]answer{}, pending: map[string]mcpPending{}}
}

// declare notes the ACP-hosted MCP servers of an editor request: the
// entries of type acp of a session/new's, session/load's or
// session/resume's mcpServers. A server declared again (the same id in
// another session) is the same server.
func (mp *mcpPlan) declare(m acp.Message) {
	if m.Method != "session/new" && m.Method != "session/load" && m.Method != "session/resume" ||
		!bytes.Contains(m.Params, []byte(`"acp"`)) {
		return
	}
	var p struct {
		MCPServers []struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			ID       string `json:"id"`
			ServerID string `json:"serverId"`
		} `json:"mcpServers"`
	}
	json.Unmarshal(m.Params, &p)
	for _, s := range p.MCPServers {
		id := s.ID
		if id == "" {
			id = s.ServerID
		}
		if s.Type != "acp" || id == "" || mp.byID[id] != nil {
			continue
		}
		srv := &mcpServer{name: s.Name, id: id}
		mp.servers = append(mp.servers, srv)
		mp.byID[id] = srv
	}
}

// request notes recorded agent request i, m, of an MCP method, and
// returns its series.
func (mp *mcpPlan) request(i int, m acp.Message) reqSeries {
	p := readMCPParams(m.Params)
	switch srv := mp.conns[p.ConnectionID]; {
	case m.Method == mcpConnect:
		mp.pending[acp.IDKey(m.ID)] = mcpPending{method: m.Method, acpID: p.AcpID}
	case m.Method == mcpMessage && srv != nil:
		n := len(srv.lines) + 1
		srv.lines = append(srv.lines, mcpstandin.PlanLine{Dir: lane.ToServer, Line: innerRequest(n, p), Exchange: i + 1})
		mp.pending[acp.IDKey(m.ID)] = mcpPending{method: m.Method, server: srv, frame: i, n: n}
	}
	return mcpSeries(m.Method, p, p.ConnectionID)
}

// answer notes the editor's recorded answer, frame i, m, to an agent
// request: an mcp/connect's opens a connection of its server, an
// mcp/message's is the server's answer. a is when it is to be sent.
func (mp *mcpPlan) answer(i int, m acp.Message, data []byte, a answer) {
	id := acp.IDKey(m.ID)
	req, ok := mp.pending[id]
	if !ok {
		return
	}
	delete(mp.pending, id)
	switch req.method {
	case mcpConnect:
		var res struct {
			ConnectionID string `json:"connectionId"`
		}
		json.Unmarshal(m.Result, &res)
		if srv := mp.byID[req.acpID]; srv != nil && res.ConnectionID != "" {
			mp.conns[res.ConnectionID] = srv
		}
	case mcpMessage:
		var res struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		json.Unmarshal(data, &res)
		inner := map[string]any{"jsonrpc": "2.0", "id": req.n}
		if res.Error != nil {
			inner["error"] = res.Error
		} else {
			inner["result"] = res.Result
		}
		line, _ := json.Marshal(inner) // raw JSON and numbers always marshal
		req.server.lines = append(req.server.lines, mcpstandin.PlanLine{Dir: lane.FromServer, Line: string(line)})
		mp.answers[req.frame] = a
	}
}

// innerRequest returns the MCP request an mcp/message carries, of id id.
func innerRequest(id int, p mcpParams) string {
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": p.Method}
	if len(p.Params) > 0 && string(p.Params) != "null" {
		m["params"] = p.Params
	}
	line, _ := json.Marshal(m)
	return string(line)
}

// plans makes each server's mcpstandin.Plan, its tool calls normalized
// under roots.
func (mp *mcpPlan) plans(m MCPMatching) {
	for _, srv := range mp.servers {
		srv.plan = &mcpstandin.Plan{Server: srv.name, Cwd: m.Cwd, Home: m.Home, Tmp: m.Tmp, Rules: m.Rules, Lines: srv.lines}
	}
}

// mcpRun is a Run's state of the MCP servers over ACP.
type mcpRun struct {
	// conns are the connections the Run opened: the connectionId it
	// answered an mcp/connect with → the recorded one, which differ when
	// the answer's id was rewritten.
	conns    map[string]string
	matchers map[*mcpServer]*mcpstandin.Matcher
	logs     map[*mcpServer]*bytes.Buffer
}

// mcpSeries returns the series of a live agent request of an MCP method.
func (r *run) mcpSeries(method string, params json.RawMessage) reqSeries {
	p := readMCPParams(params)
	conn, ok := r.mcp.conns[p.ConnectionID]
	if !ok {
		conn = r.subs.recorded(p.ConnectionID)
	}
	if method == mcpConnect {
		p.AcpID = r.subs.recorded(p.AcpID)
	}
	return mcpSeries(method, p, conn)
}

// mcpOpened notes the connection the answer line, sent for the recorded
// answer frame, opens: its connectionId as sent and as recorded.
func (r *run) mcpOpened(frame int, line []byte) {
	data, ok := r.frame(frame)
	if !ok {
		return
	}
	var rec, live struct {
		Result struct {
			ConnectionID string `json:"connectionId"`
		} `json:"result"`
	}
	json.Unmarshal(data, &rec)
	json.Unmarshal(line, &live)
	if rec.Result.ConnectionID != "" && live.Result.ConnectionID != "" {
		if r.mcp.conns == nil {
			r.mcp.conns = make(map[string]string)
		}
		r.mcp.conns[live.Result.ConnectionID] = rec.Result.ConnectionID
	}
}

// mcpMessage answers live agent request k, m, an mcp/message of a
// connection of a recorded server, by its inner message (see above), and
// reports whether it was one.
func (r *run) mcpMessage(k reqKey, m acp.Message) bool {
	conn := strings.TrimPrefix(k.session, "mcp connection ")
	srv := r.p.mcp.conns[conn]
	if m.Method != mcpMessage || srv == nil {
		return false
	}
	if r.mcp.matchers == nil {
		r.mcp.matchers = make(map[*mcpServer]*mcpstandin.Matcher)
		r.mcp.logs = make(map[*mcpServer]*bytes.Buffer)
	}
	matcher := r.mcp.matchers[srv]
	if matcher == nil {
		log := new(bytes.Buffer)
		matcher = mcpstandin.NewMatcher(srv.plan, log)
		r.mcp.matchers[srv], r.mcp.logs[srv] = matcher, log
	}
	p := readMCPParams(m.Params)
	reply, err := matcher.Reply([]byte(innerRequest(1, p)))
	if reply.Exchange > 0 {
		// The recorded request it matched is its twin.
		frame := reply.Exchange - 1
		if data, ok := r.frame(frame); ok {
			rec := acp.Parse(data)
			r.subs.learn(rec.Params, m.Params)
			r.requestTwin(rec.ID)
		}
		if a, ok := r.p.mcp.answers[frame]; ok && err == nil {
			// Sent where the k-th request of the connection was answered
			// in the recording, whichever recorded answer it is: one of
			// a later turn must not wait for that turn.
			a.after = 0
			if twin, ok := r.p.answer(k); ok {
				a.after = twin.after
			}
			r.answers = append(r.answers, queued{a, k, m.ID, m.Params})
			r.flushAnswers()
		}
		// Without a recorded answer (mcpstandin.ErrEnded) it gets none,
		// as then.
		return true
	}
	if len(reply.Lines) == 0 {
		return true // a hang, or nothing to answer
	}
	// The recording cannot answer it: the Matcher's error, which its log
	// notes, is the answer's.
	var inner struct {
		Error *acp.ResponseError `json:"error"`
	}
	if json.Unmarshal(reply.Lines[0], &inner) != nil || inner.Error == nil {
		inner.Error = &acp.ResponseError{Code: acp.CodeInternalError, Message: "acptap replay: no recorded answer for " + p.Method + " of MCP server " + srv.name}
	}
	line, _ := json.Marshal(acp.Envelope{JSONRPC: acp.Version, ID: m.ID, Error: inner.Error}) // a valid id always marshals
	r.queue = append(r.queue, write{data: line, frame: -1, what: fmt.Sprintf("the error response to %s #%d", k.method, k.n)})
	return true
}

// mcpReports returns what each server's Matcher saw, for Result.MCP.
func (r *run) mcpReports() ([]mcpstandin.Report, error) {
	var out []mcpstandin.Report
	for _, srv := range r.p.mcp.servers {
		var log io.Reader // none: the agent sent the server nothing
		if l := r.mcp.logs[srv]; l != nil {
			log = l
		}
		rep, err := mcpstandin.ReadLog(srv.plan, log)
		if err != nil {
			return nil, fmt.Errorf("the notes on MCP server %s: %w", srv.name, err)
		}
		out = append(out, rep)
	}
	return out, nil
}

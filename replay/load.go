package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay/llmserver"
	"github.com/acptap/acptap/replay/mcpstandin"
	"github.com/acptap/acptap/stdiotap"
	"github.com/acptap/acptap/store"
)

// recording is what a replay reads of a stored recording.
type recording struct {
	meta store.Recording
	// frames are the editor and agent frames in recorded order, Continued
	// pieces joined, spooled; compared are the frames among them that take
	// part in the comparison (see compared), by index: the agent's, and
	// the editor's, which say what the agent's answer.
	frames   *frameSpool
	compared []int
	editors  int      // how many of frames are the editor's
	cwds     []string // the cwds of the editor's session/new, session/load and session/resume requests
	sessions int      // how many sessions the editor made, loaded or resumed
	// editorSeqs are the editor's frames' numbers as `acptap show`
	// numbers them (their Seqs), in order, for the stdio faults that
	// name them.
	editorSeqs []uint64
	// seqs are every frame's number as `acptap show` numbers it, by its
	// index in frames, for the messages of the driver, which names
	// frames by index (see frameName).
	seqs []uint64
	// mcp are the lines of each MCP server, by its index in
	// meta.MCPServers, in recorded order: a stdio server's lanes', an
	// HTTP or SSE server's messages in its exchanges.
	mcp [][]mcpstandin.PlanLine
	// mcpResponses are, by the index of an HTTP or SSE server, how its
	// recorded exchanges were answered, by exchange number.
	mcpResponses []map[int]mcpstandin.HTTPResponse
	mcpTimed     map[int][]mcpstandin.TimedLine // while loading: an HTTP or SSE server's lines, by index
	// exchanges are the complete LLM exchanges, in recorded order: their
	// heads, whose whole exchanges llm has, or, for a recording made up
	// by a test, with llm nil, the whole exchanges.
	exchanges []llmserver.Recorded
	llm       *exchangeSpool
	rules     []normalize.Rule // stored by calibrate, unless Options.Uncalibrated
}

// load reads the named recording of st: its metadata, its editor and agent
// frames, each line whole, into a spool, and its complete LLM exchanges,
// numbered as `acptap show` numbers them, into another, keeping in memory
// only their heads. Stderr is left out: a replay neither plays nor
// compares it. The caller closes the recording.
func load(st *store.Store, name string) (*recording, error) {
	meta, err := st.Get(name)
	if err != nil {
		return nil, err
	}
	frames, err := newSpool()
	if err != nil {
		return nil, err
	}
	exchanges, err := newSpool()
	if err != nil {
		frames.close()
		return nil, err
	}
	rec := &recording{meta: meta, frames: &frameSpool{spool: frames}, llm: &exchangeSpool{spool: exchanges}}
	number := 0
	err = st.Lines(name, func(e store.Event) error {
		if server, dir, ok := e.Lane.MCP(); ok {
			rec.growMCP(server)
			rec.mcp[server] = append(rec.mcp[server], mcpstandin.PlanLine{Dir: dir, Line: string(e.Data)})
			return nil
		}
		switch e.Lane {
		case store.LaneEditor, store.LaneAgent:
			data := e.Data
			// Masked as a recording is now, for one made before frames
			// were (a no-op on one made since): the live agent's lines
			// are masked so, and an editor frame plays the mask.
			data = redact.Members(data)
			l := lane.Editor
			if compared(data) {
				rec.compared = append(rec.compared, rec.frames.Len())
			}
			if e.Lane == store.LaneAgent {
				l = lane.Agent
			} else {
				rec.editors++
				rec.editorSeqs = append(rec.editorSeqs, e.Seq)
				rec.addSession(data)
			}
			rec.seqs = append(rec.seqs, e.Seq)
			rec.frames.add(l, data)
		case store.LaneLLM:
			if e.Flags&store.FlagIncomplete != 0 {
				// In flight when the recording stopped: no response to
				// serve, and never counted by show either.
				return nil
			}
			number++
			// The head queues and names the exchange; the rest is
			// decoded when it is served, and what a request repeats of
			// the conversation is in memory once at a time.
			x, rest, err := exchange.UnmarshalHead(e.Data)
			if err != nil {
				return fmt.Errorf("llm #%d (event %d): %w", number, e.Seq, err)
			}
			if x.Route == exchange.RouteMCP {
				if err := rec.addMCPExchange(number, e); err != nil {
					return fmt.Errorf("llm #%d (event %d): %w", number, e.Seq, err)
				}
			}
			head := &exchange.Exchange{Route: x.Route, MCPServer: x.MCPServer, Method: x.Method, URL: x.URL, Status: x.Status}
			rec.exchanges = append(rec.exchanges, llmserver.Recorded{Number: number, Seq: e.Seq, Exchange: head, Facts: llmserver.ReadRequestFacts(x)})
			rec.llm.add(x.RequestBody, rest)
		}
		return nil
	})
	for i, lines := range rec.mcpTimed {
		rec.growMCP(i)
		rec.mcp[i] = mcpstandin.SortLines(lines)
	}
	rec.mcpTimed = nil
	if err == nil {
		err = rec.frames.flush()
	}
	if err == nil {
		err = rec.llm.flush()
	}
	if err != nil {
		rec.close()
		return nil, err
	}
	return rec, nil
}

// growMCP makes rec.mcp and rec.mcpResponses hold server index i.
func (rec *recording) growMCP(i int) {
	for len(rec.mcp) <= i {
		rec.mcp = append(rec.mcp, nil)
	}
	for len(rec.mcpResponses) <= i {
		rec.mcpResponses = append(rec.mcpResponses, nil)
	}
}

// addMCPExchange takes exchange number of an HTTP or SSE MCP server, the
// event e, into the server's lines and responses.
func (rec *recording) addMCPExchange(number int, e store.Event) error {
	x, err := exchange.Unmarshal(e.Data)
	if err != nil {
		return err
	}
	i := x.MCPServer - 1
	if i < 0 || i >= len(rec.meta.MCPServers) {
		return fmt.Errorf("an exchange with MCP server %d, which the recording does not list", x.MCPServer)
	}
	if rec.mcpTimed == nil {
		rec.mcpTimed = map[int][]mcpstandin.TimedLine{}
	}
	rec.mcpTimed[i] = append(rec.mcpTimed[i], mcpstandin.ExchangeLines(number, e.Offset, x)...)
	rec.growMCP(i)
	if rec.mcpResponses[i] == nil {
		rec.mcpResponses[i] = map[int]mcpstandin.HTTPResponse{}
	}
	resp := mcpstandin.HTTPResponse{Method: x.Method, Status: x.Status, Header: x.ResponseHeaders, Error: x.Error}
	if u, err := url.Parse(x.URL); err == nil {
		resp.Host = u.Host
	}
	rec.mcpResponses[i][number] = resp
	return nil
}

// close removes the recording's spools.
func (rec *recording) close() {
	rec.frames.close()
	if rec.llm != nil {
		rec.llm.close()
	}
}

// recorded returns rec's exchanges as its LLM server takes them: the
// heads, whose whole exchanges the spool has, or, for a recording made up
// by a test, the whole exchanges in memory.
func (rec *recording) recorded() llmserver.Exchanges {
	if rec.llm == nil {
		return llmserver.List(rec.exchanges)
	}
	return spooledExchanges{heads: rec.exchanges, spool: rec.llm}
}

// load returns the whole exchange of r, one of rec.exchanges.
func (rec *recording) load(r llmserver.Recorded) (*exchange.Exchange, error) {
	x, err := rec.recorded().Load(r.Number)
	if err != nil {
		return nil, fmt.Errorf("llm #%d (event %d): %w", r.Number, r.Seq, err)
	}
	return x, nil
}

// acpLines returns the recorded frames that take part in the comparison.
func (rec *recording) acpLines() lane.Lines {
	return spooledLines{s: rec.frames, index: rec.compared}
}

// command returns the agent command to replay rec with: override, else
// the recorded one. It fails with ErrNoCommand when neither has one.
//
// A recorded program typed with a relative path (./agent) is replayed by
// the absolute path it resolved to when recorded, since the replay runs in
// a sandbox; a bare name (my-agent) is looked up in PATH again, as typed.
func (rec *recording) command(override []string) ([]string, error) {
	argv := override
	if argv == nil {
		argv = rec.meta.Argv
		if len(argv) > 0 && relativePath(argv[0]) && rec.meta.AgentPath != "" {
			argv = append([]string{rec.meta.AgentPath}, argv[1:]...)
		}
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: recording %q has no agent command", ErrNoCommand, rec.meta.Name)
	}
	return argv, nil
}

// relativePath reports whether a program name is a path relative to the
// working directory rather than a name looked up in PATH.
func relativePath(program string) bool {
	return strings.ContainsRune(program, filepath.Separator) && !filepath.IsAbs(program)
}

// startError explains why the agent of argv could not be started: what
// was tried.
func (rec *recording) startError(argv []string, override bool, err error) error {
	if !errors.Is(err, stdiotap.ErrNotFound) {
		return err
	}
	nf := &AgentNotFoundError{Program: argv[0], Err: err}
	if !override && len(rec.meta.Argv) > 0 {
		nf.Recorded = rec.meta.Argv[0]
	}
	return nf
}

// addSession takes an editor frame: a session/new, session/load or
// session/resume request counts a session, and its cwd is added to
// rec.cwds.
func (rec *recording) addSession(frame []byte) {
	if sessionRequest(frame) != nil {
		rec.sessions++
		rec.cwds = addSessionCwd(rec.cwds, frame)
	}
}

// sessionRequest returns the params of an editor frame that is a
// session/new, session/load or session/resume request, nil for another.
func sessionRequest(frame []byte) json.RawMessage {
	if !acp.MayOpenSession(frame) {
		return nil // not worth decoding
	}
	m := acp.Parse(frame)
	if !acp.OpensSession(m) {
		return nil
	}
	if m.Params == nil {
		return json.RawMessage("null")
	}
	return m.Params
}

// addSessionCwd adds to cwds the cwd of an editor frame that is a
// session/new, session/load or session/resume request, if it is absolute
// and new.
func addSessionCwd(cwds []string, frame []byte) []string {
	var p struct {
		Cwd string `json:"cwd"`
	}
	if params := sessionRequest(frame); params != nil && json.Unmarshal(params, &p) == nil && filepath.IsAbs(p.Cwd) && !slices.Contains(cwds, p.Cwd) {
		cwds = append(cwds, p.Cwd)
	}
	return cwds
}

// StoredRules returns the rules `acptap calibrate` stored with the named
// recording (store.RulesBlob), nil if it has none. A blob that is not a
// rules file fails with ErrStoredRules.
func StoredRules(st *store.Store, name string) ([]normalize.Rule, error) {
	b, err := st.Blob(name, store.RulesBlob)
	if errors.Is(err, store.ErrNotFound) {
		if _, err := st.Get(name); err != nil {
			return nil, err
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rules, err := normalize.ParseRules(b)
	if err != nil {
		return nil, fmt.Errorf("%w of recording %q: %v", ErrStoredRules, name, err)
	}
	return rules, nil
}

// frameName names frame i of frames as `acptap show` numbers it, for the
// driver's messages (driver.Options.FrameName).
func (rec *recording) frameName(i int) string {
	if i < 0 || i >= len(rec.seqs) {
		return "frame index " + strconv.Itoa(i)
	}
	return "frame " + strconv.FormatUint(rec.seqs[i], 10)
}

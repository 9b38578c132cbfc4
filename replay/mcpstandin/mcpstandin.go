// Package mcpstandin serves an MCP server to a replayed agent from the recording, in the server's place: the agent starts it over stdio as it started the server.
//
// A replay gives the agent, in place of a stdio MCP server's command in
// session/new, `acptap __mcp-standin PLAN LOG`: PLAN holds the server's
// recorded lines (see WritePlan), LOG is where the stand-in notes what it
// served. It answers each request the agent sends with the recorded answer
// of the same method: a tools/call with the recorded call of the same tool
// and arguments (normalized, as replay normalizes: paths under the
// recorded and the replay's directories alike), the first not served yet;
// another method with its first recorded request not served yet, or its
// last again. The answer takes the live request's id, and the server's
// notifications recorded after it follow it. A request the recording
// cannot answer gets an error, and both it and every recorded request
// never asked are in the LOG, which Read turns into a Report.
package mcpstandin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/acptap/acptap/lane"
	"github.com/acptap/acptap/mismatch"
	"github.com/acptap/acptap/normalize"
)

// Command is the stand-in's command, acptap's first argument.
const Command = "__mcp-standin"

// Plan is what a stand-in serves: one server's recorded lines and the
// directories their paths are normalized under.
type Plan struct {
	Server string `json:"server"`
	// Cwd, Home and Tmp are the roots of normalize.Options: the recorded
	// directories and the replay's.
	Cwd  []string `json:"cwd,omitempty"`
	Home []string `json:"home,omitempty"`
	Tmp  []string `json:"tmp,omitempty"`
	// Lines are the server's lines in recorded order.
	Lines []PlanLine `json:"lines"`
	// Faults are failures to inject into the server's tool calls.
	Faults []Fault `json:"faults,omitempty"`
	// Rules are normalization rules (a rules file, normalize.ParseRules)
	// applied besides the defaults where calls and answers are compared:
	// those calibrate learned.
	Rules string `json:"rules,omitempty"`
	// Calibrating has the stand-in serve a tools/call without a twin
	// the first recorded call of its tool not yet served, and log each
	// call, and each live answer, with the recorded one it is paired
	// with, normalized (Report.Calls), for calibrate to learn what
	// varies: no call is left unanswered for a value, and no live answer
	// drifts.
	Calibrating bool `json:"calibrating,omitempty"`
}

// A Fault is a failure a stand-in injects into the Call-th tools/call the
// agent makes (from 1), in place of the recorded answer: "error" answers
// a tool result that is an error, "hang" never answers, "crash" ends the
// stand-in as a crashed server ends.
type Fault struct {
	Call int    `json:"call"`
	Kind string `json:"kind"`
}

// FaultKinds are the kinds of Fault.
var FaultKinds = []string{"error", "hang", "crash"}

// PlanLine is one recorded line of the server.
type PlanLine struct {
	Dir  lane.MCPDir `json:"dir"`
	Line string      `json:"line"`
	// Exchange is, for a server reached over HTTP, the number of the
	// recorded exchange that carried the line ("llm #N"); for one the
	// editor hosts over ACP, the index + 1 of the ACP frame that carried
	// it (see package driver); 0 for a stdio server's line.
	Exchange int `json:"exchange,omitempty"`
}

// WritePlan writes p to path.
func WritePlan(path string, p *Plan) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// envelope is a JSON-RPC message as the stand-in reads it.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// entry is a recorded request and what the server sent for it.
type entry struct {
	n        int // its number among the recorded requests, from 1
	exchange int // PlanLine.Exchange of the request
	method   string
	params   json.RawMessage
	answer   map[string]json.RawMessage // nil if the recording has none
	before   [][]byte                   // the server's notifications in the answer's exchange before it (HTTP)
	after    [][]byte                   // the server's notifications recorded after the answer
	call     json.RawMessage            // a tools/call's params normalized, once match needed them
	served   bool
	summary  string
}

// server is a stand-in's state.
type server struct {
	plan    *Plan
	rules   []normalize.Rule // Plan.Rules
	entries []*entry
	log     io.Writer
	calls   int // the tools/call requests taken so far
}

func newServer(p *Plan, log io.Writer) *server {
	s := &server{plan: p, log: log}
	if p.Rules != "" {
		// The replay parsed them before it wrote them.
		s.rules, _ = normalize.ParseRules([]byte(p.Rules))
	}
	byID := map[string]*entry{}
	byExchange := map[int]*entry{} // an HTTP server's requests, by the exchange that carried them
	var last *entry
	for _, l := range p.Lines {
		var m envelope
		if json.Unmarshal([]byte(l.Line), &m) != nil {
			continue
		}
		switch {
		case l.Dir == lane.ToServer && m.Method != "" && m.ID != nil:
			e := &entry{n: len(s.entries) + 1, exchange: l.Exchange, method: m.Method, params: m.Params, summary: summarize(m)}
			s.entries = append(s.entries, e)
			byID[string(m.ID)] = e
			if l.Exchange != 0 && byExchange[l.Exchange] == nil {
				byExchange[l.Exchange] = e
			}
		case l.Dir == lane.FromServer && m.Method == "" && m.ID != nil:
			if e := byID[string(m.ID)]; e != nil && e.answer == nil {
				var msg map[string]json.RawMessage
				if json.Unmarshal([]byte(l.Line), &msg) == nil {
					e.answer, last = msg, e
				}
			}
		case l.Dir == lane.FromServer && m.Method != "" && m.ID == nil && byExchange[l.Exchange] != nil:
			// In the response to a request: with its answer.
			if e := byExchange[l.Exchange]; e.answer == nil {
				e.before = append(e.before, []byte(l.Line))
			} else {
				e.after = append(e.after, []byte(l.Line))
			}
		case l.Dir == lane.FromServer && m.Method != "" && m.ID == nil && last != nil:
			last.after = append(last.after, []byte(l.Line))
		}
	}
	return s
}

// summarize names a request as reports do: its method, and for a
// tools/call its tool and arguments.
func summarize(m envelope) string {
	if m.Method != "tools/call" {
		return m.Method
	}
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	json.Unmarshal(m.Params, &p)
	return "tools/call " + p.Name + " " + string(p.Arguments)
}

// match returns the recorded entry that answers m, nil if none does.
func (s *server) match(m envelope) *entry {
	var lastOfMethod *entry
	var live json.RawMessage // m's params normalized, for a tools/call
	if m.Method == "tools/call" {
		live = s.normalized(m.Params)
	}
	for _, e := range s.entries {
		if e.method != m.Method {
			continue
		}
		if live != nil {
			if e.call == nil {
				e.call = s.normalized(e.params)
			}
			if !bytes.Equal(e.call, live) {
				continue
			}
		}
		if !e.served {
			return e
		}
		lastOfMethod = e
	}
	if m.Method == "tools/call" {
		if s.plan.Calibrating {
			return s.sameTool(m)
		}
		return nil // a call is answered once
	}
	return lastOfMethod
}

// sameTool returns the first recorded call of m's tool not yet served,
// nil if there is none: a calibration's twin of a call whose arguments
// vary.
func (s *server) sameTool(m envelope) *entry {
	tool := toolName(m.Params)
	for _, e := range s.entries {
		if e.method == m.Method && !e.served && toolName(e.params) == tool {
			return e
		}
	}
	return nil
}

// toolName returns the name of a tools/call's params.
func toolName(params json.RawMessage) string {
	var p struct {
		Name string `json:"name"`
	}
	json.Unmarshal(params, &p)
	return p.Name
}

// keepCall logs, when calibrating, a tools/call of the agent's and the
// recorded one it was paired with, both normalized.
func (s *server) keepCall(m envelope, e *entry) {
	if !s.plan.Calibrating || e == nil || m.Method != "tools/call" {
		return
	}
	s.note(logLine{Call: &pairLog{N: e.n, Live: s.normalized(m.Params)}})
}

// normalized returns a tools/call's params (the tool and its arguments)
// normalized, with a Normalizer of its own: two calls that differ only
// in paths under the recorded and the replay's directories, ids or times
// normalize alike.
func (s *server) normalized(params json.RawMessage) json.RawMessage {
	return s.normalizer().Frame(lane.Agent, params)
}

// normalizer returns a fresh Normalizer of the plan's directories and
// rules.
func (s *server) normalizer() *normalize.Normalizer {
	return normalize.New(normalize.Options{Cwd: s.plan.Cwd, Home: s.plan.Home, Tmp: s.plan.Tmp, Rules: s.rules})
}

// serve answers the agent's requests from r on w until r ends.
func (s *server) serve(r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriter(w)
	for {
		line, err := br.ReadBytes('\n')
		if t := bytes.TrimSpace(line); len(t) > 0 {
			rp, rerr := s.reply(t)
			for _, l := range rp.Lines {
				bw.Write(append(l, '\n'))
			}
			if werr := bw.Flush(); werr != nil {
				return werr
			}
			if rerr != nil {
				return rerr
			}
		}
		if err == io.EOF {
			s.note(logLine{End: true})
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// A Reply is what a stand-in sends back for one message of the agent's.
type Reply struct {
	// Lines are the messages to send, in order: the answer, with the
	// live request's id, then the server's notifications recorded after
	// it (or, from an HTTP server's exchange, around it, in the order
	// recorded). None for a notification, a response, a line that is not JSON,
	// or a request left unanswered (Hang).
	Lines [][]byte
	// Exchange is the PlanLine.Exchange of the recorded request that
	// answers it, 0 for none.
	Exchange int
	// Hang says the request is never to be answered (an injected hang).
	Hang bool
}

// reply answers one message of the agent's. It fails with ErrEnded where
// the recorded server ended instead of answering, or a crash is injected.
func (s *server) reply(line []byte) (Reply, error) {
	var m envelope
	if json.Unmarshal(line, &m) != nil || m.Method == "" || m.ID == nil {
		return Reply{}, nil // a notification, a response or junk: nothing to answer
	}
	if m.Method == "tools/call" {
		s.calls++
		for _, f := range s.plan.Faults {
			if f.Call != s.calls {
				continue
			}
			// The call was made: its recorded twin is not missed.
			if e := s.match(m); e != nil && !e.served {
				e.served = true
				s.note(logLine{Served: e.n})
			}
			s.note(logLine{Fault: f.Kind + " in tools/call " + strconv.Itoa(f.Call)})
			switch f.Kind {
			case "hang":
				return Reply{Hang: true}, nil
			case "crash":
				return Reply{}, ErrEnded
			}
			out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{
				"content": []any{map[string]any{"type": "text", "text": "acptap replay: an injected MCP error"}}, "isError": true,
			}})
			return Reply{Lines: [][]byte{out}}, nil
		}
	}
	e := s.match(m)
	if e != nil && e.answer == nil {
		// The server never answered it: it ended (crashed) instead.
		if !e.served {
			e.served = true
			s.note(logLine{Served: e.n})
		}
		return Reply{Exchange: e.exchange}, ErrEnded
	}
	if e == nil {
		summary := summarize(m)
		s.note(logLine{Unanswered: summary})
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{
			"code": -32603, "message": "acptap replay: no recorded answer for " + summary + " of MCP server " + s.plan.Server,
		}})
		return Reply{Lines: [][]byte{out}}, nil
	}
	if !e.served {
		e.served = true
		s.note(logLine{Served: e.n})
	}
	s.keepCall(m, e)
	answer := make(map[string]json.RawMessage, len(e.answer))
	for k, v := range e.answer {
		answer[k] = v
	}
	answer["id"] = m.ID
	out, _ := json.Marshal(answer)
	rp := Reply{Lines: append(slices.Clip(e.before), out), Exchange: e.exchange}
	rp.Lines = append(rp.Lines, e.after...)
	return rp, nil
}

// A Matcher answers one MCP server's requests from its recorded lines, as
// a stand-in does, for a stand-in of another transport (HTTP) or an MCP
// server carried on the ACP stream; or, with the real server answering
// (replay --live-mcp), compares its answers with the recorded ones. Its
// methods are safe for concurrent use.
type Matcher struct{ l *live }

// NewMatcher returns a Matcher serving p, which notes what it served on
// log as a stand-in does on its LOG (see Read).
func NewMatcher(p *Plan, log io.Writer) *Matcher {
	return &Matcher{l: &live{server: newServer(p, log), pending: map[string]*entry{}}}
}

// Reply answers one message of the agent's. It fails with ErrEnded where
// the recorded server ended (crashed) instead of answering, or a crash is
// injected: the server's transport should end as a crashed server's does.
func (m *Matcher) Reply(msg []byte) (Reply, error) {
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	return m.l.reply(msg)
}

// Request notes a message of the agent's that the real server is to
// answer, and the recorded request it is paired with for Answer.
func (m *Matcher) Request(msg []byte) { m.l.request(msg) }

// Answer compares a message of the real server's, an answer to a
// request given to Request, with the recorded answer, and notes how it
// differs.
func (m *Matcher) Answer(msg []byte) { m.l.answer(msg) }

// ErrEnded is the error of a reply to a request the recorded server
// ended on instead of answering it: the stand-in ends there too.
var ErrEnded = errors.New("the recorded server ended on this request")

// logLine is one line of the LOG.
type logLine struct {
	Served     int    `json:"served,omitempty"`     // the recorded request answered, first time
	Unanswered string `json:"unanswered,omitempty"` // a request the recording has no answer for
	End        bool   `json:"end,omitempty"`        // the agent closed the stand-in's stdin
	Drift      *drift `json:"drift,omitempty"`      // a live server's answer that differs from the recorded
	Fault      string `json:"fault,omitempty"`      // a fault injected
	// Call and Answer are, when calibrating, a call of the agent's and
	// a live server's answer, each with its recorded twin's number.
	Call   *pairLog `json:"call,omitempty"`
	Answer *pairLog `json:"answer,omitempty"`
}

// pairLog is a call or an answer, normalized, and the number of the
// recorded request it is paired with.
type pairLog struct {
	N    int             `json:"n"`
	Live json.RawMessage `json:"live"`
}

// A Pair is, from a calibrating replay, a tools/call the agent made or a
// live server's answer to one, and its recorded twin, both normalized as
// the stand-in compares them.
type Pair struct {
	// Request is the recorded request's number among the server's
	// recorded requests, from 1.
	Request int
	// Answer says the pair is of answers; else of calls' params.
	Answer         bool
	Recorded, Live any
}

func (s *server) note(l logLine) {
	b, _ := json.Marshal(l)
	s.log.Write(append(b, '\n'))
}

// Main runs a stand-in: args are PLAN LOG, or PLAN LOG -- COMMAND
// [ARGS...] to run the server COMMAND and compare its answers with the
// recorded ones (replay --live-mcp). It returns 0 once the agent closes
// its stdin (with a server, the server's exit status), 2 for bad
// arguments or a plan it cannot read.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var argv []string
	if len(args) > 3 && args[2] == "--" {
		args, argv = args[:2], args[3:]
	}
	if len(args) != 2 {
		fmt.Fprintf(stderr, "acptap %s: usage: acptap %s PLAN LOG [-- COMMAND [ARGS...]] (acptap replay runs it; it is not for people)\n", Command, Command)
		return 2
	}
	b, err := os.ReadFile(args[0])
	var p Plan
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		fmt.Fprintf(stderr, "acptap %s: the plan %s: %v\n", Command, args[0], err)
		return 2
	}
	log, err := os.OpenFile(args[1], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintf(stderr, "acptap %s: %v\n", Command, err)
		return 2
	}
	defer log.Close()
	if argv != nil {
		return newServer(&p, log).serveLive(argv, stdin, stdout, stderr)
	}
	if stillborn(&p) {
		// The recorded server never started (its command was not
		// found, or it failed at once): nor does the stand-in, saying
		// what it said.
		for _, l := range p.Lines {
			fmt.Fprintln(stderr, l.Line)
		}
		return 127
	}
	err = newServer(&p, log).serve(stdin, stdout)
	if errors.Is(err, ErrEnded) {
		return 1
	}
	if err != nil && !errors.Is(err, io.ErrClosedPipe) {
		fmt.Fprintf(stderr, "acptap %s: %v\n", Command, err)
		return 1
	}
	return 0
}

// stillborn reports whether a stdio server's recording is of one that
// never started: it wrote on stderr, and nothing on stdout, and was
// never written to.
func stillborn(p *Plan) bool {
	stderr := false
	for _, l := range p.Lines {
		if l.Dir != lane.ServerStderr {
			return false
		}
		stderr = true
	}
	return stderr
}

// A Report is what the stand-ins of one server saw in a replay.
type Report struct {
	Server string
	// Unanswered are the requests the recording had no answer for, as
	// summarized (the method, a tools/call's tool and arguments).
	Unanswered []string
	// Faulted are the faults injected, as "KIND in tools/call N".
	Faulted []string
	// Drift are, with the live server (replay --live-mcp), its answers
	// that differ from the recorded ones, each the first difference.
	Drift []string
	// Unrequested are the recorded calls never made (tools/call,
	// resources/read, prompts/get: what does something; a listing or a
	// ping asked fewer times is not one), summarized.
	Unrequested []string
	// Pairs are, when calibrating, the calls made and the live answers
	// with their recorded twins, in the order made.
	Pairs []Pair
}

// calls are the methods whose recorded requests must all be made again.
var calls = map[string]bool{"tools/call": true, "resources/read": true, "prompts/get": true}

// Read reads the LOG of a server's stand-ins, given the server's plan.
func Read(plan *Plan, logPath string) (Report, error) {
	f, err := os.Open(logPath)
	if errors.Is(err, os.ErrNotExist) {
		return ReadLog(plan, nil)
	} else if err != nil {
		return Report{Server: plan.Server}, err
	}
	defer f.Close()
	return ReadLog(plan, f)
}

// ReadLog is Read of the notes a Matcher wrote on log (nil for none).
func ReadLog(plan *Plan, log io.Reader) (Report, error) {
	r := Report{Server: plan.Server}
	s := newServer(plan, io.Discard)
	served := map[int]bool{}
	if log != nil {
		sc := bufio.NewScanner(log)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue // cut by a kill
			}
			if l.Served > 0 {
				served[l.Served] = true
			}
			if l.Unanswered != "" {
				r.Unanswered = append(r.Unanswered, l.Unanswered)
			}
			if d := l.Drift; d != nil {
				r.Drift = append(r.Drift, d.String())
			}
			if l.Fault != "" {
				r.Faulted = append(r.Faulted, l.Fault)
			}
			if p, ok := s.pair(l); ok {
				r.Pairs = append(r.Pairs, p)
			}
		}
	}
	for _, e := range s.entries {
		if !served[e.n] && calls[e.method] {
			r.Unrequested = append(r.Unrequested, e.summary)
		}
	}
	return r, nil
}

// pair returns the Pair of a log line of a call or an answer.
func (s *server) pair(l logLine) (Pair, bool) {
	pl, answer := l.Call, false
	if pl == nil {
		pl, answer = l.Answer, true
	}
	if pl == nil || pl.N < 1 || pl.N > len(s.entries) {
		return Pair{}, false
	}
	e := s.entries[pl.N-1]
	var rec []byte
	if answer {
		rec = s.normalizedAnswer(e.answer)
	} else {
		rec = s.normalized(e.params)
	}
	p := Pair{Request: pl.N, Answer: answer}
	if json.Unmarshal(rec, &p.Recorded) != nil || json.Unmarshal(pl.Live, &p.Live) != nil {
		return Pair{}, false
	}
	return p, true
}

// normalizedAnswer returns the result and error of an answer, normalized.
func (s *server) normalizedAnswer(v map[string]json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]json.RawMessage{"result": v["result"], "error": v["error"]})
	return s.normalizer().Frame(lane.Agent, b)
}

// LogName is the file name of server i's LOG in a replay's directory.
func LogName(i int) string { return "mcp-" + strconv.Itoa(i) + ".log" }

// PlanName is the file name of server i's PLAN in a replay's directory.
func PlanName(i int) string { return "mcp-" + strconv.Itoa(i) + ".json" }

// String says where the answer differs, as a drifted request is said:
// "tools/call lookup {...}: the answer differs at $.result...: recorded
// "42", live "43"".
func (d *drift) String() string {
	more := ""
	if d.More > 0 {
		more = fmt.Sprintf(" (and %d more differences)", d.More)
	}
	return fmt.Sprintf("%s: the answer differs from the recording at %s%s", d.Request, mismatch.Mismatch{Path: d.Path, Recorded: d.Recorded, Live: d.Live}, more)
}

// Package testmcp is an MCP server for tests, over stdio or Streamable HTTP, whose lookup tool answers from a table and which logs every request it gets.
package testmcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
)

// ProtocolVersion is the MCP revision the server speaks.
const ProtocolVersion = "2025-06-18"

// DefaultAnswers are the lookup tool's answers unless Options.Answers says
// otherwise.
var DefaultAnswers = map[string]string{"answer": "42", "weather": "sunny, 24C"}

// Options configures a Server. The zero value works.
type Options struct {
	// Name is the server's name in its initialize answer; "" for
	// "testmcp".
	Name string
	// Answers are the lookup tool's answers by key. If nil,
	// DefaultAnswers is used.
	Answers map[string]string
	// Log, if not nil, gets one JSON line per message the server reads:
	// {"method": ..., "params": ...}, or {"junk": LINE} for a line that
	// is not JSON-RPC.
	Log io.Writer
	// BigResult, when positive, makes the big tool answer that many bytes.
	BigResult int
	// CrashOn, if not "", makes a call of that tool end the server (over
	// stdio: exit status 3) before it answers.
	CrashOn string
	// Worker, if not "", ends each lookup answer with " (served by
	// WORKER)": a per-run value no default normalization knows.
	Worker string
}

// Server answers MCP requests. Its methods are safe for concurrent use.
type Server struct {
	opts Options

	mu  sync.Mutex // guards log's writes
	log io.Writer
}

// New returns a Server of opts.
func New(opts Options) *Server {
	if opts.Name == "" {
		opts.Name = "testmcp"
	}
	if opts.Answers == nil {
		opts.Answers = DefaultAnswers
	}
	return &Server{opts: opts, log: opts.Log}
}

// message is a JSON-RPC message as the server reads it.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Handle reads one message and returns the server's answer, nil for a
// notification or a response.
func (s *Server) Handle(line []byte) []byte {
	var m message
	if err := json.Unmarshal(line, &m); err != nil || m.JSONRPC != "2.0" {
		s.logLine(map[string]any{"junk": string(line)})
		return encode(json.RawMessage("null"), nil, &rpcError{Code: -32700, Message: "parse error"})
	}
	s.logLine(map[string]any{"method": m.Method, "params": m.Params})
	if m.Method == "" || m.ID == nil || string(m.ID) == "null" {
		return nil // a notification, or a response to nothing asked
	}
	result, rerr := s.answer(m)
	if rerr == errCrash {
		crash()
	}
	return encode(m.ID, result, rerr)
}

// errCrash is the answer of a tool that crashes the server.
var errCrash = &rpcError{Code: -32603, Message: "crashed"}

// crash ends the process, as a server that crashes mid-call does; tests
// of the HTTP transport never ask for it.
var crash = func() { os.Exit(3) }

// rpcError is a JSON-RPC error.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func encode(id json.RawMessage, result any, rerr *rpcError) []byte {
	env := map[string]any{"jsonrpc": "2.0", "id": id}
	if rerr != nil {
		env["error"] = rerr
	} else {
		env["result"] = result
	}
	b, _ := json.Marshal(env)
	return b
}

// tools are the server's tools, as tools/list lists them.
var tools = []map[string]any{
	{"name": "lookup", "description": "Look a key up in the table", "inputSchema": map[string]any{
		"type": "object", "properties": map[string]any{"topic": map[string]any{"type": "string"}}, "required": []string{"topic"}}},
	{"name": "big", "description": "Answer a long text", "inputSchema": map[string]any{"type": "object"}},
}

func (s *Server) answer(m message) (any, *rpcError) {
	switch m.Method {
	case "initialize":
		return map[string]any{
			"protocolVersion": ProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
			"serverInfo":      map[string]any{"name": s.opts.Name, "version": "1.0.0"},
		}, nil
	case "server/discover":
		// The stateless revision's discovery (2026-07-28), which a client of
		// that revision asks first.
		return map[string]any{
			"supportedVersions": []string{"2026-07-28", ProtocolVersion},
			"capabilities":      map[string]any{"tools": map[string]any{"listChanged": false}},
			"serverInfo":        map[string]any{"name": s.opts.Name, "version": "1.0.0"},
		}, nil
	case "ping":
		return map[string]any{}, nil
	case "tools/list":
		return map[string]any{"tools": tools}, nil
	case "tools/call":
		var p struct {
			Name      string            `json:"name"`
			Arguments map[string]string `json:"arguments"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, &rpcError{Code: -32602, Message: "invalid params: " + err.Error()}
		}
		if p.Name == s.opts.CrashOn {
			return nil, errCrash
		}
		switch p.Name {
		case "lookup":
			v, ok := s.opts.Answers[p.Arguments["topic"]]
			if !ok {
				return toolResult("no such key: "+p.Arguments["topic"], true), nil
			}
			if s.opts.Worker != "" {
				v += " (served by " + s.opts.Worker + ")"
			}
			return toolResult(v, false), nil
		case "big":
			return toolResult(strings.Repeat("x", max(s.opts.BigResult, 1)), false), nil
		}
		return nil, &rpcError{Code: -32602, Message: "unknown tool: " + p.Name}
	}
	return nil, &rpcError{Code: -32601, Message: "method not found: " + m.Method}
}

func toolResult(text string, isError bool) map[string]any {
	return map[string]any{"content": []map[string]any{{"type": "text", "text": text}}, "isError": isError}
}

func (s *Server) logLine(v any) {
	if s.log == nil {
		return
	}
	b, _ := json.Marshal(v)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.Write(append(b, '\n'))
}

// ServeStdio reads newline-delimited messages from r and writes the
// answers to w, until r ends.
func (s *Server) ServeStdio(r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if t := bytes.TrimSpace(line); len(t) > 0 {
			if out := s.Handle(t); out != nil {
				if _, werr := w.Write(append(out, '\n')); werr != nil {
					return werr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ServeHTTP is the Streamable HTTP transport: a POST carries one message,
// answered as application/json (202 for a notification); GET, which
// would open a stream of the server's own messages, is 405, as the
// transport allows; DELETE ends the session.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK)
		return
	default:
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	out := s.Handle(bytes.TrimSpace(body))
	if out == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if bytes.Contains(body, []byte(`"initialize"`)) {
		w.Header().Set("Mcp-Session-Id", "testmcp-session-1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

// parseAnswers reads --answer KEY=VALUE flags into a copy of
// DefaultAnswers.
func parseAnswers(flags []string) (map[string]string, error) {
	answers := map[string]string{}
	for k, v := range DefaultAnswers {
		answers[k] = v
	}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--answer %q: want KEY=VALUE", f)
		}
		answers[k] = v
	}
	return answers, nil
}

// Package mcpconf rewrites the MCP servers an editor names in an ACP frame, so that the agent starts another program in a stdio server's place and reaches an HTTP server at another URL.
package mcpconf

import (
	"bytes"
	"encoding/json"
)

// Transports of a Server.
const (
	Stdio = "stdio"
	HTTP  = "http"
	SSE   = "sse"
)

// Server is an MCP server as an editor names it in mcpServers.
type Server struct {
	Type string   // Stdio (which ACP leaves unnamed), HTTP or SSE
	Name string   // as the editor named it
	Argv []string // a stdio server's command line
	URL  string   // an HTTP or SSE server's URL
}

// Replace is given each stdio, HTTP and SSE server of a frame, in order
// (a server of another transport, such as ACP's own, is not a server to
// it), and returns the command line of a stdio one or the URL of another
// to name in its place, or false to leave it as it is.
type Replace func(s Server) (Server, bool)

// Rewrite returns line with the MCP servers of a session/new,
// session/load or session/resume request replaced as replace says; any
// other line, one it cannot read or one where nothing is replaced, is
// returned as it is.
func Rewrite(line []byte, replace Replace) []byte {
	if !bytes.Contains(line, []byte(`"mcpServers"`)) {
		return line
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil {
		return line
	}
	var method string
	json.Unmarshal(msg["method"], &method)
	if method != "session/new" && method != "session/load" && method != "session/resume" {
		return line
	}
	var params map[string]json.RawMessage
	var servers []json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil || json.Unmarshal(params["mcpServers"], &servers) != nil {
		return line
	}
	changed := false
	for i, raw := range servers {
		if out, ok := replaced(raw, replace); ok {
			servers[i], changed = out, true
		}
	}
	if !changed {
		return line
	}
	var err error
	if params["mcpServers"], err = marshal(servers); err != nil {
		return line
	}
	if msg["params"], err = marshal(params); err != nil {
		return line
	}
	out, err := marshal(msg)
	if err != nil {
		return line
	}
	return out
}

// parse reads an entry of mcpServers; false for one of another transport
// or one it cannot read.
func parse(server map[string]json.RawMessage) (Server, bool) {
	var s Server
	json.Unmarshal(server["type"], &s.Type)
	json.Unmarshal(server["name"], &s.Name)
	switch s.Type {
	case "", Stdio:
		var command string
		var args []string
		if json.Unmarshal(server["command"], &command) != nil || command == "" {
			return Server{}, false
		}
		if server["args"] != nil && json.Unmarshal(server["args"], &args) != nil {
			return Server{}, false
		}
		s.Type, s.Argv = Stdio, append([]string{command}, args...)
	case HTTP, SSE:
		if json.Unmarshal(server["url"], &s.URL) != nil || s.URL == "" {
			return Server{}, false
		}
	default:
		return Server{}, false
	}
	return s, true
}

// replaced returns a server's entry with its command line or URL as
// replace says; false for an entry replace leaves, or one of another
// transport.
func replaced(raw json.RawMessage, replace Replace) (json.RawMessage, bool) {
	var server map[string]json.RawMessage
	if json.Unmarshal(raw, &server) != nil {
		return nil, false
	}
	s, ok := parse(server)
	if !ok {
		return nil, false
	}
	out, ok := replace(s)
	if !ok {
		return nil, false
	}
	var err error
	if s.Type == Stdio {
		if len(out.Argv) == 0 {
			return nil, false
		}
		if server["command"], err = marshal(out.Argv[0]); err != nil {
			return nil, false
		}
		if server["args"], err = marshal(out.Argv[1:]); err != nil {
			return nil, false
		}
	} else {
		if out.URL == "" {
			return nil, false
		}
		if server["url"], err = marshal(out.URL); err != nil {
			return nil, false
		}
	}
	b, err := marshal(server)
	return b, err == nil
}

// marshal encodes v as compact JSON without escaping HTML characters.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

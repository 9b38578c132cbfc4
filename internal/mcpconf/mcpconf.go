// Package mcpconf rewrites the stdio MCP servers an editor names in an ACP frame, so that the agent starts another program in each one's place.
package mcpconf

import (
	"bytes"
	"encoding/json"
)

// Replace is given each stdio MCP server of a frame, in order, by its
// name and command line, and returns the command line to run in its
// place, or false to leave it as it is.
type Replace func(name string, argv []string) ([]string, bool)

// Rewrite returns line with the command of each stdio MCP server of a
// session/new, session/load or session/resume request replaced as replace
// says; any other line, one it cannot read or one where nothing is
// replaced, is returned as it is.
func Rewrite(line []byte, replace Replace) []byte {
	if !bytes.Contains(line, []byte(`"mcpServers"`)) || !bytes.Contains(line, []byte(`"command"`)) {
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

// replaced returns a stdio server's entry with its command line as
// replace says; false for another entry, or one replace leaves.
func replaced(raw json.RawMessage, replace Replace) (json.RawMessage, bool) {
	var server map[string]json.RawMessage
	if json.Unmarshal(raw, &server) != nil {
		return nil, false
	}
	var typ, name, command string
	var args []string
	json.Unmarshal(server["type"], &typ)
	json.Unmarshal(server["name"], &name)
	if (typ != "" && typ != "stdio") || json.Unmarshal(server["command"], &command) != nil || command == "" {
		return nil, false
	}
	if server["args"] != nil && json.Unmarshal(server["args"], &args) != nil {
		return nil, false
	}
	argv, ok := replace(name, append([]string{command}, args...))
	if !ok || len(argv) == 0 {
		return nil, false
	}
	var err error
	if server["command"], err = marshal(argv[0]); err != nil {
		return nil, false
	}
	if server["args"], err = marshal(argv[1:]); err != nil {
		return nil, false
	}
	out, err := marshal(server)
	return out, err == nil
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

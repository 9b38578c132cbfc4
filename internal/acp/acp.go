// Package acp reads the JSON-RPC envelope of ACP messages without decoding their payloads.
package acp

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Kind says what role a line plays in JSON-RPC.
type Kind uint8

const (
	// Junk is a line that is not a JSON-RPC message: not JSON, not an
	// object, or an object without the fields of any message kind. Agents
	// do print such lines; they are forwarded and recorded untouched.
	Junk Kind = iota
	Request
	Notification
	Response // a result
	Error    // an error response
)

var kindNames = [...]string{Junk: "junk", Request: "request", Notification: "notification", Response: "response", Error: "error"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Message is the envelope of one ACP line.
type Message struct {
	Kind   Kind
	ID     json.RawMessage // the raw id of requests and responses; nil otherwise
	Method string          // requests and notifications

	// UpdateKind is params.update.sessionUpdate of a session/update
	// notification (agent_message_chunk, tool_call, ...).
	UpdateKind string

	// ErrorCode and ErrorMessage are set for Error responses.
	ErrorCode    int64
	ErrorMessage string

	Params json.RawMessage // requests and notifications; nil if absent
	Result json.RawMessage // responses
}

// envelope is the union of JSON-RPC 2.0 message fields.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Parse reads the envelope of one line (without its newline). It never
// fails: a line that is not a JSON-RPC message has Kind Junk. A trailing
// '\r' and surrounding white space are tolerated, as JSON allows.
func Parse(line []byte) Message {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' || !utf8.Valid(trimmed) {
		return Message{Kind: Junk}
	}
	var env envelope
	if err := json.Unmarshal(trimmed, &env); err != nil {
		return Message{Kind: Junk}
	}
	id := env.ID
	if bytes.Equal(id, []byte("null")) {
		id = nil
	}
	switch {
	case env.Method != nil && id != nil:
		return Message{Kind: Request, ID: id, Method: *env.Method, Params: env.Params}
	case env.Method != nil:
		m := Message{Kind: Notification, Method: *env.Method, Params: env.Params}
		if m.Method == "session/update" {
			m.UpdateKind = updateKind(env.Params)
		}
		return m
	case env.Error != nil:
		return Message{Kind: Error, ID: id, ErrorCode: env.Error.Code, ErrorMessage: env.Error.Message}
	case env.Result != nil && id != nil:
		return Message{Kind: Response, ID: id, Result: env.Result}
	}
	return Message{Kind: Junk}
}

func updateKind(params json.RawMessage) string {
	var p struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
		} `json:"update"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	return p.Update.SessionUpdate
}

// IDKey returns a comparable form of a JSON-RPC id, so that 1 and "1" stay
// different while white space differences do not matter.
func IDKey(id json.RawMessage) string {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return string(id)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Package acp reads and writes the JSON-RPC 2.0 envelope of ACP messages, one message a line, leaving their payloads to the caller.
package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// String returns the kind's name: "junk", "request", "notification",
// "response" or "error".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Message is what Parse reads of one ACP line: its kind and envelope.
type Message struct {
	Kind   Kind
	ID     json.RawMessage // the raw id of requests and responses; nil otherwise
	Method string          // requests and notifications

	// UpdateKind is params.update.sessionUpdate of a session/update
	// notification (agent_message_chunk, tool_call, ...).
	UpdateKind string

	// ErrorCode and ErrorMessage are set for Error responses.
	ErrorCode    int
	ErrorMessage string

	Params json.RawMessage // requests and notifications; nil if absent
	Result json.RawMessage // responses
}

// Parse reads the envelope of one line (without its newline). It never
// fails: a line that is not a JSON-RPC message has Kind Junk. A trailing
// '\r' and surrounding white space are tolerated, as JSON allows.
func Parse(line []byte) Message {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' || !utf8.Valid(trimmed) {
		return Message{Kind: Junk}
	}
	var env struct {
		Envelope
		// A present "method" makes a request or a notification, even
		// an empty one: the pointer tells it from an absent one.
		Method *string `json:"method"`
	}
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

// IDKey returns a comparable form of a JSON-RPC id, the id compacted:
// white space does not matter, while 1 and "1" stay different, and so do
// numbers that a float64 cannot tell apart, such as 9007199254740992 and
// 9007199254740993. Ids are compared as they are spelled, since peers echo
// them: 1 and 1.0 are different ids. An id that is not JSON is its own
// key.
func IDKey(id json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, id) != nil {
		return string(id)
	}
	return buf.String()
}

// Describe names a line for messages: "session/prompt id=3",
// "session/cancel", "response id=7", "a line that is not JSON-RPC".
func Describe(line []byte) string {
	m := Parse(line)
	switch m.Kind {
	case Request:
		return fmt.Sprintf("%s id=%s", m.Method, IDKey(m.ID))
	case Notification:
		return m.Method
	case Response, Error:
		if m.ID == nil {
			return "error response id=null"
		}
		return fmt.Sprintf("response id=%s", IDKey(m.ID))
	}
	return "a line that is not JSON-RPC"
}

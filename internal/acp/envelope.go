package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Version is the value of the "jsonrpc" member of every message.
const Version = "2.0"

// Error codes of error responses: JSON-RPC 2.0's, then those ACP adds.
const (
	CodeParseError     = -32700 // the line is not JSON
	CodeInvalidRequest = -32600 // JSON, but not a valid message
	CodeMethodNotFound = -32601 // no such method
	CodeInvalidParams  = -32602 // the params do not suit the method
	CodeInternalError  = -32603 // the receiver failed to handle the request

	CodeResourceNotFound = -32002 // ACP: a file or other resource does not exist
	// CodeRequestCancelled answers a request that $/cancel_request
	// cancelled (ACP, as LSP).
	CodeRequestCancelled = -32800
)

// Envelope is one JSON-RPC 2.0 message as it is on the wire, payloads left
// as raw JSON: a request has ID and Method, a notification Method only, a
// response ID and either Result or Error. It is what a peer that checks
// every member decodes a line into with json.Unmarshal (an "id": null is
// then the literal null); Parse classifies a line instead.
//
// The Encode functions write one line: the members in declaration order,
// "jsonrpc" first as ACP implementations write it, empty ones left out,
// encoded as encoding/json does but with "<", ">" and "&" left as they
// are, as agents and editors write them. Their payload argument (params
// or result) is encoded the same way, and left out when nil; a
// json.RawMessage is written compacted, a nil one as null.
type Envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *ResponseError  `json:"error,omitempty"`
}

// ResponseError is the error object of an error response.
type ResponseError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Error returns the message followed by the code: "boom (code -32603)".
func (e *ResponseError) Error() string {
	return fmt.Sprintf("%s (code %d)", e.Message, e.Code)
}

// EncodeRequest returns the line of a request, ending in '\n'.
func EncodeRequest(id json.RawMessage, method string, params any) ([]byte, error) {
	p, err := encodePayload(params)
	if err != nil {
		return nil, fmt.Errorf("encoding params: %w", err)
	}
	return encodeLine(&Envelope{ID: id, Method: method, Params: p})
}

// EncodeNotification returns the line of a notification, ending in '\n'.
func EncodeNotification(method string, params any) ([]byte, error) {
	p, err := encodePayload(params)
	if err != nil {
		return nil, fmt.Errorf("encoding params: %w", err)
	}
	return encodeLine(&Envelope{Method: method, Params: p})
}

// EncodeResult returns the line of a response carrying result, ending in
// '\n'.
func EncodeResult(id json.RawMessage, result any) ([]byte, error) {
	r, err := encodePayload(result)
	if err != nil {
		return nil, fmt.Errorf("encoding result: %w", err)
	}
	return encodeLine(&Envelope{ID: id, Result: r})
}

// EncodeError returns the line of an error response, ending in '\n'. It
// fails only for an id that is not JSON.
func EncodeError(id json.RawMessage, e *ResponseError) ([]byte, error) {
	return encodeLine(&Envelope{ID: id, Error: e})
}

func encodeLine(m *Envelope) ([]byte, error) {
	m.JSONRPC = Version
	return encodeJSON(m)
}

func encodePayload(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := encodeJSON(v)
	return bytes.TrimSuffix(b, []byte("\n")), err
}

// encodeJSON encodes v followed by '\n', without escaping HTML characters.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

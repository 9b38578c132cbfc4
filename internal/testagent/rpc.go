package testagent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// JSON-RPC 2.0 error codes used by the agent.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
)

// message is one JSON-RPC 2.0 message as read from the wire. A request has
// ID and Method, a notification only Method, a response ID and Result or
// Error.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// outMessage is one JSON-RPC 2.0 message to write. Params and Result are
// marshaled as they are; fields are written in declaration order so that
// "jsonrpc" comes first, as every ACP implementation writes it.
type outMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  any             `json:"params,omitempty"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("%s (code %d)", e.Message, e.Code)
}

// errInputClosed is returned by calls that can never be answered because
// the editor closed the agent's stdin.
var errInputClosed = errors.New("stdin closed before the editor answered")

// nullID is the id of a response to a message whose id could not be read.
var nullID = json.RawMessage("null")

// conn writes messages to the editor one line at a time and pairs the
// agent's own requests with the editor's responses.
type conn struct {
	stringIDs bool // mint UUID strings rather than numbers as request ids

	wmu  sync.Mutex // guards w, buf and werr; held for the whole of one line
	w    io.Writer
	buf  bytes.Buffer
	werr error // first write error; later writes are dropped

	pmu     sync.Mutex // guards nextID, pending and closed
	nextID  int64
	pending map[string]chan *message // by canonical id
	closed  bool                     // no response can arrive any more
}

func newConn(w io.Writer, stringIDs bool) *conn {
	return &conn{w: w, stringIDs: stringIDs, pending: make(map[string]chan *message)}
}

// send writes m as one line. After a failed write it returns the first
// error without writing anything, so that a vanished editor is reported
// once and the agent can wind down.
func (c *conn) send(m *outMessage) error {
	m.JSONRPC = "2.0"
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	c.buf.Reset()
	enc := json.NewEncoder(&c.buf)
	// Agents write "<" and "&" as they are; Go's default \u003c escaping
	// would make every transcript harder to read.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil { // Encode appends the '\n'
		return fmt.Errorf("encoding %s message: %w", describe(m), err)
	}
	if _, err := c.w.Write(c.buf.Bytes()); err != nil {
		c.werr = fmt.Errorf("writing to stdout: %w", err)
		return c.werr
	}
	return nil
}

func describe(m *outMessage) string {
	if m.Method != "" {
		return m.Method
	}
	return "response"
}

func (c *conn) notify(method string, params any) error {
	return c.send(&outMessage{Method: method, Params: params})
}

func (c *conn) reply(id json.RawMessage, result any) error {
	return c.send(&outMessage{ID: id, Result: result})
}

func (c *conn) replyError(id json.RawMessage, code int, format string, args ...any) error {
	return c.send(&outMessage{ID: id, Error: &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}})
}

// call sends a request to the editor and waits for its response, which it
// decodes into result. It returns ctx's error if ctx ends first (a late
// response is then dropped), an *rpcError if the editor answered with an
// error, and errInputClosed once stdin is closed.
func (c *conn) call(ctx context.Context, method string, params, result any) error {
	id, ch, err := c.register()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	defer c.unregister(id)
	if err := c.send(&outMessage{ID: id, Method: method, Params: params}); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case resp := <-ch:
		if resp == nil {
			return fmt.Errorf("%s: %w", method, errInputClosed)
		}
		if resp.Error != nil {
			return fmt.Errorf("%s: %w", method, resp.Error)
		}
		if result == nil {
			return nil
		}
		if err := json.Unmarshal(resp.Result, result); err != nil {
			return fmt.Errorf("%s: decoding result: %w", method, err)
		}
		return nil
	}
}

func (c *conn) register() (json.RawMessage, chan *message, error) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.closed {
		return nil, nil, errInputClosed
	}
	var id json.RawMessage
	if c.stringIDs {
		id = json.RawMessage(strconv.Quote(newUUID()))
	} else {
		id = json.RawMessage(strconv.FormatInt(c.nextID, 10))
		c.nextID++
	}
	ch := make(chan *message, 1)
	c.pending[string(id)] = ch
	return id, ch, nil
}

func (c *conn) unregister(id json.RawMessage) {
	c.pmu.Lock()
	delete(c.pending, string(id))
	c.pmu.Unlock()
}

// deliver hands a response to the call waiting for it and reports whether
// one was.
func (c *conn) deliver(m *message) bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	ch, ok := c.pending[canonicalID(m.ID)]
	if ok {
		delete(c.pending, canonicalID(m.ID))
		ch <- m
	}
	return ok
}

// closeInput fails every pending and future call with errInputClosed.
func (c *conn) closeInput() {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	c.closed = true
	for id, ch := range c.pending {
		delete(c.pending, id)
		ch <- nil
	}
}

// canonicalID returns the id as the agent itself would have written it,
// so that a response with "id": 3 or "id" : "x" still matches.
func canonicalID(id json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, id); err != nil {
		return string(id)
	}
	return buf.String()
}

// validID reports whether id is one that JSON-RPC allows: a string, a
// number or null.
func validID(id json.RawMessage) bool {
	var v any
	if err := json.Unmarshal(id, &v); err != nil {
		return false
	}
	switch v.(type) {
	case string, float64, nil:
		return true
	}
	return false
}

// randHex returns n random bytes in hex.
func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

package testagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/acptap/acptap/internal/acp"
)

// errInputClosed is returned by calls that can never be answered because
// the editor closed the agent's stdin.
var errInputClosed = errors.New("stdin closed before the editor answered")

// nullID is the id of a response to a message whose id could not be read.
var nullID = json.RawMessage("null")

// conn writes messages to the editor one line at a time and pairs the
// agent's own requests with the editor's responses.
type conn struct {
	stringIDs bool // mint UUID strings rather than numbers as request ids

	wmu  sync.Mutex // guards w and werr; held for the whole of one line
	w    io.Writer
	werr error // first write error; later writes are dropped

	pmu     sync.Mutex // guards nextID, pending and closed
	nextID  int64
	pending map[string]chan *acp.Envelope // by acp.IDKey
	closed  bool                          // no response can arrive any more
}

func newConn(w io.Writer, stringIDs bool) *conn {
	return &conn{w: w, stringIDs: stringIDs, pending: make(map[string]chan *acp.Envelope)}
}

// send writes line, one encoded message, with one Write. After a failed
// write it returns the first error without writing anything, so that a
// vanished editor is reported once and the agent can wind down.
func (c *conn) send(line []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	if _, err := c.w.Write(line); err != nil {
		c.werr = fmt.Errorf("writing to stdout: %w", err)
		return c.werr
	}
	return nil
}

func (c *conn) notify(method string, params any) error {
	line, err := acp.EncodeNotification(method, params)
	if err != nil {
		return fmt.Errorf("encoding %s message: %w", method, err)
	}
	return c.send(line)
}

func (c *conn) reply(id json.RawMessage, result any) error {
	line, err := acp.EncodeResult(id, result)
	if err != nil {
		return fmt.Errorf("encoding response message: %w", err)
	}
	return c.send(line)
}

func (c *conn) replyError(id json.RawMessage, code int, format string, args ...any) error {
	line, err := acp.EncodeError(id, &acp.ResponseError{Code: code, Message: fmt.Sprintf(format, args...)})
	if err != nil {
		return fmt.Errorf("encoding response message: %w", err)
	}
	return c.send(line)
}

// call sends a request to the editor and waits for its response, which it
// decodes into result. It returns ctx's error if ctx ends first (a late
// response is then dropped), an *acp.ResponseError if the editor answered
// with an error, and errInputClosed once stdin is closed.
func (c *conn) call(ctx context.Context, method string, params, result any) error {
	id, ch, err := c.register()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	defer c.unregister(id)
	line, err := acp.EncodeRequest(id, method, params)
	if err != nil {
		return fmt.Errorf("encoding %s message: %w", method, err)
	}
	if err := c.send(line); err != nil {
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

func (c *conn) register() (json.RawMessage, chan *acp.Envelope, error) {
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
	ch := make(chan *acp.Envelope, 1)
	c.pending[acp.IDKey(id)] = ch
	return id, ch, nil
}

func (c *conn) unregister(id json.RawMessage) {
	c.pmu.Lock()
	delete(c.pending, acp.IDKey(id))
	c.pmu.Unlock()
}

// deliver hands a response to the call waiting for it and reports whether
// one was.
func (c *conn) deliver(m *acp.Envelope) bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	key := acp.IDKey(m.ID)
	ch, ok := c.pending[key]
	if ok {
		delete(c.pending, key)
		ch <- m
	}
	return ok
}

// errMuted is what writes return once the agent went silent
// (--mute-on-eof).
var errMuted = errors.New("silent after stdin EOF (--mute-on-eof)")

// mute drops every later write.
func (c *conn) mute() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr == nil {
		c.werr = errMuted
	}
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

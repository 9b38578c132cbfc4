package scenario

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/acptap/acptap/internal/acp"
)

// conn is the editor's end of an ACP connection: requests it sends, by
// id, and what the agent sends, dispatched as it comes.
type conn struct {
	wmu sync.Mutex // guards w and nextID
	w   io.Writer
	// nextID numbers the editor's requests from 0, as editors do.
	nextID int

	mu      sync.Mutex // guards pending and gone
	pending map[string]chan reply
	// gone is set once the agent's stdout has ended: calls fail at once.
	gone bool

	// onRequest answers a request of the agent's; it runs on a goroutine
	// of its own, since some (terminal/wait_for_exit) wait.
	onRequest func(method string, params json.RawMessage) (any, *acp.ResponseError)
	// onNotification takes a notification of the agent's, in order, on
	// the reading goroutine.
	onNotification func(method string, params json.RawMessage)

	// done is closed once the agent's stdout has ended and every request
	// of the agent's has been answered.
	done chan struct{}
	// answering counts the agent's requests being answered.
	answering sync.WaitGroup
}

// reply is the agent's answer to a request of the editor's.
type reply struct {
	result json.RawMessage
	err    *acp.ResponseError
	gone   bool // the agent's stdout ended without an answer
}

func newConn(w io.Writer) *conn {
	return &conn{w: w, pending: map[string]chan reply{}, done: make(chan struct{})}
}

// read dispatches the agent's lines until r ends. Lines that are not
// JSON-RPC (agents print logs to stdout at times) are skipped.
func (c *conn) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			c.dispatch(line)
		}
		if err != nil {
			break
		}
	}
	c.mu.Lock()
	c.gone = true
	for id, ch := range c.pending {
		ch <- reply{gone: true}
		delete(c.pending, id)
	}
	c.mu.Unlock()
	c.answering.Wait()
	close(c.done)
}

func (c *conn) dispatch(line []byte) {
	m := acp.Parse(line)
	switch m.Kind {
	case acp.Response, acp.Error:
		c.mu.Lock()
		ch := c.pending[acp.IDKey(m.ID)]
		delete(c.pending, acp.IDKey(m.ID))
		c.mu.Unlock()
		if ch == nil {
			return // an answer to nothing asked: not the editor's problem
		}
		if m.Kind == acp.Error {
			ch <- reply{err: &acp.ResponseError{Code: m.ErrorCode, Message: m.ErrorMessage}}
		} else {
			ch <- reply{result: m.Result}
		}
	case acp.Request:
		c.answering.Add(1)
		go func() {
			defer c.answering.Done()
			result, rerr := c.onRequest(m.Method, m.Params)
			var out []byte
			var err error
			if rerr != nil {
				out, err = acp.EncodeError(m.ID, rerr)
			} else {
				out, err = acp.EncodeResult(m.ID, result)
			}
			if err == nil {
				c.write(out) // an agent gone has no use for the answer
			}
		}()
	case acp.Notification:
		c.onNotification(m.Method, m.Params)
	}
}

// write sends one line.
func (c *conn) write(line []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(line)
	return err
}

// notify sends a notification.
func (c *conn) notify(method string, params any) error {
	line, err := acp.EncodeNotification(method, params)
	if err != nil {
		return err
	}
	if err := c.write(line); err != nil {
		return fmt.Errorf("sending %s: %w", method, err)
	}
	return nil
}

// call sends a request and waits for its answer, decoded into result
// (unless nil). An error answer is an *acp.ResponseError wrapped in
// ErrAgent.
func (c *conn) call(ctx context.Context, method string, params, result any) error {
	ch := make(chan reply, 1)
	c.wmu.Lock()
	id := json.RawMessage(strconv.Itoa(c.nextID))
	c.nextID++
	line, err := acp.EncodeRequest(id, method, params)
	if err != nil {
		c.wmu.Unlock()
		return err
	}
	c.mu.Lock()
	if c.gone {
		c.mu.Unlock()
		c.wmu.Unlock()
		return fmt.Errorf("%w: the agent closed its stdout before %s", ErrAgent, method)
	}
	c.pending[acp.IDKey(id)] = ch
	c.mu.Unlock()
	_, err = c.w.Write(line)
	c.wmu.Unlock()
	if err != nil {
		c.forget(id)
		return fmt.Errorf("sending %s: %w", method, err)
	}
	select {
	case r := <-ch:
		switch {
		case r.gone:
			return fmt.Errorf("%w: the agent closed its stdout while the editor waited for the %s response", ErrAgent, method)
		case r.err != nil:
			return fmt.Errorf("%w: it answered %s with an error: %w", ErrAgent, method, r.err)
		case result != nil:
			if err := json.Unmarshal(r.result, result); err != nil {
				return fmt.Errorf("%w: its %s response: %v", ErrAgent, method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.forget(id)
		return fmt.Errorf("gave up waiting for the %s response: %w", method, context.Cause(ctx))
	}
}

func (c *conn) forget(id json.RawMessage) {
	c.mu.Lock()
	delete(c.pending, acp.IDKey(id))
	c.mu.Unlock()
}

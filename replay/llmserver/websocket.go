package llmserver

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/wire"
	"github.com/acptap/acptap/internal/wsframe"
)

// # WebSockets
//
// The tap records a WebSocket as an exchange per message of the agent's,
// its URL ws:// or wss://, whose chunks are the server's messages that
// answered it (see package proxy). A Server answers an upgrade to a
// WebSocket of an LLM API (wire.LLMRequest of its ws:// URL) by
// switching protocols itself, and serves each message the agent sends
// on it as an LLM request whose body is the message: queued by its
// method, path and model as a POST is, compared with its recorded twin,
// answered with the twin's messages in the recorded order, text or
// binary, at the recorded pace with Options.Speed. Faults apply: cut and
// reset close the connection after K messages, hang sends nothing, status
// and an unanswered message get an error event of the format (for the
// Responses API {"type":"error",...}), malformed garbles one message. A
// recorded upgrade the upstream refused, or that got no response, is
// answered as recorded instead of switching.

// maxWebSocketMessage bounds a message of the agent's.
const maxWebSocketMessage = 256 << 20

// isWebSocketUpgrade reports whether req asks to upgrade to a WebSocket.
func isWebSocketUpgrade(req *http.Request) bool {
	return req.Method == http.MethodGet && strings.EqualFold(req.Header.Get("Upgrade"), "websocket")
}

// wsURL returns the URL of req with the scheme of a WebSocket, as the
// tap records it.
func wsURL(req *http.Request) string {
	u := *req.URL
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	default:
		u.Scheme = "ws"
	}
	return u.String()
}

// acceptKey is the Sec-WebSocket-Accept of a Sec-WebSocket-Key (RFC 6455
// section 4.2.2).
func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// roundTripWebSocket answers an upgrade to a WebSocket.
func (s *Server) roundTripWebSocket(req *http.Request, start time.Time) (*http.Response, error) {
	u := wsURL(req)
	format := wire.Detect(http.MethodGet, u, nil)
	// A refused or failed upgrade recorded is the next of the upgrades
	// without a message: answered as it was.
	key := requestKey(http.MethodGet, req.URL.Path, "", false)
	s.mu.Lock()
	q := s.queues[key]
	refused := q != nil && q.next < len(q.entries) && q.entries[q.next].Exchange.Status != http.StatusSwitchingProtocols
	s.mu.Unlock()
	if refused {
		live := &exchange.Exchange{Method: http.MethodGet, URL: u, RequestHeaders: req.Header.Clone(), RequestBody: []byte{}}
		e, fault, reason := s.takeLLM(key, live, nil)
		if e == nil {
			msg := "acptap replay: no recorded exchange for " + key + " (" + reason + ")"
			return errorResponse(req, format, http.StatusBadRequest, "acptap_replay", msg, http.Header{markHeader: {"unanswered"}}), nil
		}
		x, err := s.loadAndCompare(e, fault, live)
		if err != nil {
			return nil, err
		}
		return s.answer(req, start, format, e, x, fault)
	}
	agent, server := net.Pipe()
	c := &wsConn{s: s, conn: server, url: u, path: req.URL.Path, header: req.Header.Clone(), format: format}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.serve()
	h := http.Header{"Sec-Websocket-Accept": {acceptKey(req.Header.Get("Sec-Websocket-Key"))}}
	if p := req.Header.Get("Sec-Websocket-Protocol"); p != "" {
		first, _, _ := strings.Cut(p, ",")
		h.Set("Sec-Websocket-Protocol", strings.TrimSpace(first))
	}
	return &http.Response{
		Status: "101 Switching Protocols", StatusCode: http.StatusSwitchingProtocols,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: agent, ContentLength: -1, Request: req,
	}, nil
}

// wsConn is the server's end of a replayed WebSocket.
type wsConn struct {
	s      *Server
	conn   net.Conn
	url    string
	path   string
	header http.Header
	format wire.Format

	ctx    context.Context // done when the connection ends
	cancel context.CancelFunc

	wmu sync.Mutex // guards writes to conn
}

// serve reads the agent's frames until the connection ends, answering
// pings and a close, and hands each message to the worker that answers
// them in order.
func (c *wsConn) serve() {
	defer c.conn.Close()
	defer c.cancel()
	messages := make(chan []byte, 16)
	worker := make(chan struct{})
	go func() {
		defer close(worker)
		for m := range messages {
			if !c.answer(m) {
				c.conn.Close()
				return
			}
		}
	}()
	defer func() {
		close(messages)
		<-worker
	}()
	br := bufio.NewReader(c.conn)
	var asm wsframe.Assembler
	for {
		f, _, err := wsframe.Read(br, maxWebSocketMessage)
		if err != nil {
			return
		}
		switch f.Opcode {
		case wsframe.Ping:
			c.write(wsframe.ServerFrame(wsframe.Pong, f.Payload))
			continue
		case wsframe.Close:
			c.write(wsframe.ServerFrame(wsframe.Close, f.Payload))
			return
		}
		m, err := asm.Add(f)
		if err != nil {
			return
		}
		if m != nil {
			select {
			case messages <- m.Data:
			case <-c.ctx.Done():
				return
			}
		}
	}
}

// write writes a frame; false if the connection is gone.
func (c *wsConn) write(f wsframe.Frame) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.conn.Write(wsframe.Append(nil, f))
	return err == nil
}

// answer answers one message of the agent's; false when the connection
// is to end (a cut, a reset, the recorded connection breaking there).
func (c *wsConn) answer(msg []byte) bool {
	start := time.Now()
	live := &exchange.Exchange{Method: http.MethodGet, URL: c.url, RequestHeaders: c.header, RequestBody: msg}
	model, structured := requestFacts(c.format, c.url, msg)
	key := requestKey(http.MethodGet, c.path, model, structured)
	e, fault, reason := c.s.takeLLM(key, live, nil)
	if e == nil {
		return c.write(wsframe.ServerFrame(wsframe.Text, wsErrorEvent(c.format, http.StatusBadRequest, "acptap_replay", "acptap replay: no recorded exchange for "+key+" ("+reason+")")))
	}
	x, err := c.s.loadAndCompare(e, fault, live)
	if err != nil {
		return false
	}
	chunks := []exchange.Chunk(nil)
	if x != nil {
		chunks = x.Chunks
	}
	if fault != nil {
		switch fault.Kind {
		case FaultHang:
			c.s.waitCancel(c.ctx, e.Number, "hanging as injected")
			return false
		case FaultStatus:
			return c.write(wsframe.ServerFrame(wsframe.Text, wsErrorEvent(c.format, fault.Status, "acptap_fault", fmt.Sprintf("acptap replay: injected fault %s on llm #%d", fault, e.Number))))
		case FaultCut, FaultReset:
			n := fault.Events
			if n < 0 {
				n = len(chunks) / 2
			}
			for _, ch := range chunks[:min(n, len(chunks))] {
				if !c.send(e.Number, start, ch) {
					return false
				}
			}
			return false
		case FaultMalformed:
			chunks = append([]exchange.Chunk(nil), chunks...)
			if len(chunks) > 0 {
				mid := len(chunks) / 2
				chunks[mid] = exchange.Chunk{At: chunks[mid].At, Data: []byte(`{"type":`)}
			}
		}
	}
	for _, ch := range chunks {
		if !c.send(e.Number, start, ch) {
			return false
		}
	}
	switch {
	case x.End == exchange.EndComplete:
		return true
	case agentLeft(x):
		// The agent walked away when recording: it gets no more.
		return true
	}
	// The recorded connection broke here.
	return false
}

// send sends a recorded message of exchange number at its time.
func (c *wsConn) send(number int, start time.Time, ch exchange.Chunk) bool {
	if err := c.s.sleepUntil(c.ctx, nil, number, start, ch.At); err != nil {
		return false
	}
	op := wsframe.Text
	if ch.Binary {
		op = wsframe.Binary
	}
	return c.write(wsframe.ServerFrame(op, ch.Data))
}

// wsErrorEvent is an error message of a WebSocket of format f: the
// Responses API's error event, or the error body of the format's HTTP
// API for another.
func wsErrorEvent(f wire.Format, status int, typ, msg string) []byte {
	if f != wire.OpenAIResponses {
		return errorBody(f, status, typ, msg)
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "status": status, "error": map[string]any{"type": typ, "message": msg}})
	return b
}

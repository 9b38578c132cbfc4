package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/hop"
	"github.com/acptap/acptap/internal/wire"
	"github.com/acptap/acptap/internal/wsframe"
)

// A WebSocket the agent opens through the tap (a GET asking to upgrade to
// "websocket", by either route) is opened upstream with the same request
// and, once the upstream has switched protocols, relayed frame by frame,
// each as it was read, in both directions. The offer of extensions
// (Sec-WebSocket-Extensions, per-message-deflate) is left out of the
// upgrade request, so that no message is compressed and each is recorded
// as it is sent.
//
// The connection is recorded as exchanges of its messages, each in its
// place on the timeline: a message of the agent's begins an exchange (the
// upgrade request's header, the message as its request body), whose
// chunks are the server's messages that follow it (one chunk a message,
// binary ones marked), until the next message of the agent's, the end of
// the connection, or the event of the wire format that ends a response
// (wire.WebSocketTurnEnd: response.completed of the Responses API).
// Messages of the server's before any of the agent's make an exchange
// without a request body. The URL recorded is ws:// or wss://, the
// status 101, the response header the upgrade's. Control frames (ping,
// pong, close) are relayed and not recorded; how the connection ended is
// the open exchange's end.

// maxWebSocketMessage bounds the message the tap assembles for the
// recording; a longer one is relayed and left out (the store keeps at
// most store.MaxDataSize of an exchange anyway).
const maxWebSocketMessage = 64 << 20

// isWebSocket reports whether r asks to upgrade to a WebSocket.
func isWebSocket(r *http.Request) bool {
	if r.Method != http.MethodGet || !isUpgrade(r.Header) {
		return false
	}
	for _, v := range r.Header.Values("Upgrade") {
		for p := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(p), "websocket") {
				return true
			}
		}
	}
	return false
}

// wsURL returns u with the scheme of a WebSocket: ws for http, wss for
// https.
func wsURL(u *url.URL) string {
	c := *u
	switch c.Scheme {
	case "http":
		c.Scheme = "ws"
	case "https":
		c.Scheme = "wss"
	}
	return c.String()
}

// serveWebSocket opens the WebSocket r asks for upstream and relays it,
// recording its messages. start is when r arrived.
func (t *Tap) serveWebSocket(w http.ResponseWriter, r *http.Request, tg target, start time.Time) {
	header := r.Header.Clone()
	hop.RemoveHeaders(header)
	header.Del("Sec-Websocket-Extensions")
	header.Set("Connection", "Upgrade")
	header.Set("Upgrade", "websocket")

	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	defer cancel(nil)
	defer context.AfterFunc(t.ctx, func() { cancel(ErrClosed) })()
	resp, err := t.transport.RoundTrip(upstreamRequest(ctx, http.MethodGet, tg, header, false, nil))
	if err != nil {
		err = t.why(r, err)
		t.notice(r.Method, tg.url, fmt.Errorf("no response: %w", err))
		// Recorded as an exchange of the upgrade that failed, so that a
		// replay fails it too.
		rec := t.wsRecord(start, tg)
		rec.request(header, []byte{})
		rec.end(endOf(err, exchange.EndUpstreamFailed), fmt.Errorf("no response: %w", err))
		http.Error(w, fmt.Sprintf("acptap: no response from %s: %v", tg.url.Host, err), http.StatusBadGateway)
		return
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		// Refused: an ordinary exchange.
		defer resp.Body.Close()
		hop.RemoveHeaders(resp.Header)
		rec := t.wsRecord(start, tg)
		rec.request(header, []byte{})
		rec.response(resp, time.Since(start))
		t.forwardResponse(w, r, tg, rec, resp, start)
		return
	}
	upstream, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		http.Error(w, "acptap: the upstream switched protocols without a connection to relay", http.StatusBadGateway)
		return
	}
	defer upstream.Close()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// An HTTP/2 connection cannot be taken over; agents open
		// WebSockets over HTTP/1.1.
		t.notice(r.Method, tg.url, fmt.Errorf("relaying a WebSocket: %w", err))
		http.Error(w, "acptap: a WebSocket needs an HTTP/1.1 connection", http.StatusHTTPVersionNotSupported)
		return
	}
	defer conn.Close()
	respHeader := resp.Header.Clone()
	hop.RemoveHeaders(respHeader)
	respHeader.Del("Sec-Websocket-Extensions")
	if err := writeSwitch(brw.Writer, respHeader); err != nil {
		return
	}
	s := &wsSession{t: t, tg: tg, header: header, resp: &http.Response{StatusCode: resp.StatusCode, Proto: resp.Proto, Header: respHeader}, format: wire.Detect(http.MethodGet, wsURL(tg.url), nil)}
	// Either direction ending ends both: the other side's read returns
	// once its connection is closed.
	done := make(chan wsEnd, 2)
	go func() {
		done <- wsEnd{agent: true, err: s.relay(brw.Reader, upstream, true)}
		upstream.Close()
	}()
	go func() {
		done <- wsEnd{err: s.relay(bufio.NewReader(upstream), conn, false)}
		conn.Close()
	}()
	first := <-done
	<-done
	s.close(first)
}

// wsEnd is how one direction of a WebSocket ended: the agent's (agent)
// or the server's, err why its reading stopped.
type wsEnd struct {
	agent bool
	err   error
}

// writeSwitch writes the 101 response that switches the agent's
// connection to the WebSocket, with the upstream's header.
func writeSwitch(w *bufio.Writer, h http.Header) error {
	w.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n")
	h.Write(w)
	w.WriteString("\r\n")
	return w.Flush()
}

// wsRecord starts recording an exchange of a WebSocket at start: its
// URL ws:// or wss://. The caller gives it its request (the upgrade's
// header).
func (t *Tap) wsRecord(start time.Time, tg target) *record {
	rec := t.newRecord(start, http.MethodGet, tg)
	if rec != nil {
		rec.x.URL = wsURL(tg.url)
	}
	return rec
}

// wsSession is the recording of one relayed WebSocket.
type wsSession struct {
	t      *Tap
	tg     target
	header http.Header    // the upgrade request's, as sent upstream
	resp   *http.Response // the upgrade's response
	format wire.Format

	mu     sync.Mutex // guards open, closed and the record's fields while it is open
	open   *record    // the exchange of the agent's latest message, until it ends
	closed bool       // a close frame went by: the connection is closing as it should
}

// relay copies frames from src to dst, each as it was read, and records
// the messages they make: the agent's if fromAgent. It returns why it
// stopped: io.EOF for src's end.
func (s *wsSession) relay(src *bufio.Reader, dst io.Writer, fromAgent bool) error {
	asm := wsframe.Assembler{Max: maxWebSocketMessage}
	for {
		f, raw, err := wsframe.Read(src, 1<<62)
		if err != nil {
			return err
		}
		if f.Opcode == wsframe.Close {
			s.mu.Lock()
			s.closed = true
			s.mu.Unlock()
		}
		m, aerr := asm.Add(f)
		if aerr != nil {
			// Relayed all the same; the recording leaves it out.
			s.t.logf("http tap: a WebSocket message of %s not recorded: %v", s.tg.url.Host, aerr)
			m = nil
		}
		// The agent's message begins its exchange before its last frame
		// goes upstream, so that no answer can come before it; the
		// server's is recorded once the agent has it.
		if m != nil && fromAgent {
			s.agentMessage(m)
		}
		if _, err := dst.Write(raw); err != nil {
			return fmt.Errorf("relaying: %w", err)
		}
		if m != nil && !fromAgent {
			s.serverMessage(m)
		}
	}
}

// agentMessage begins the exchange of a message of the agent's, ending
// the one before it.
func (s *wsSession) agentMessage(m *wsframe.Message) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open != nil {
		s.open.end(exchange.EndComplete, nil)
	}
	s.open = s.begin(now, m.Data)
}

// begin starts recording an exchange at now with body, the agent's
// message; s.mu is held.
func (s *wsSession) begin(now time.Time, body []byte) *record {
	rec := s.t.wsRecord(now, s.tg)
	if rec == nil {
		return nil
	}
	rec.request(s.header, body)
	rec.response(s.resp, 0)
	return rec
}

// serverMessage records a message of the server's as a chunk of the open
// exchange, and ends the exchange if it ends the response.
func (s *wsSession) serverMessage(m *wsframe.Message) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		s.open = s.begin(now, nil)
	}
	rec := s.open
	if rec == nil {
		return
	}
	at := now.Sub(rec.start)
	if len(rec.ends) == 0 {
		rec.x.TTFB = at
	}
	rec.message(m.Data, at, m.Opcode == wsframe.Binary)
	if m.Opcode == wsframe.Text && wire.WebSocketTurnEnd(s.format, m.Data) {
		rec.end(exchange.EndComplete, nil)
		s.open = nil
	}
}

// close ends the exchange still open when the connection ends, first
// the way its first direction ended: complete after a close frame; else
// ended with the tap, the agent gone, or cut by the server.
func (s *wsSession) close(first wsEnd) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		return
	}
	switch {
	case s.t.ctx.Err() != nil:
		s.open.end(exchange.EndTapClosed, fmt.Errorf("the WebSocket ended: %w", ErrClosed))
	case s.closed:
		s.open.end(exchange.EndComplete, nil)
	case first.agent:
		s.open.end(exchange.EndClientGone, fmt.Errorf("the WebSocket ended: %w: %w", errClientGone, first.err))
	default:
		s.open.end(exchange.EndCut, fmt.Errorf("the WebSocket broke: %w", first.err))
	}
	s.open = nil
}

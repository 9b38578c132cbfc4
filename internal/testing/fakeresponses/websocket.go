package fakeresponses

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/acptap/acptap/internal/testing/fakellm"
	"github.com/acptap/acptap/internal/wsframe"
)

// serveWebSocket is the Responses API's WebSocket mode: GET /v1/responses
// upgraded, then each response.create message of the client's (the
// fields of a POST's body; streaming implied) answered as a POST is, each
// event a text message. An extension the client offers is not taken.
func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request, rec Request) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "a WebSocket needs HTTP/1.1", http.StatusHTTPVersionNotSupported)
		return
	}
	defer conn.Close()
	h := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Request-Id: req_" + fakellm.RandomHex(16) +
		"\r\nSec-WebSocket-Accept: " + base64.StdEncoding.EncodeToString(h[:]) + "\r\n\r\n")
	if brw.Flush() != nil {
		return
	}
	var wmu sync.Mutex // guards conn's writes
	write := func(f wsframe.Frame) {
		wmu.Lock()
		defer wmu.Unlock()
		conn.Write(wsframe.Append(nil, f))
	}
	gone := make(chan struct{})
	defer close(gone)
	// Messages are answered in order, one at a time, as the API does on
	// one connection; the reader answers pings and a close meanwhile.
	messages := make(chan []byte, 8)
	go func() {
		for m := range messages {
			s.wsMessage(rec, m, write, gone)
		}
	}()
	defer close(messages)
	br := bufio.NewReader(brw.Reader)
	var asm wsframe.Assembler
	for {
		f, _, err := wsframe.Read(br, 64<<20)
		if err != nil {
			return
		}
		switch f.Opcode {
		case wsframe.Ping:
			write(wsframe.ServerFrame(wsframe.Pong, f.Payload))
			continue
		case wsframe.Close:
			write(wsframe.ServerFrame(wsframe.Close, f.Payload))
			return
		}
		if m, err := asm.Add(f); err != nil {
			return
		} else if m != nil {
			messages <- m.Data
		}
	}
}

// wsMessage answers one message of the client's.
func (s *Server) wsMessage(rec Request, msg []byte, write func(wsframe.Frame), gone <-chan struct{}) {
	rec.Body = msg
	var req request
	var typ struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(msg, &req); err != nil || json.Unmarshal(msg, &typ) != nil || typ.Type != "response.create" || len(req.Input) == 0 && (req.Generate == nil || *req.Generate) {
		s.Keep(rec)
		write(wsframe.ServerFrame(wsframe.Text, marshal(map[string]any{"type": "error", "status": 400,
			"error": map[string]any{"type": "invalid_request_error", "message": "fakeresponses answers response.create messages with input"}})))
		return
	}
	st := newStream(req.Model, func(_ string, data []byte) { write(wsframe.ServerFrame(wsframe.Text, data)) })
	s.respond(rec, req, st, gone)
}

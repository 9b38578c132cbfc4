package proxy_test

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/wsframe"
	"github.com/acptap/acptap/proxy"
)

// acceptKey is the Sec-WebSocket-Accept of a key (RFC 6455 section 4.2.2).
func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// wsServer is an upstream that accepts a WebSocket and runs serve on it:
// it reads the client's frames from r and writes its own to w.
func wsServer(t *testing.T, seen chan<- http.Header, serve func(r *bufio.Reader, w io.Writer)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if seen != nil {
			seen <- req.Header.Clone()
		}
		if !strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "want a websocket", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijacking: %v", err)
			return
		}
		defer conn.Close()
		io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Upstream: yes\r\nSec-WebSocket-Accept: "+acceptKey(req.Header.Get("Sec-WebSocket-Key"))+"\r\n\r\n")
		serve(brw.Reader, conn)
	})
}

// dialWS opens a WebSocket to url with client, as an agent does.
func dialWS(t *testing.T, client *http.Client, url string) (*http.Response, io.ReadWriteCloser) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Extensions", "permessage-deflate; client_max_window_bits")
	req.Header.Set("Authorization", "Bearer sk-test-0123456789")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("the upgrade got %s: %s", resp.Status, b)
	}
	return resp, resp.Body.(io.ReadWriteCloser)
}

// TestWebSocket: a WebSocket is relayed frame by frame, each as it was
// sent, by every route, and recorded as an exchange per message of the
// agent's, the server's messages its chunks, until response.completed.
func TestWebSocket(t *testing.T) {
	events := []string{
		`{"type":"response.created"}`,
		`{"type":"response.output_text.delta","delta":"Hel"}`,
		`{"type":"response.output_text.delta","delta":"lo"}`,
		`{"type":"response.completed","response":{"status":"completed"}}`,
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			seen := make(chan http.Header, 1)
			// The server answers each text message with the events, and
			// a binary message with a binary one; a ping with a pong.
			h := wsServer(t, seen, func(r *bufio.Reader, w io.Writer) {
				var asm wsframe.Assembler
				for {
					f, _, err := wsframe.Read(r, 1<<20)
					if err != nil {
						return
					}
					if f.Opcode == wsframe.Ping {
						w.Write(wsframe.Append(nil, wsframe.ServerFrame(wsframe.Pong, f.Payload)))
						continue
					}
					if f.Opcode == wsframe.Close {
						w.Write(wsframe.Append(nil, wsframe.ServerFrame(wsframe.Close, f.Payload)))
						return
					}
					m, _ := asm.Add(f)
					switch {
					case m == nil:
					case m.Opcode == wsframe.Binary:
						w.Write(wsframe.Append(nil, wsframe.ServerFrame(wsframe.Binary, []byte{0xff, 0x00})))
					default:
						for _, e := range events {
							w.Write(wsframe.Append(nil, wsframe.ServerFrame(wsframe.Text, []byte(e))))
						}
					}
				}
			})
			s := setup(t, rt, h, "/v1/responses", proxy.Config{})
			resp, conn := dialWS(t, s.client, s.url)
			defer conn.Close()
			got := <-seen
			if got.Get("Sec-Websocket-Extensions") != "" || got.Get("Authorization") != "Bearer sk-test-0123456789" {
				t.Errorf("the upstream got extensions %q, authorization %q; want none offered, the agent's key", got.Get("Sec-Websocket-Extensions"), got.Get("Authorization"))
			}
			if resp.Header.Get("X-Upstream") != "yes" || resp.Header.Get("Sec-Websocket-Accept") != acceptKey("dGhlIHNhbXBsZSBub25jZQ==") {
				t.Errorf("the agent got the switch's header %v; want the upstream's", resp.Header)
			}
			br := bufio.NewReader(conn)
			read := func() wsframe.Frame {
				t.Helper()
				f, _, err := wsframe.Read(br, 1<<20)
				if err != nil {
					t.Fatalf("reading from the tap: %v", err)
				}
				return f
			}
			// The first message in two frames.
			conn.Write(wsframe.Append(nil, wsframe.Frame{Opcode: wsframe.Text, Masked: true, Payload: []byte(`{"type":"response.create",`)}))
			conn.Write(wsframe.Append(nil, wsframe.Frame{Fin: true, Opcode: wsframe.Continuation, Masked: true, Payload: []byte(`"model":"gpt-5","input":"hi"}`)}))
			for _, e := range events {
				if f := read(); string(f.Payload) != e || f.Opcode != wsframe.Text || f.Masked {
					t.Errorf("the agent got %s %q (masked %v); want the server's %q", f.Opcode, f.Payload, f.Masked, e)
				}
			}
			conn.Write(wsframe.Append(nil, wsframe.ClientFrame(wsframe.Ping, []byte("p"))))
			if f := read(); f.Opcode != wsframe.Pong || string(f.Payload) != "p" {
				t.Errorf("the agent got %s %q; want the pong", f.Opcode, f.Payload)
			}
			conn.Write(wsframe.Append(nil, wsframe.ClientFrame(wsframe.Binary, []byte{1, 2})))
			if f := read(); f.Opcode != wsframe.Binary {
				t.Errorf("the agent got %s; want the binary answer", f.Opcode)
			}
			conn.Write(wsframe.Append(nil, wsframe.ClientFrame(wsframe.Close, wsframe.ClosePayload(1000, "done"))))
			if f := read(); f.Opcode != wsframe.Close {
				t.Errorf("the agent got %s; want the close", f.Opcode)
			}
			conn.Close()

			xs := s.rec.finished(t, 2)
			want := strings.Replace(strings.Replace(s.upstream, "https://", "wss://", 1), "http://", "ws://", 1)
			for i, x := range xs {
				if x.URL != want || x.Method != "GET" || x.Status != 101 || x.End != exchange.EndComplete || x.Route != rt.recorded {
					t.Errorf("exchange %d: %s %s → %d, end %v, route %s; want GET %s → 101, complete, %s", i+1, x.Method, x.URL, x.Status, x.End, x.Route, want, rt.recorded)
				}
				if x.RequestHeaders.Get("Upgrade") == "" && x.RequestHeaders.Get("Sec-Websocket-Key") == "" {
					t.Errorf("exchange %d: request header %v; want the upgrade's", i+1, x.RequestHeaders)
				}
			}
			if string(xs[0].RequestBody) != `{"type":"response.create","model":"gpt-5","input":"hi"}` {
				t.Errorf("the first exchange's request %q; want the agent's message whole", xs[0].RequestBody)
			}
			if len(xs[0].Chunks) != len(events) {
				t.Fatalf("the first exchange has %d chunks, want one per message (%d)", len(xs[0].Chunks), len(events))
			}
			for i, e := range events {
				if string(xs[0].Chunks[i].Data) != e || xs[0].Chunks[i].Binary {
					t.Errorf("chunk %d: %q, want the text message %q", i, xs[0].Chunks[i].Data, e)
				}
			}
			if len(xs[1].Chunks) != 1 || !xs[1].Chunks[0].Binary || string(xs[1].RequestBody) != "\x01\x02" {
				t.Errorf("the second exchange: request %q, chunks %+v; want the binary messages", xs[1].RequestBody, xs[1].Chunks)
			}
		})
	}
}

// TestWebSocketRefused: an upstream that does not switch protocols is an
// ordinary exchange the agent gets as it was; an upgrade to another
// protocol is refused.
func TestWebSocketRefused(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"websockets off"}`, http.StatusUpgradeRequired)
	})
	s := setup(t, routes[4], h, "/v1/responses", proxy.Config{})
	req, _ := http.NewRequest(http.MethodGet, s.url, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired || !strings.Contains(string(b), "websockets off") {
		t.Errorf("got %s %q; want the upstream's 426", resp.Status, b)
	}
	x := s.rec.finished(t, 1)[0]
	if x.Status != http.StatusUpgradeRequired || !strings.HasPrefix(x.URL, "ws://") || x.End != exchange.EndComplete {
		t.Errorf("recorded %s → %d, end %v; want the ws:// upgrade answered 426", x.URL, x.Status, x.End)
	}
}

// TestWebSocketEnds: the exchange open when the connection ends is cut
// if the server broke it mid-answer, the agent's gone if the agent
// dropped it, and complete after a close handshake.
func TestWebSocketEnds(t *testing.T) {
	for _, c := range []struct {
		name string
		// server answers the agent's message with one event, then does
		// what the case says.
		server func(w io.Writer) bool // false: drop the connection
		agent  func(conn io.ReadWriteCloser)
		want   exchange.End
	}{
		{"server breaks", func(w io.Writer) bool { return false }, func(conn io.ReadWriteCloser) {}, exchange.EndCut},
		{"agent drops", func(w io.Writer) bool { return true }, func(conn io.ReadWriteCloser) { conn.Close() }, exchange.EndClientGone},
		{"close handshake", func(w io.Writer) bool { return true }, func(conn io.ReadWriteCloser) {
			conn.Write(wsframe.Append(nil, wsframe.ClientFrame(wsframe.Close, wsframe.ClosePayload(1000, ""))))
		}, exchange.EndComplete},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := wsServer(t, nil, func(r *bufio.Reader, w io.Writer) {
				var asm wsframe.Assembler
				for {
					f, _, err := wsframe.Read(r, 1<<20)
					if err != nil {
						return
					}
					if f.Opcode == wsframe.Close {
						w.Write(wsframe.Append(nil, wsframe.ServerFrame(wsframe.Close, f.Payload)))
						return
					}
					if m, _ := asm.Add(f); m != nil {
						w.Write(wsframe.Append(nil, wsframe.ServerFrame(wsframe.Text, []byte(`{"type":"response.created"}`))))
						if !c.server(w) {
							return
						}
					}
				}
			})
			s := setup(t, routes[4], h, "/v1/responses", proxy.Config{})
			_, conn := dialWS(t, s.client, s.url)
			defer conn.Close()
			br := bufio.NewReader(conn)
			conn.Write(wsframe.Append(nil, wsframe.ClientFrame(wsframe.Text, []byte(`{"type":"response.create","model":"m"}`))))
			if f, _, err := wsframe.Read(br, 1<<20); err != nil || f.Opcode != wsframe.Text {
				t.Fatalf("the first event: %v %v", f.Opcode, err)
			}
			c.agent(conn)
			x := s.rec.finished(t, 1)[0]
			if x.End != c.want || len(x.Chunks) != 1 {
				t.Errorf("recorded end %v (%s) with %d chunks; want %v with the one event", x.End, x.Error, len(x.Chunks), c.want)
			}
		})
	}
}

package llmserver_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/wsframe"
	"github.com/acptap/acptap/replay/llmserver"
)

// wsExchange is a recorded message exchange of a Responses WebSocket:
// the agent's response.create for model with input, and the events.
func wsExchange(model, input string, events ...string) *exchange.Exchange {
	x := &exchange.Exchange{
		Route: exchange.RouteProxy, Method: "GET", URL: strings.Replace(upstream, "https://", "wss://", 1) + "/v1/responses",
		RequestHeaders: http.Header{"Upgrade": {"websocket"}},
		RequestBody:    []byte(`{"type":"response.create","model":"` + model + `","input":"` + input + `"}`),
		Status:         101, ResponseHeaders: http.Header{},
		End: exchange.EndComplete,
	}
	for i, e := range events {
		x.Chunks = append(x.Chunks, exchange.Chunk{At: time.Duration(i) * time.Millisecond, Data: []byte(e)})
	}
	return x
}

var wsEvents = []string{
	`{"type":"response.created"}`,
	`{"type":"response.output_text.delta","delta":"Hi"}`,
	`{"type":"response.completed","response":{"status":"completed"}}`,
}

// wsDial opens a WebSocket through the tap, as the agent does.
func wsDial(t *testing.T, client *http.Client, u string) (io.ReadWriteCloser, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-Websocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("the upgrade got %s %v; want 101 with the key's accept", resp.Status, resp.Header)
	}
	conn := resp.Body.(io.ReadWriteCloser)
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

// sendText sends a text message of the agent's.
func sendText(conn io.Writer, msg string) {
	conn.Write(wsframe.Append(nil, wsframe.ClientFrame(wsframe.Text, []byte(msg))))
}

// readMessages reads n messages, or fewer if the connection ends.
func readMessages(br *bufio.Reader, n int) ([]string, error) {
	var out []string
	var asm wsframe.Assembler
	for len(out) < n {
		f, _, err := wsframe.Read(br, 1<<20)
		if err != nil {
			return out, err
		}
		if m, _ := asm.Add(f); m != nil {
			out = append(out, string(m.Data))
		}
	}
	return out, nil
}

// TestWebSocket: each message of the agent's on a replayed WebSocket is
// answered with the messages of its recorded twin, by its model, in
// order, by every route; one the recording has no answer for gets an
// error event; the report counts them as requests are counted.
func TestWebSocket(t *testing.T) {
	for _, rt := range []route{routes[0], routes[1]} {
		t.Run(rt.name, func(t *testing.T) {
			second := []string{`{"type":"response.created"}`, `{"type":"response.output_text.delta","delta":"Bye"}`, `{"type":"response.completed","response":{"status":"completed"}}`}
			s := newServer(t, llmserver.Options{Exchanges: recordedList(
				wsExchange("gpt-5", "hi", wsEvents...),
				wsExchange("gpt-5", "bye", second...),
			)})
			tap, ca := newTap(t, s)
			client, base := rt.via(t, tap, ca, upstream)
			conn, br := wsDial(t, client, base+"/v1/responses")
			sendText(conn, `{"type":"response.create","model":"gpt-5","input":"hi"}`)
			got, err := readMessages(br, 3)
			if err != nil || strings.Join(got, "\n") != strings.Join(wsEvents, "\n") {
				t.Fatalf("first answer %q (%v); want the recorded events", got, err)
			}
			sendText(conn, `{"type":"response.create","model":"gpt-5","input":"bye"}`)
			if got, err = readMessages(br, 3); err != nil || strings.Join(got, "\n") != strings.Join(second, "\n") {
				t.Fatalf("second answer %q (%v); want the second exchange's", got, err)
			}
			sendText(conn, `{"type":"response.create","model":"gpt-5","input":"more"}`)
			if got, err = readMessages(br, 1); err != nil || !strings.Contains(got[0], `"type":"error"`) || !strings.Contains(got[0], "acptap replay: no recorded exchange for GET /v1/responses model gpt-5") {
				t.Fatalf("an unrecorded message got %q (%v); want an error event naming its queue", got, err)
			}
			// A ping gets its pong, a close its close.
			conn.Write(wsframe.Append(nil, wsframe.ClientFrame(wsframe.Ping, []byte("p"))))
			if f, _, err := wsframe.Read(br, 1<<10); err != nil || f.Opcode != wsframe.Pong {
				t.Errorf("a ping got %v %v; want a pong", f.Opcode, err)
			}
			conn.Write(wsframe.Append(nil, wsframe.ClientFrame(wsframe.Close, wsframe.ClosePayload(1000, ""))))
			if f, _, err := wsframe.Read(br, 1<<10); err != nil || f.Opcode != wsframe.Close {
				t.Errorf("a close got %v %v; want a close", f.Opcode, err)
			}
			r := s.Report()
			if r.Served != 2 || len(r.Unanswered) != 1 || len(r.Unrequested) != 0 {
				t.Errorf("report: served %d, unanswered %v, unrequested %v; want 2, the third message, none", r.Served, r.Unanswered, r.Unrequested)
			}
		})
	}
}

// TestWebSocketFaults: cut:K closes the connection after K messages,
// status sends an error event, hang sends nothing.
func TestWebSocketFaults(t *testing.T) {
	for _, c := range []struct {
		spec string
		read int // messages to read
		want func(t *testing.T, got []string, err error)
	}{
		{"cut:1", 3, func(t *testing.T, got []string, err error) {
			if len(got) != 1 || got[0] != wsEvents[0] || err == nil {
				t.Errorf("got %q, %v; want the first event, then the connection gone", got, err)
			}
		}},
		{"status:529", 1, func(t *testing.T, got []string, err error) {
			if len(got) == 0 || !strings.Contains(got[0], `"status":529`) || !strings.Contains(got[0], "injected fault") {
				t.Errorf("got %q, %v; want an error event of status 529", got, err)
			}
		}},
	} {
		t.Run(c.spec, func(t *testing.T) {
			f, err := llmserver.ParseFault(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			s := newServer(t, llmserver.Options{Exchanges: recordedList(wsExchange("gpt-5", "hi", wsEvents...)), Faults: map[int]llmserver.Fault{1: f}})
			tap, ca := newTap(t, s)
			client, base := viaBaseURL(t, tap, ca, upstream)
			conn, br := wsDial(t, client, base+"/v1/responses")
			sendText(conn, `{"type":"response.create","model":"gpt-5","input":"hi"}`)
			got, err := readMessages(br, c.read)
			c.want(t, got, err)
		})
	}
	t.Run("hang", func(t *testing.T) {
		f, _ := llmserver.ParseFault("hang")
		s := newServer(t, llmserver.Options{Exchanges: recordedList(wsExchange("gpt-5", "hi", wsEvents...)), Faults: map[int]llmserver.Fault{1: f}})
		tap, ca := newTap(t, s)
		client, base := viaBaseURL(t, tap, ca, upstream)
		conn, br := wsDial(t, client, base+"/v1/responses")
		sendText(conn, `{"type":"response.create","model":"gpt-5","input":"hi"}`)
		got := make(chan error, 1)
		go func() {
			_, err := readMessages(br, 1)
			got <- err
		}()
		select {
		case err := <-got:
			t.Fatalf("a hung message got an answer or an end: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		conn.Close()
		if err := <-got; err == nil {
			t.Errorf("reading a closed connection succeeded")
		}
		if r := s.Report(); len(r.Faulted) != 1 {
			t.Errorf("faulted %v, want the one exchange", r.Faulted)
		}
	})
}

// TestWebSocketRefusedUpgrade: an upgrade the upstream refused when
// recording is answered as it was.
func TestWebSocketRefusedUpgrade(t *testing.T) {
	refused := &exchange.Exchange{Route: exchange.RouteBaseURL, Method: "GET", URL: "wss://api.llm.invalid/v1/responses", RequestBody: []byte{},
		Status: 426, ResponseHeaders: http.Header{"Content-Type": {"application/json"}}, Chunks: []exchange.Chunk{{Data: []byte(`{"error":"no websockets"}`)}}, End: exchange.EndComplete}
	s := newServer(t, llmserver.Options{Exchanges: recordedList(refused)})
	tap, ca := newTap(t, s)
	client, base := viaBaseURL(t, tap, ca, upstream)
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/responses", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 426 || !bytes.Contains(b, []byte("no websockets")) {
		t.Errorf("got %s %q; want the recorded 426", resp.Status, b)
	}
}

// TestWebSocketOtherAPI: a WebSocket of an API acptap does not know (a
// realtime API) is served in order all the same, through the proxy.
func TestWebSocketOtherAPI(t *testing.T) {
	x := wsExchange("", "", `{"type":"session.created"}`, `{"type":"response.done"}`)
	x.URL = strings.Replace(x.URL, "/v1/responses", "/v1/realtime", 1)
	x.RequestBody = []byte(`{"type":"session.update"}`)
	s := newServer(t, llmserver.Options{Exchanges: recordedList(x)})
	tap, ca := newTap(t, s)
	client, base := viaProxy(false)(t, tap, ca, upstream)
	conn, br := wsDial(t, client, base+"/v1/realtime")
	sendText(conn, `{"type":"session.update"}`)
	if got, err := readMessages(br, 2); err != nil || strings.Join(got, "|") != `{"type":"session.created"}|{"type":"response.done"}` {
		t.Errorf("got %q (%v); want the recorded messages", got, err)
	}
}

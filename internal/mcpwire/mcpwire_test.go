package mcpwire

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
)

func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    exchange.Exchange
		want []string // "> " for the agent's, "< " for the server's, "@N" its time in ms
	}{
		{
			name: "json",
			x: exchange.Exchange{
				Method: "POST", RequestBody: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), Status: 200, TTFB: 3 * time.Millisecond,
				ResponseHeaders: http.Header{"Content-Type": {"application/json"}},
				Chunks:          []exchange.Chunk{{At: 4 * time.Millisecond, Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`)}},
			},
			want: []string{`> @0 {"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `< @3 {"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`},
		},
		{
			name: "batch",
			x: exchange.Exchange{
				Method: "POST", RequestBody: []byte(` [{"jsonrpc":"2.0","id":1,"method":"ping"}, {"jsonrpc":"2.0","method":"notifications/initialized"}] `), Status: 202,
			},
			want: []string{`> @0 {"jsonrpc":"2.0","id":1,"method":"ping"}`, `> @0 {"jsonrpc":"2.0","method":"notifications/initialized"}`},
		},
		{
			name: "event stream",
			x: exchange.Exchange{
				Method: "POST", RequestBody: []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lookup"}}`), Status: 200,
				ResponseHeaders: http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}},
				Chunks: []exchange.Chunk{
					{At: 1 * time.Millisecond, Data: []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\nevent: mess")},
					{At: 7 * time.Millisecond, Data: []byte("age\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\n")},
					{At: 9 * time.Millisecond, Data: []byte("data: \"result\":{}}\n\n: keep-alive\n\nevent: endpoint\ndata: /x\n\n")},
				},
			},
			want: []string{
				`> @0 {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lookup"}}`,
				`< @1 {"jsonrpc":"2.0","method":"notifications/progress"}`,
				"< @9 {\"jsonrpc\":\"2.0\",\"id\":2,\n\"result\":{}}",
			},
		},
		{name: "not json", x: exchange.Exchange{Method: "POST", RequestBody: []byte("hello"), Status: 400, Chunks: []exchange.Chunk{{Data: []byte("bad request")}}}},
		{name: "get", x: exchange.Exchange{Method: "GET", Status: 405}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range Messages(&tc.x) {
				dir := "<"
				if m.ToServer {
					dir = ">"
				}
				got = append(got, dir+" @"+itoa(int(m.At/time.Millisecond))+" "+string(m.Data))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestSummary(t *testing.T) {
	jsonType := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct {
		x    exchange.Exchange
		want string
	}{
		{exchange.Exchange{Method: "POST", RequestBody: []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"lookup","arguments":{"topic":"answer"}}}`), Status: 200, ResponseHeaders: jsonType,
			Chunks: []exchange.Chunk{{Data: []byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"42"}]}}`)}}},
			`tools/call lookup {"topic":"answer"} → "42"`},
		{exchange.Exchange{Method: "POST", RequestBody: []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"lookup","arguments":{}}}`), Status: 200, ResponseHeaders: jsonType,
			Chunks: []exchange.Chunk{{Data: []byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"no"}],"isError":true}}`)}}},
			`tools/call lookup {} → "no" (error)`},
		{exchange.Exchange{Method: "POST", RequestBody: []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`), Status: 200, ResponseHeaders: jsonType,
			Chunks: []exchange.Chunk{{Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{"serverInfo":{}}}`)}}},
			`initialize → result`},
		{exchange.Exchange{Method: "POST", RequestBody: []byte(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}`), Status: 200, ResponseHeaders: jsonType,
			Chunks: []exchange.Chunk{{Data: []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"not found"}}`)}}},
			`resources/read file:///a → error -32002 not found`},
		{exchange.Exchange{Method: "POST", RequestBody: []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), Status: 202}, `notifications/initialized`},
		{exchange.Exchange{Method: "GET", Status: 200, ResponseHeaders: http.Header{"Content-Type": {"text/event-stream"}},
			Chunks: []exchange.Chunk{{Data: []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")}}},
			`← notifications/tools/list_changed`},
		{exchange.Exchange{Method: "GET", Status: 200, ResponseHeaders: http.Header{"Content-Type": {"text/event-stream"}}}, `GET stream`},
		{exchange.Exchange{Method: "DELETE", Status: 200}, `DELETE`},
	} {
		if got := Summary(&tc.x); got != tc.want {
			t.Errorf("Summary of %s %s = %q, want %q", tc.x.Method, tc.x.RequestBody, got, tc.want)
		}
	}
	if got := Hint([]byte(`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"review"}}`)); got != " review" {
		t.Errorf("Hint of prompts/get = %q, want %q", got, " review")
	}
	if got := Hint([]byte(`not json`)); got != "" {
		t.Errorf("Hint of a line that is not JSON = %q, want none", got)
	}
}

// FuzzMessages: any request and response bodies give messages that are
// each valid JSON, and a summary, without a panic.
func FuzzMessages(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`), []byte(`[{"id":1,"result":{}}]`), true)
	f.Add([]byte(`[1,2`), []byte("event: message\ndata: {}\n\ndata: [\n\n"), true)
	f.Add([]byte{}, []byte("\xff\x00"), false)
	f.Fuzz(func(t *testing.T, req, resp []byte, stream bool) {
		h := http.Header{"Content-Type": {"application/json"}}
		if stream {
			h.Set("Content-Type", "text/event-stream")
		}
		x := &exchange.Exchange{Method: "POST", RequestBody: req, Status: 200, ResponseHeaders: h,
			Chunks: []exchange.Chunk{{At: 1, Data: resp[:len(resp)/2]}, {At: 2, Data: resp[len(resp)/2:]}}}
		for _, m := range Messages(x) {
			if !jsonValid(m.Data) {
				t.Fatalf("message %q is not JSON", m.Data)
			}
		}
		Summary(x)
	})
}

func jsonValid(b []byte) bool { return json.Valid(b) }

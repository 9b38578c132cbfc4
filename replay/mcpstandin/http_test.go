package mcpstandin

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
)

// recordedHTTP returns the plan and responses of a Streamable HTTP
// server's recorded exchanges: initialize answered in JSON with a
// session id, a notification accepted, a tools/call answered on an event
// stream after a progress notification, a GET refused with 405.
func recordedHTTP() (*Plan, map[int]HTTPResponse) {
	jsonH := http.Header{"Content-Type": {"application/json"}, "Mcp-Session-Id": {"sess-1"}}
	sseH := http.Header{"Content-Type": {"text/event-stream"}, "Mcp-Session-Id": {"sess-1"}}
	xs := []*exchange.Exchange{
		{Method: "POST", RequestBody: []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`), Status: 200, ResponseHeaders: jsonH,
			Chunks: []exchange.Chunk{{Data: []byte(`{"jsonrpc":"2.0","id":0,"result":{"serverInfo":{"name":"web"}}}`)}}},
		{Method: "POST", RequestBody: []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), Status: 202},
		{Method: "POST", RequestBody: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup","arguments":{"path":"/rec/w/a"}}}`), Status: 200, ResponseHeaders: sseH,
			Chunks: []exchange.Chunk{{Data: []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"A\"}]}}\n\n")}}},
		{Method: "GET", Status: 405},
	}
	var lines []TimedLine
	resps := map[int]HTTPResponse{}
	for i, x := range xs {
		lines = append(lines, ExchangeLines(i+1, time.Duration(i)*time.Second, x)...)
		resps[i+1] = HTTPResponse{Method: x.Method, Status: x.Status, Header: x.ResponseHeaders}
	}
	return &Plan{Server: "web", Cwd: []string{"/rec/w", "/sb/w"}, Lines: SortLines(lines)}, resps
}

func post(t *testing.T, u, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestHTTPStandIn: a Streamable HTTP server's requests are answered as
// the recorded exchanges were, with the live ids; a call the recording
// cannot answer gets an MCP error; requests outside the secret get 404;
// the log says what was served.
func TestHTTPStandIn(t *testing.T) {
	p, resps := recordedHTTP()
	logPath := filepath.Join(t.TempDir(), "log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	h, err := StartHTTP(HTTPOptions{Plan: p, Responses: resps, Log: log, Secret: "s3cr3t"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	u := h.URL("http://recorded.example:8080/mcp?tenant=a")
	if pu, _ := url.Parse(u); pu.Path != "/s3cr3t/mcp" || pu.RawQuery != "tenant=a" || pu.Hostname() != "127.0.0.1" {
		t.Fatalf("URL %s; want the recorded path and query on the stand-in, under the secret", u)
	}

	resp, body := post(t, u, `{"jsonrpc":"2.0","id":"x","method":"initialize","params":{"clientInfo":{}}}`)
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") != "sess-1" || resp.Header.Get("Content-Type") != "application/json" ||
		!strings.Contains(body, `"id":"x"`) || !strings.Contains(body, `"serverInfo"`) {
		t.Errorf("initialize: %d %v %s; want the recorded answer in JSON with the live id and the session id", resp.StatusCode, resp.Header, body)
	}
	if resp, _ := post(t, u, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != 202 {
		t.Errorf("a notification got %d, want 202", resp.StatusCode)
	}
	resp, body = post(t, u, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lookup","arguments":{"path":"/sb/w/a"}}}`)
	if resp.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(body, "notifications/progress") || !strings.Contains(body, `"id":7`) || !strings.Contains(body, `"text":"A"`) {
		t.Errorf("tools/call: %v %q; want an event stream with the recorded answer, path normalized", resp.Header, body)
	}
	_, body = post(t, u, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"lookup","arguments":{"path":"/sb/w/b"}}}`)
	if !strings.Contains(body, `no recorded answer for tools/call lookup {\"path\":\"/sb/w/b\"} of MCP server web`) {
		t.Errorf("an unrecorded call got %s; want an MCP error naming it", body)
	}
	get, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	get.Body.Close()
	if get.StatusCode != 405 {
		t.Errorf("GET got %d, want the recorded 405", get.StatusCode)
	}
	outside := strings.Replace(u, "/s3cr3t", "", 1)
	if resp, _ := post(t, outside, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); resp.StatusCode != 404 {
		t.Errorf("a request outside the secret got %d, want 404", resp.StatusCode)
	}
	h.Close()
	r, err := Read(p, logPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Unrequested) != 0 || len(r.Unanswered) != 1 || !strings.Contains(r.Unanswered[0], "/sb/w/b") {
		t.Errorf("report %+v; want the one call unanswered, none unrequested", r)
	}
}

// TestHTTPStandInFaults: an injected hang never answers, a crash drops
// the connection, an error answers a tool error.
func TestHTTPStandInFaults(t *testing.T) {
	p, resps := recordedHTTP()
	p.Faults = []Fault{{Call: 1, Kind: "hang"}, {Call: 2, Kind: "crash"}, {Call: 3, Kind: "error"}}
	h, err := StartHTTP(HTTPOptions{Plan: p, Responses: resps})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	u := h.URL("http://x/mcp")
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lookup","arguments":{"path":"/sb/w/a"}}}`
	client := &http.Client{Timeout: 300 * time.Millisecond}
	if _, err := client.Post(u, "application/json", strings.NewReader(call)); err == nil || !strings.Contains(err.Error(), "Timeout") {
		t.Errorf("a hung call: %v; want no answer (the client's timeout)", err)
	}
	if _, err := http.Post(u, "application/json", strings.NewReader(call)); err == nil || !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "EOF") {
		t.Errorf("a crashed call: %v; want the connection dropped", err)
	}
	if _, body := post(t, u, call); !strings.Contains(body, `"isError":true`) {
		t.Errorf("an erring call got %s; want a tool error", body)
	}
}

// TestHTTPStandInSSE: an HTTP+SSE server's stream names the stand-in's
// endpoint first, and carries the answers to what is posted there.
func TestHTTPStandInSSE(t *testing.T) {
	p, _ := recordedHTTP()
	h, err := StartHTTP(HTTPOptions{Plan: p, Transport: TransportSSE, Secret: "s3cr3t"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	u := h.URL("http://x/sse")
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	readEvent := func() string {
		var ev bytes.Buffer
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the stream: %v", err)
			}
			if line == "\n" {
				return ev.String()
			}
			ev.WriteString(line)
		}
	}
	first := readEvent()
	endpoint, ok := strings.CutPrefix(strings.SplitN(first, "\n", 3)[1], "data: ")
	if !strings.HasPrefix(first, "event: endpoint\n") || !ok || !strings.HasPrefix(endpoint, "/s3cr3t/") {
		t.Fatalf("first event %q; want the endpoint under the secret", first)
	}
	base, _ := url.Parse(u)
	ref, _ := url.Parse(endpoint)
	r, body := post(t, base.ResolveReference(ref).String(), `{"jsonrpc":"2.0","id":5,"method":"initialize"}`)
	if r.StatusCode != 202 || body != "" {
		t.Errorf("POST got %d %q, want 202 and the answer on the stream", r.StatusCode, body)
	}
	if ev := readEvent(); !strings.Contains(ev, `"id":5`) || !strings.Contains(ev, "serverInfo") {
		t.Errorf("the stream carried %q; want the answer to initialize", ev)
	}
}

// TestHTTPStandInLive: with the real server's URL, requests go to it,
// its answers to the agent, and an answer that differs from the
// recorded one is noted.
func TestHTTPStandInLive(t *testing.T) {
	p, resps := recordedHTTP()
	real := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), "tools/call") {
			w.WriteHeader(202)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"B"}]}}`)
	}))
	defer real.Close()
	logPath := filepath.Join(t.TempDir(), "log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	h, err := StartHTTP(HTTPOptions{Plan: p, Responses: resps, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.SetLive(real.URL + "/mcp")
	_, body := post(t, h.URL(real.URL+"/mcp"), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lookup","arguments":{"path":"/sb/w/a"}}}`)
	if !strings.Contains(body, `"text":"B"`) {
		t.Errorf("the agent got %s; want the real server's answer", body)
	}
	h.Close()
	r, err := Read(p, logPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Drift) != 1 || !strings.Contains(r.Drift[0], `$.result.content[0].text: recorded "A", live "B"`) {
		t.Errorf("drift %q; want the changed text", r.Drift)
	}
}

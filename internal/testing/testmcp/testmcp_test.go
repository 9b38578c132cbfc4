package testmcp

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestStdio(t *testing.T) {
	var log bytes.Buffer
	s := New(Options{Log: &log, Answers: map[string]string{"answer": "42"}})
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"lookup","arguments":{"topic":"answer"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"lookup","arguments":{"topic":"nope"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"resources/list"}`,
		`not json`,
		`{"jsonrpc":"2.0","id":6,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if err := s.ServeStdio(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for i, want := range []string{
		`"protocolVersion":"2025-06-18"`,
		`"name":"lookup"`,
		`{"content":[{"text":"42","type":"text"}],"isError":false}`,
		`"isError":true`,
		`"code":-32601`,
		`"code":-32700`,
		`"supportedVersions":["2026-07-28","2025-06-18"]`,
	} {
		if i >= len(lines) || !strings.Contains(lines[i], want) {
			t.Errorf("answer %d: %q lacks %s\nall: %s", i+1, lines[min(i, len(lines)-1)], want, out.String())
		}
	}
	if n := strings.Count(log.String(), "\n"); n != 8 || !strings.Contains(log.String(), `"method":"tools/call"`) || !strings.Contains(log.String(), `"junk":"not json"`) {
		t.Errorf("the log has %d lines, want 8, the call and the junk:\n%s", n, log.String())
	}
}

func TestHTTP(t *testing.T) {
	srv := httptest.NewServer(New(Options{}))
	defer srv.Close()
	post := func(body string) *http.Response {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("initialize: %s, session %q, type %q", resp.Status, resp.Header.Get("Mcp-Session-Id"), resp.Header.Get("Content-Type"))
	}
	if resp := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Errorf("a notification: %s, want 202", resp.Status)
	}
	resp, err := http.Get(srv.URL)
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %v %v, want 405", resp, err)
	}
}

func TestMainFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"--answer", "bad"}, strings.NewReader(""), &out, &errb); code != 2 || !strings.Contains(errb.String(), `--answer "bad": want KEY=VALUE`) {
		t.Errorf("--answer bad: exit %d, stderr %q", code, errb.String())
	}
	out.Reset()
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup","arguments":{"topic":"answer"}}}` + "\n"
	if code := Main([]string{"--answer", "answer=43"}, strings.NewReader(in), &out, &errb); code != 0 || !strings.Contains(out.String(), `"text":"43"`) {
		t.Errorf("--answer answer=43: exit %d, stdout %q", code, out.String())
	}
}

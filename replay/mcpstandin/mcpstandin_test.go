package mcpstandin

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acptap/acptap/lane"
)

func plan() *Plan {
	in := func(s string) PlanLine { return PlanLine{Dir: lane.ToServer, Line: s} }
	out := func(s string) PlanLine { return PlanLine{Dir: lane.FromServer, Line: s} }
	return &Plan{Server: "notes", Cwd: []string{"/rec/w", "/sb/w"}, Lines: []PlanLine{
		in(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"agent","version":"1"}}}`),
		out(`{"jsonrpc":"2.0","id":1,"result":{"serverInfo":{"name":"notes"}}}`),
		in(`{"jsonrpc":"2.0","method":"notifications/initialized"}`),
		in(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`),
		out(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"lookup"}]}}`),
		out(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"listed"}}`),
		in(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"lookup","arguments":{"path":"/rec/w/a.txt"}}}`),
		{Dir: lane.ServerStderr, Line: "looking up"},
		out(`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"A"}]}}`),
		in(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"lookup","arguments":{"path":"/rec/w/b.txt"}}}`),
		out(`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"B"}]}}`),
	}}
}

// TestServe: answers by method and, for a tool call, by its arguments
// normalized, with the live ids, the notifications after them; a call the
// recording cannot answer gets an error; the log says what was served.
func TestServe(t *testing.T) {
	p := plan()
	var log bytes.Buffer
	s := newServer(p, &log)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"clientInfo":{"name":"other","version":"2"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"b","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"lookup","arguments":{"path":"/sb/w/b.txt"}}}`,
		`{"jsonrpc":"2.0","id":"d","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"lookup","arguments":{"path":"/sb/w/c.txt"}}}`,
		`not json`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if err := s.serve(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		`"id":"a","jsonrpc":"2.0","result":{"serverInfo"`,
		`"id":"b","jsonrpc":"2.0","result":{"tools"`,
		`"method":"notifications/message"`,
		`"id":"c","jsonrpc":"2.0","result":{"content":[{"type":"text","text":"B"}]}`,
		`"id":"d","jsonrpc":"2.0","result":{"tools"`,
		`"method":"notifications/message"`,
		`"error":{"code":-32603,"message":"acptap replay: no recorded answer for tools/call lookup {\"path\":\"/sb/w/c.txt\"} of MCP server notes"},"id":"e"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines answered, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("answer %d: %s\nwant it to hold %s", i+1, lines[i], w)
		}
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "log")
	if err := os.WriteFile(logPath, append(log.Bytes(), `{"served":`...), 0o600); err != nil { // a line cut by a kill
		t.Fatal(err)
	}
	r, err := Read(p, logPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Unanswered, "|"); got != `tools/call lookup {"path":"/sb/w/c.txt"}` {
		t.Errorf("unanswered %q", got)
	}
	if got := strings.Join(r.Unrequested, "|"); got != `tools/call lookup {"path":"/rec/w/a.txt"}` {
		t.Errorf("unrequested %q, want the call of a.txt (a listing asked less is none)", got)
	}
	if r, err := Read(p, filepath.Join(dir, "none")); err != nil || len(r.Unrequested) != 2 {
		t.Errorf("no log: %v, %q; want both calls unrequested", err, r.Unrequested)
	}
}

func TestMainErrors(t *testing.T) {
	var stderr bytes.Buffer
	if code := Main([]string{"one"}, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "usage: acptap __mcp-standin PLAN LOG") {
		t.Errorf("one argument: exit %d, %q", code, stderr.String())
	}
	stderr.Reset()
	if code := Main([]string{"/nonexistent/plan", "/nonexistent/log"}, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "the plan /nonexistent/plan") {
		t.Errorf("no plan: exit %d, %q", code, stderr.String())
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "plan.json")
	if err := WritePlan(p, plan()); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := Main([]string{p, filepath.Join(dir, "log")}, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`+"\n"), &out, &stderr); code != 0 || !strings.Contains(out.String(), `"id":9`) {
		t.Errorf("a plan: exit %d, %q", code, out.String())
	}
}

// TestLive: with the server's command, the stand-in passes the real
// server's answers on and logs each that differs from the recorded one.
func TestLive(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "plan.json")
	if err := WritePlan(p, plan()); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "log")
	// A server that answers every request with text "C": /bin/sh reading
	// lines and echoing a canned answer with the request's id.
	script := `while IFS= read -r line; do id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9"a-z]*\).*/\1/p'); [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"C"}]}}\n' "$id"; done`
	in := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lookup","arguments":{"path":"/sb/w/a.txt"}}}` + "\n"
	var out, stderr bytes.Buffer
	if code := Main([]string{p, logPath, "--", "/bin/sh", "-c", script}, strings.NewReader(in), &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(out.String(), `"text":"C"`) || !strings.Contains(out.String(), `"id":7`) {
		t.Errorf("the agent got %q, want the live answer", out.String())
	}
	r, err := Read(plan(), logPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Drift) != 1 || !strings.Contains(r.Drift[0], `tools/call lookup {"path":"/rec/w/a.txt"}: the answer differs from the recording at $.result.content[0].text: recorded "A", live "C"`) {
		t.Errorf("drift %q", r.Drift)
	}
}

// TestMainStillborn: a server recorded as never starting (a line on
// stderr, nothing else) is stood in for by one that does not start
// either, saying what it said.
func TestMainStillborn(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "plan.json")
	if err := WritePlan(p, &Plan{Server: "ghost", Lines: []PlanLine{{Dir: lane.ServerStderr, Line: "acptap: MCP server no-such: not found"}}}); err != nil {
		t.Fatal(err)
	}
	var out, stderr bytes.Buffer
	code := Main([]string{p, filepath.Join(dir, "log")}, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize"}`+"\n"), &out, &stderr)
	if code != 127 || out.Len() != 0 || stderr.String() != "acptap: MCP server no-such: not found\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 127, nothing, the recorded line", code, out.String(), stderr.String())
	}
}

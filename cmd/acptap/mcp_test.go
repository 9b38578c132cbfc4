package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/testing/testmcp"
)

// mcpServers returns the mcpServers of session/new for a stdio test MCP
// server named notes, logging to dir/notes.log, and an HTTP one named
// web, logging to dir/web.log; and the HTTP server, to close.
func mcpServers(t *testing.T, dir string) (string, *httptest.Server) {
	t.Helper()
	webLog, err := os.Create(filepath.Join(dir, "web.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { webLog.Close() })
	web := httptest.NewServer(testmcp.New(testmcp.Options{Name: "web", Log: webLog, Answers: map[string]string{"answer": "forty-two"}}))
	t.Cleanup(web.Close)
	servers := []map[string]any{
		{"name": "notes", "command": "testmcp", "args": []string{"--log", filepath.Join(dir, "notes.log"), "--name", "notes"},
			"env": []map[string]string{{"name": "NOTES_TOKEN", "value": "tok-0123456789abcdef"}}},
		{"type": "http", "name": "web", "url": web.URL + "/mcp", "headers": []map[string]string{{"name": "Authorization", "value": "Bearer web-secret-0123456789"}}},
	}
	b, _ := json.Marshal(servers)
	return string(b), web
}

// TestMCPClient: the test agent connects to the MCP servers of
// session/new, a stdio one it starts and an HTTP one, and calls their
// lookup tool in each turn, with and without acptap record between the
// editor and the agent.
func TestMCPClient(t *testing.T) {
	dir := workspace(t)
	servers, _ := mcpServers(t, dir)
	agent := []string{"testagent", "--mcp-call", `lookup={"topic":"answer"}`}
	for _, via := range []string{"direct", "record"} {
		args := []string{"--prompt", "look it up", "--prompt", "again", "--mcp-servers", servers, "--"}
		if via == "record" {
			args = append(args, "acptap", "record", "--store", filepath.Join(dir, "s.db"), "--name", "mcp", "--")
		}
		out, err := runEditor(dir, append(args, agent...)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", via, err, out)
		}
		if got, want := strings.Count(string(out), "mcp notes lookup: 42; mcp web lookup: forty-two"), 2; got != want {
			t.Errorf("%s: the answers name the lookups %d times, want %d:\n%s", via, got, want, out)
		}
	}
	for _, server := range []string{"notes", "web"} {
		b, err := os.ReadFile(filepath.Join(dir, server+".log"))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Count(string(b), `"method":"tools/call"`), 4; got != want {
			t.Errorf("the %s server logged %d tools/call, want %d (2 turns, 2 runs):\n%s", server, got, want, b)
		}
	}
}

// TestMCPSecretsMasked: the tokens an editor puts in an MCP server's env
// and headers in session/new are masked in the recording, and reach the
// agent as they were.
func TestMCPSecretsMasked(t *testing.T) {
	dir := workspace(t)
	servers, _ := mcpServers(t, dir)
	db := filepath.Join(dir, "s.db")
	out, err := runEditor(dir, "--prompt", "look it up", "--mcp-servers", servers, "--",
		"acptap", "record", "--store", db, "--name", "mcp", "--", "testagent", "--mcp-call", `lookup={"topic":"answer"}`)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "mcp web lookup: forty-two") {
		t.Errorf("the agent did not reach the web server with its header:\n%s", out)
	}
	shown, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "--json", "mcp")
	for _, secret := range []string{"tok-0123456789abcdef", "web-secret-0123456789"} {
		if strings.Contains(shown, secret) {
			t.Errorf("the recording holds %s", secret)
		}
	}
	if !strings.Contains(shown, "NOTES_TOKEN") {
		t.Errorf("the recording lost the env's names:\n%s", shown)
	}
}

// TestMCPRecorded records a session whose agent starts a stdio MCP
// server from session/new and calls its tool in each turn: the server's
// stdio is recorded as lanes of its own, on the one timeline, each line
// as the server got it and wrote it, a request before its answer and both
// within the turn that made them; the recorded session/new is the
// editor's; the relay's directory is gone once recording ends.
func TestMCPRecorded(t *testing.T) {
	dir := workspace(t)
	tmp := t.TempDir()
	db := filepath.Join(dir, "s.db")
	servers := `[{"name":"notes","command":"testmcp","args":["--log",` + strconv.Quote(filepath.Join(dir, "notes.log")) + `],"env":[]}]`
	cmd := exec.Command("testeditor", "--prompt", "look it up", "--prompt", "again", "--mcp-servers", servers, "--",
		"acptap", "record", "--store", db, "--name", "mcp", "--", "testagent", "--mcp-call", `lookup={"topic":"answer"}`)
	cmd.Dir = dir
	cmd.Env = append(agentEnv(), "TMPDIR="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil || strings.Count(string(out), "mcp notes lookup: 42") != 2 {
		t.Fatalf("recording: %v\n%s", err, out)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "acptap-mcp-*")); len(left) != 0 {
		t.Errorf("left behind: %q", left)
	}
	events := showJSON(t, db, "mcp")
	var in, out []showEvent
	var prompt, answer []uint64 // the editor's prompts and the agent's answers
	for _, e := range events {
		switch {
		case e.Lane == "mcp" && e.Server != "notes":
			t.Errorf("an MCP line of server %q, want notes", e.Server)
		case e.Lane == "mcp" && e.Dir == "in":
			in = append(in, e)
		case e.Lane == "mcp" && e.Dir == "out":
			out = append(out, e)
		case e.Lane == "editor" && e.Method == "session/prompt":
			prompt = append(prompt, e.Seq)
		case e.Lane == "agent" && strings.Contains(*e.Raw, `"stopReason"`):
			answer = append(answer, e.Seq)
		case e.Lane == "editor" && e.Method == "session/new" && strings.Contains(*e.Raw, "__mcp-relay"):
			t.Errorf("the recorded session/new is the relay's, not the editor's: %s", *e.Raw)
		}
	}
	// initialize, initialized, tools/list, and a tools/call per turn.
	if len(in) != 5 || len(out) != 4 || len(prompt) != 2 || len(answer) != 2 {
		t.Fatalf("%d lines to the server, %d from it, %d prompts, %d answers; want 5, 4, 2, 2", len(in), len(out), len(prompt), len(answer))
	}
	// What the server wrote is what it answers to what it got, byte for
	// byte, each answer after its request.
	server := testmcp.New(testmcp.Options{})
	k := 0
	for _, req := range in {
		want := server.Handle([]byte(*req.Raw))
		if want == nil {
			continue
		}
		if got := *out[k].Raw; got != string(want) || out[k].Seq < req.Seq {
			t.Errorf("answer %d: seq %d %s, want after seq %d: %s", k+1, out[k].Seq, got, req.Seq, want)
		}
		k++
	}
	for turn, call := range []showEvent{in[3], in[4]} {
		if call.Method != "tools/call" || call.Seq < prompt[turn] || out[2+turn].Seq > answer[turn] {
			t.Errorf("turn %d: the tools/call (seq %d, %s) and its answer (seq %d) are not between the prompt (seq %d) and the answer (seq %d)",
				turn+1, call.Seq, call.Method, out[2+turn].Seq, prompt[turn], answer[turn])
		}
	}
	if out, errOut, code := runAcptap(t, dir, agentEnv(), "check", "--store", db); code != 0 {
		t.Errorf("acptap check of a recording with MCP lanes: exit %d\n%s%s", code, out, errOut)
	}
	list, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "--json")
	if !strings.Contains(list, `"mcp_servers":[{"name":"notes","argv":["testmcp","--log",`) {
		t.Errorf("the recording does not list its MCP server:\n%s", list)
	}
	shown, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "mcp")
	for _, want := range []string{"mcp     s1   notes → request  tools/call id=", `lookup {"topic":"answer"} → "42"`, `notes ← result   id=`} {
		if !strings.Contains(shown, want) {
			t.Errorf("show lacks %q:\n%s", want, shown)
		}
	}
}

// TestMCPServerMissing: a stdio MCP server whose command does not exist
// fails as it would without acptap: the agent reports it, the relay's
// error line is recorded on the server's stderr lane, and nothing hangs.
func TestMCPServerMissing(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	// A port nothing listens on: taken, then given up.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	servers := `[{"name":"ghost","command":"no-such-mcp-server","args":[],"env":[]},{"type":"http","name":"gone","url":"` + down + `","headers":[]}]`
	out, err := runEditor(dir, "--prompt", "look it up", "--mcp-servers", servers, "--",
		"acptap", "record", "--store", db, "--name", "ghost", "--", "testagent", "--mcp-call", `lookup={"topic":"answer"}`)
	if err != nil || !strings.Contains(string(out), "mcp server ghost:") || !strings.Contains(string(out), "mcp server gone: initialize: 502 Bad Gateway") {
		t.Fatalf("recording: %v\n%s", err, out)
	}
	stderrLine, failed := false, false
	for _, e := range showJSON(t, db, "ghost") {
		if e.Lane == "mcp" && e.Dir == "stderr" && strings.Contains(*e.Raw, "no-such-mcp-server") {
			stderrLine = true
		}
		if e.Class == "mcp" && e.Server == "gone" && e.Status == 0 && strings.Contains(e.Error, "connection refused") {
			failed = true
		}
	}
	if !stderrLine {
		t.Error("the relay's error is not on the server's stderr lane")
	}
	if !failed {
		t.Error("the HTTP server's failed exchange is not recorded with its error")
	}
	for i := range 3 {
		if out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "ghost"); code != 0 {
			t.Fatalf("replay #%d: exit %d; want the agent's errors replayed as they were\n%s%s", i, code, out, errOut)
		}
	}
}

// TestMCPReplay records a session whose agent calls the tool of a stdio
// MCP server and of an HTTP one in each turn, then replays it 5 times (20
// in scripts/test-full)
// with the stdio server's program gone and the HTTP server's port
// closed: each replay is green, served from the recording, and neither
// server logs a call. A changed call is reported, the call the recording
// has no answer for and the recorded one never made; --live-mcp runs the
// real servers again, and names the server, the call and the field of an
// answer that changed.
func TestMCPReplay(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	// The stdio server is a program of its own directory in PATH, which
	// the replays go without.
	bin := t.TempDir()
	log := filepath.Join(dir, "notes.log")
	server := filepath.Join(bin, "notes-server")
	script := "#!/bin/sh\nexec testmcp --log " + strconv.Quote(log) + " \"$@\"\n"
	if err := os.WriteFile(server, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env := agentEnv()
	for i, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			env[i] = "PATH=" + bin + ":" + strings.TrimPrefix(kv, "PATH=")
		}
	}
	// The HTTP server listens on a port it gives up for the replays and
	// takes again for --live-mcp, answering as told.
	webLog := filepath.Join(dir, "web.log")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	serveWeb := func(ln net.Listener, answers map[string]string) *http.Server {
		f, err := os.OpenFile(webLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		srv := &http.Server{Handler: testmcp.New(testmcp.Options{Name: "web", Log: f, Answers: answers})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return srv
	}
	web := serveWeb(ln, map[string]string{"answer": "forty-two"})
	servers := `[{"name":"notes","command":"notes-server","args":[],"env":[]},` +
		`{"type":"http","name":"web","url":"http://` + addr + `/mcp","headers":[{"name":"Authorization","value":"Bearer web-secret-0123456789"}]}]`
	rec := exec.Command("testeditor", "--prompt", "look it up", "--prompt", "again", "--mcp-servers", servers, "--",
		"acptap", "record", "--store", db, "--name", "mcp", "--", "testagent", "--mcp-call", `lookup={"topic":"answer"}`)
	rec.Dir, rec.Env = dir, env
	if out, err := rec.CombinedOutput(); err != nil || strings.Count(string(out), "mcp notes lookup: 42; mcp web lookup: forty-two") != 2 {
		t.Fatalf("recording: %v\n%s", err, out)
	}
	web.Close()
	calls := func(log string) int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), `"method":"tools/call"`)
	}
	shown, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "mcp")
	if !strings.Contains(shown, "web") || strings.Contains(shown, "web-secret-0123456789") {
		t.Errorf("show lists the HTTP server's exchanges by its name, its header masked:\n%s", shown)
	}
	for i := range repeats(t) {
		out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "mcp")
		if code != 0 {
			t.Fatalf("replay #%d with the MCP servers gone: exit %d\n%s%s", i, code, out, errOut)
		}
	}
	if n := calls(log); n != 2 {
		t.Errorf("the stdio server logged %d tools/call, want the 2 recorded: the replays called it", n)
	}
	if n := calls(webLog); n != 2 {
		t.Errorf("the HTTP server logged %d tools/call, want the 2 recorded: the replays called it", n)
	}

	out2, _, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "mcp", "--", "testagent", "--mcp-call", `lookup={"topic":"weather"}`)
	for _, name := range []string{"notes", "web"} {
		if code != ExitDiverged || !strings.Contains(out2, `MCP server `+name+`: the agent asked tools/call lookup {"topic":"weather"}, which the recording has no answer for`) ||
			!strings.Contains(out2, `MCP server `+name+`: the recorded tools/call lookup {"topic":"answer"} was never asked`) {
			t.Errorf("replay with another call: exit %d, want %d and both MCP divergences of %s:\n%s", code, ExitDiverged, name, out2)
		}
	}

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("taking the HTTP server's port again: %v", err)
	}
	web = serveWeb(ln, map[string]string{"answer": "forty-two"})
	if out, errOut, code := runAcptap(t, t.TempDir(), env, "replay", "--store", db, "--live-mcp", "mcp"); code != 0 {
		t.Errorf("replay --live-mcp: exit %d\n%s%s", code, out, errOut)
	}
	if n, m := calls(log), calls(webLog); n != 4 || m != 4 {
		t.Errorf("after --live-mcp the servers logged %d and %d tools/call, want 4 each", n, m)
	}

	// The servers now answer otherwise: --live-mcp names the server, the
	// call and the field.
	changed := "#!/bin/sh\nexec testmcp --answer answer=43 --log " + strconv.Quote(log) + " \"$@\"\n"
	if err := os.WriteFile(server, []byte(changed), 0o755); err != nil {
		t.Fatal(err)
	}
	web.Close()
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("taking the HTTP server's port again: %v", err)
	}
	serveWeb(ln, map[string]string{"answer": "forty-three"})
	out3, _, code := runAcptap(t, t.TempDir(), env, "replay", "--store", db, "--live-mcp", "mcp")
	for _, want := range []string{
		`MCP server notes: tools/call lookup {"topic":"answer"}: the answer differs from the recording at $.result.content[0].text: recorded "42", live "43"`,
		`MCP server web: tools/call lookup {"topic":"answer"}: the answer differs from the recording at $.result.content[0].text: recorded "forty-two", live "forty-three"`,
	} {
		if code != ExitDiverged || !strings.Contains(out3, want) {
			t.Errorf("replay --live-mcp of a changed server: exit %d, want %d and\n%s\ngot:\n%s", code, ExitDiverged, want, out3)
		}
	}
}

// TestMCPBadServers: a server that prints a line that is not JSON-RPC,
// one whose tool answers 20 MB, and one that crashes mid-call are each
// recorded with nothing lost and replayed green, served from the
// recording; nothing hangs.
func TestMCPBadServers(t *testing.T) {
	for _, tc := range []struct {
		name, call string
		args       []string
		said       string // in the agent's answers
	}{
		{"junk", `lookup={"topic":"answer"}`, []string{"--junk"}, "mcp notes lookup: 42"},
		{"big", `big={}`, []string{"--big", strconv.Itoa(20 << 20)}, "(20971520 bytes)"},
		{"crash", `lookup={"topic":"answer"}`, []string{"--crash-on", "lookup"}, "mcp notes lookup: error: tools/call: the server's output ended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := workspace(t)
			db := filepath.Join(dir, "s.db")
			argv, _ := json.Marshal(tc.args)
			servers := `[{"name":"notes","command":"testmcp","args":` + string(argv) + `,"env":[]}]`
			out, err := runEditor(dir, "--prompt", "look it up", "--mcp-servers", servers, "--",
				"acptap", "record", "--store", db, "--name", "bad", "--", "testagent", "--mcp-call", tc.call)
			if err != nil || !strings.Contains(string(out), tc.said) {
				t.Fatalf("recording: %v\n%s", err, out)
			}
			var bytesOut int
			for _, e := range showJSON(t, db, "bad") {
				if e.Lane == "mcp" && e.Dir == "out" {
					bytesOut += len(e.bytes(t))
				}
			}
			if tc.name == "big" && bytesOut < 20<<20 {
				t.Errorf("the recording holds %d bytes of the server's output, want the 20 MB answer", bytesOut)
			}
			replays := 3
			if tc.name == "big" {
				replays = 1 // 20 MB through the stand-in takes seconds under -race
			}
			for i := range replays {
				if out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "bad"); code != 0 {
					t.Fatalf("replay #%d: exit %d\n%s%s", i, code, out, errOut)
				}
			}
		})
	}
}

// TestMCPUpdate: replay --update after an intended change of the agent
// rewrites the agent's lane and leaves the MCP server's lines as recorded;
// the updated recording replays green, served from them.
func TestMCPUpdate(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	servers := `[{"name":"notes","command":"testmcp","args":[],"env":[]}]`
	agent := []string{"testagent", "--mcp-call", `lookup={"topic":"answer"}`}
	out, err := runEditor(dir, append([]string{"--prompt", "look it up", "--mcp-servers", servers, "--",
		"acptap", "record", "--store", db, "--name", "mcp", "--"}, agent...)...)
	if err != nil {
		t.Fatalf("recording: %v\n%s", err, out)
	}
	mcpLines := func() []string {
		var lines []string
		for _, e := range showJSON(t, db, "mcp") {
			if e.Lane == "mcp" {
				lines = append(lines, e.Dir+" "+string(e.bytes(t)))
			}
		}
		return lines
	}
	before := mcpLines()
	changed := append(slices.Clone(agent), "--thought", "Let me look it up.")
	if out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), append([]string{"replay", "--store", db, "--update", "mcp", "--"}, changed...)...); code != 0 {
		t.Fatalf("replay --update: exit %d\n%s%s", code, out, errOut)
	}
	if after := mcpLines(); len(before) == 0 || !slices.Equal(after, before) {
		t.Errorf("--update changed the MCP server's lines:\nbefore %q\nafter  %q", before, after)
	}
	if out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), append([]string{"replay", "--store", db, "mcp", "--"}, changed...)...); code != 0 {
		t.Errorf("replay of the updated recording: exit %d\n%s%s", code, out, errOut)
	}
}

// TestMCPFaults: --fault mcp:NAME:N=KIND breaks the N-th tool call of an
// MCP server served from the recording: an error result and a crash
// change what the agent says, a hang trips the replay's timeout; a fault
// of a server the recording lacks, or a malformed one, is refused before
// anything runs.
func TestMCPFaults(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	servers := `[{"name":"notes","command":"testmcp","args":[],"env":[]}]`
	if out, err := runEditor(dir, "--prompt", "look it up", "--prompt", "again", "--mcp-servers", servers, "--",
		"acptap", "record", "--store", db, "--name", "mcp", "--", "testagent", "--mcp-call", `lookup={"topic":"answer"}`); err != nil {
		t.Fatalf("recording: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		fault, want string
	}{
		{"mcp:notes:1=error", "acptap replay: an injected MCP error"},
		{"mcp:notes:2=crash", "the server's output ended"},
		{"mcp:notes:1=hang", "waited"},
	} {
		out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "--timeout", "2s", "--fault", tc.fault, "mcp")
		if code != ExitDiverged || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("--fault %s: exit %d, want %d and %q in the report:\n%s%s", tc.fault, code, ExitDiverged, tc.want, out, errOut)
		}
	}
	for _, tc := range []struct{ fault, want string }{
		{"mcp:ghost:1=error", "--fault mcp:ghost: the recording has no MCP server ghost (it has: notes); name a server as acptap show lists them"},
		{"mcp:notes:0=error", `--fault "mcp:notes:0=error": want mcp:NAME:N=KIND`},
		{"mcp:notes:1=boom", `--fault "mcp:notes:1=boom": want mcp:NAME:N=KIND`},
		{"mcp:notes=error", `--fault "mcp:notes=error": want mcp:NAME:N=KIND`},
	} {
		_, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "--fault", tc.fault, "mcp")
		if code != ExitUsage || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("--fault %s: exit %d, stderr %q; want %d and one line with %q", tc.fault, code, errOut, ExitUsage, tc.want)
		}
	}
}

// mcpLLM is a Chat Completions upstream whose model calls the function
// mcp__notes__lookup when it is offered and no tool result has come yet,
// and then answers with the result.
func mcpLLM(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		last := req.Messages[len(req.Messages)-1]
		offered := slices.ContainsFunc(req.Tools, func(t struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}) bool {
			return t.Function.Name == "mcp__notes__lookup"
		})
		switch {
		case last.Role == "tool":
			send(map[string]any{"content": "The lookup says " + last.Content}, "stop")
		case offered:
			send(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_m1", "type": "function",
				"function": map[string]any{"name": "mcp__notes__lookup", "arguments": `{"topic":"answer"}`}}}}, "tool_calls")
		default:
			send(map[string]any{"content": "No lookup tool."}, "stop")
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestMCPFromTheLLM: in its LLM mode the test agent offers its session's
// MCP tools to the model as functions and calls one when the model asks:
// the LLM call, the MCP call and the next LLM call are recorded in that
// order, and the session replays green with the LLM and the MCP server
// both served from the recording, under --requests fail.
func TestMCPFromTheLLM(t *testing.T) {
	upstream := mcpLLM(t)
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	log := filepath.Join(dir, "notes.log")
	servers := `[{"name":"notes","command":"testmcp","args":["--log",` + strconv.Quote(log) + `],"env":[]}]`
	out, err := runEditor(dir, "--prompt", "What is the answer?", "--mcp-servers", servers, "--",
		"acptap", "record", "--store", db, "--name", "llm-mcp", "--no-proxy-env", "--base-url", "OPENAI_BASE_URL="+upstream.URL+"/v1", "--",
		"testagent")
	if err != nil || !strings.Contains(string(out), "The lookup says 42") {
		t.Fatalf("recording: %v\n%s", err, out)
	}
	var order []string
	for _, e := range showJSON(t, db, "llm-mcp") {
		switch {
		case e.Lane == "llm":
			order = append(order, "llm")
		case e.Lane == "mcp" && e.Method == "tools/call":
			order = append(order, "tools/call")
		}
	}
	if got := strings.Join(order, " "); got != "llm tools/call llm" {
		t.Errorf("the recording's LLM and MCP calls come in the order %q, want llm tools/call llm", got)
	}
	before, _ := os.ReadFile(log)
	for i := range 3 {
		if out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "--requests", "fail", "llm-mcp"); code != 0 {
			t.Fatalf("replay #%d: exit %d\n%s%s", i, code, out, errOut)
		}
	}
	if after, _ := os.ReadFile(log); string(after) != string(before) {
		t.Errorf("the replays asked the MCP server:\n%s", after[len(before):])
	}
}

// TestCalibrateMCP: an agent that puts a per-run token into its MCP
// calls' arguments replays red, its calls having no recorded twin at
// either server, until calibrate has learned the token from the calls
// themselves; then it replays green, and a changed call is still caught.
func TestCalibrateMCP(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	servers, _ := mcpServers(t, dir)
	out, err := runEditor(dir, "--prompt", "look it up", "--prompt", "again", "--mcp-servers", servers, "--",
		"acptap", "record", "--store", db, "--name", "mcp", "--", "testagent", "--noise", "--mcp-call", `lookup={"topic":"answer"}`)
	if err != nil || strings.Count(string(out), "mcp notes lookup: 42; mcp web lookup: forty-two") != 2 {
		t.Fatalf("recording: %v\n%s", err, out)
	}
	out2, _, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "mcp")
	if code != ExitDiverged || !strings.Contains(out2, `MCP server notes: the agent asked tools/call lookup {"run":`) {
		t.Fatalf("uncalibrated replay: exit %d, want %d and the calls unanswered\n%s", code, ExitDiverged, out2)
	}
	out3, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "calibrate", "--store", db, "mcp")
	if code != 0 || !strings.HasPrefix(out3, "CALIBRATED mcp (3 runs)") {
		t.Fatalf("calibrate: exit %d, want 0\n%s%s", code, out3, errOut)
	}
	if shown := showOf(t, db, "mcp"); !strings.Contains(shown, `"path":"$.arguments.run"`) {
		t.Errorf("show lists no rule for the calls' token:\n%s", shown)
	}
	for i := range 5 {
		if out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "--requests", "fail", "mcp"); code != 0 {
			t.Fatalf("calibrated replay %d: exit %d\n%s%s", i+1, code, out, errOut)
		}
	}
	out4, _, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "mcp", "--", "testagent", "--noise", "--mcp-call", `lookup={"topic":"weather"}`)
	if code != ExitDiverged || !strings.Contains(out4, `MCP server web: the agent asked tools/call lookup {"run":`) || !strings.Contains(out4, `"topic":"weather"}, which the recording has no answer for`) {
		t.Errorf("a changed call after calibration: exit %d, want %d and the call missed\n%s", code, ExitDiverged, out4)
	}
}

// TestCalibrateLiveMCP: a real MCP server whose answers name the worker
// that served them, per run, drifts in every replay with --live-mcp
// until calibrate --live-mcp has learned the worker's name from the
// answers; then the live replays are green, and a changed answer is
// still caught.
func TestCalibrateLiveMCP(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	servers := `[{"name":"notes","command":"testmcp","args":["--worker"],"env":[]}]`
	out, err := runEditor(dir, "--prompt", "look it up", "--mcp-servers", servers, "--",
		"acptap", "record", "--store", db, "--name", "mcp", "--", "testagent", "--mcp-call", `lookup={"topic":"answer"}`)
	if err != nil || !strings.Contains(string(out), "mcp notes lookup: 42 (served by worker-") {
		t.Fatalf("recording: %v\n%s", err, out)
	}
	out2, _, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "--live-mcp", "mcp")
	if code != ExitDiverged || !strings.Contains(out2, `MCP server notes: tools/call lookup {"topic":"answer"}: the answer differs from the recording at $.result.content[0].text`) {
		t.Fatalf("uncalibrated live replay: exit %d, want %d and the answer drifted\n%s", code, ExitDiverged, out2)
	}
	out3, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "calibrate", "--store", db, "--live-mcp", "mcp")
	if code != 0 || !strings.Contains(out3, "varies at mcp notes answer 3 $.result.content[0].text") {
		t.Fatalf("calibrate --live-mcp: exit %d, want 0 and a rule of the server's answer\n%s%s", code, out3, errOut)
	}
	for i := range 3 {
		if out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "--live-mcp", "mcp"); code != 0 {
			t.Fatalf("calibrated live replay %d: exit %d\n%s%s", i+1, code, out, errOut)
		}
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "testmcp"), []byte("#!/bin/sh\nexec "+strconv.Quote(lookPath(t, "testmcp"))+" --answer answer=43 \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := agentEnv()
	for i, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			env[i] = "PATH=" + bin + ":" + strings.TrimPrefix(kv, "PATH=")
		}
	}
	out4, _, code := runAcptap(t, t.TempDir(), env, "replay", "--store", db, "--live-mcp", "mcp")
	if code != ExitDiverged || !strings.Contains(out4, `MCP server notes: tools/call lookup {"topic":"answer"}: the answer differs from the recording at $.result.content[0].text: recorded "42 (served by worker-<random>)", live "43 (served by worker-`) {
		t.Errorf("a changed answer after calibration: exit %d, want %d and the answer named\n%s", code, ExitDiverged, out4)
	}
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

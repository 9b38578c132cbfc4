package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
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
	agent := []string{"testagent", "--mcp-call", `lookup={"key":"answer"}`}
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
		"acptap", "record", "--store", db, "--name", "mcp", "--", "testagent", "--mcp-call", `lookup={"key":"answer"}`)
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

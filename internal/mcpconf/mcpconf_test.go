package mcpconf

import (
	"strings"
	"testing"
)

func TestRewrite(t *testing.T) {
	var seen []string
	replace := func(s Server) (Server, bool) {
		seen = append(seen, s.Type+" "+s.Name)
		switch {
		case s.Name == "keep":
			return Server{}, false
		case s.Type == Stdio:
			s.Argv = append([]string{"/bin/relay", s.Name, "--"}, s.Argv...)
		default:
			s.URL = "http://127.0.0.1:9/SECRET/" + s.Name
		}
		return s, true
	}
	line := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[` +
		`{"name":"notes","command":"notes-server","args":["--x","<&>"],"env":[{"name":"T","value":"v"}]},` +
		`{"name":"keep","command":"k","args":[],"env":[]},` +
		`{"type":"http","name":"web","url":"http://h/mcp","headers":[{"name":"Authorization","value":"Bearer t"}]},` +
		`{"type":"sse","name":"old","url":"http://h/sse","headers":[]},` +
		`{"type":"acp","name":"inproc","id":"x"}]}}`
	got := string(Rewrite([]byte(line), replace))
	for _, want := range []string{
		`{"args":["notes","--","notes-server","--x","<&>"],"command":"/bin/relay","env":[{"name":"T","value":"v"}],"name":"notes"}`,
		`{"name":"keep","command":"k","args":[],"env":[]}`,
		`{"headers":[{"name":"Authorization","value":"Bearer t"}],"name":"web","type":"http","url":"http://127.0.0.1:9/SECRET/web"}`,
		`{"headers":[],"name":"old","type":"sse","url":"http://127.0.0.1:9/SECRET/old"}`,
		`{"type":"acp","name":"inproc","id":"x"}`,
		`"method":"session/new"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rewritten line lacks %s:\n%s", want, got)
		}
	}
	if got, want := strings.Join(seen, ","), "stdio notes,stdio keep,http web,sse old"; got != want {
		t.Errorf("replace was given %s; want %s (in order, not the acp server)", got, want)
	}
	for _, same := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"mcpServers":[{"name":"a","command":"x"}]}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"mcpServers":[]}} "command"`,
		`not json "mcpServers" "command"`,
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"keep","command":"k"}]}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"type":"http","name":"nourl"}]}}`,
	} {
		if got := string(Rewrite([]byte(same), replace)); got != same {
			t.Errorf("Rewrite(%s) = %s, want it as it was", same, got)
		}
	}
}

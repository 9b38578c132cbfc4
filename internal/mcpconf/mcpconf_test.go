package mcpconf

import (
	"strings"
	"testing"
)

func TestRewrite(t *testing.T) {
	replace := func(name string, argv []string) ([]string, bool) {
		if name == "keep" {
			return nil, false
		}
		return append([]string{"/bin/relay", name, "--"}, argv...), true
	}
	line := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[` +
		`{"name":"notes","command":"notes-server","args":["--x","<&>"],"env":[{"name":"T","value":"v"}]},` +
		`{"name":"keep","command":"k","args":[],"env":[]},` +
		`{"type":"http","name":"web","url":"http://h/mcp","headers":[]}]}}`
	got := string(Rewrite([]byte(line), replace))
	for _, want := range []string{
		`{"args":["notes","--","notes-server","--x","<&>"],"command":"/bin/relay","env":[{"name":"T","value":"v"}],"name":"notes"}`,
		`{"name":"keep","command":"k","args":[],"env":[]}`,
		`{"type":"http","name":"web","url":"http://h/mcp","headers":[]}`,
		`"method":"session/new"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rewritten line lacks %s:\n%s", want, got)
		}
	}
	for _, same := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"mcpServers":[{"name":"a","command":"x"}]}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"mcpServers":[]}} "command"`,
		`not json "mcpServers" "command"`,
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"keep","command":"k"}]}}`,
	} {
		if got := string(Rewrite([]byte(same), replace)); got != same {
			t.Errorf("Rewrite(%s) = %s, want it as it was", same, got)
		}
	}
}

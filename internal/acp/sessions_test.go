package acp

import (
	"fmt"
	"testing"
)

// TestSessions reads a connection with two sessions whose session/new
// answers come out of order and whose turns are in flight together.
func TestSessions(t *testing.T) {
	var s Sessions
	frames := []struct {
		editor bool
		line   string
		want   string // "id #n", or "" for no session
		prompt string // Prompting after the frame
	}{
		{true, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`, "", ""},
		{false, `{"jsonrpc":"2.0","id":0,"result":{}}`, "", ""},
		{true, `{"jsonrpc":"2.0","id":"a","method":"session/new","params":{"cwd":"/w"}}`, "", ""},
		{true, `{"jsonrpc":"2.0","id":"b","method":"session/new","params":{"cwd":"/w"}}`, "", ""},
		{false, `{"jsonrpc":"2.0","id":"b","result":{"sessionId":"s-b"}}`, "s-b #1", ""},
		{false, `{"jsonrpc":"2.0","id":"a","result":{"sessionId":"s-a"}}`, "s-a #2", ""},
		{true, `{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"s-a","prompt":[]}}`, "s-a #2", "s-a #2"},
		{false, `{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s-a"}}`, "s-a #2", "s-a #2"},
		{true, `{"jsonrpc":"2.0","id":"q","method":"session/prompt","params":{"sessionId":"s-b","prompt":[]}}`, "s-b #1", ""},
		{true, `{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"cancelled"}}}`, "s-a #2", ""},
		{false, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-b","update":{}}}`, "s-b #1", ""},
		{false, `{"jsonrpc":"2.0","id":"p","result":{"stopReason":"end_turn"}}`, "s-a #2", "s-b #1"},
		{false, `{"jsonrpc":"2.0","id":"q","error":{"code":-32800,"message":"cancelled"}}`, "s-b #1", ""},
		{false, `not JSON`, "", ""},
	}
	for i, f := range frames {
		id, n := s.Of(f.editor, Parse([]byte(f.line)))
		got := ""
		if id != "" {
			got = fmt.Sprintf("%s #%d", id, n)
		}
		if got != f.want {
			t.Errorf("frame %d %s: session %q, want %q", i+1, f.line, got, f.want)
		}
		id, n = s.Prompting()
		got = ""
		if id != "" {
			got = fmt.Sprintf("%s #%d", id, n)
		}
		if got != f.prompt {
			t.Errorf("after frame %d: prompting %q, want %q", i+1, got, f.prompt)
		}
	}
}

package acp

import (
	"encoding/json"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		line   string
		kind   Kind
		method string
		id     string
		update string
	}{
		{`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`, Request, "initialize", "0", ""},
		{`{"jsonrpc":"2.0","id":"7f1c","method":"session/request_permission","params":{}}`, Request, "session/request_permission", `"7f1c"`, ""},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`, Notification, "session/update", "", "agent_message_chunk"},
		{`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`, Notification, "session/cancel", "", ""},
		{`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`, Response, "", "3", ""},
		{`{"jsonrpc":"2.0","id":3,"result":null}`, Response, "", "3", ""},
		{`{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"nope"}}`, Error, "", "4", ""},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`, Error, "", "", ""},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r", Response, "", "1", ""},
		{`Starting agent v1.2...`, Junk, "", "", ""},
		{``, Junk, "", "", ""},
		{`[1,2]`, Junk, "", "", ""},
		{`{"hello":"world"}`, Junk, "", "", ""},
		{`{"id":1,"method":`, Junk, "", "", ""},
		{"{\"id\":1,\"result\":\"\xff\"}", Junk, "", "", ""},
	}
	for _, tt := range tests {
		m := Parse([]byte(tt.line))
		if m.Kind != tt.kind || m.Method != tt.method || string(m.ID) != tt.id || m.UpdateKind != tt.update {
			t.Errorf("Parse(%q) = {%v %q id=%s %q}, want {%v %q id=%s %q}",
				tt.line, m.Kind, m.Method, m.ID, m.UpdateKind, tt.kind, tt.method, tt.id, tt.update)
		}
	}
}

func TestIDKey(t *testing.T) {
	if got, want := IDKey(json.RawMessage(` 1 `)), "1"; got != want {
		t.Errorf("IDKey(1) = %q, want %q", got, want)
	}
	if IDKey(json.RawMessage(`1`)) == IDKey(json.RawMessage(`"1"`)) {
		t.Errorf("IDKey(1) == IDKey(\"1\"), want them different")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`))
	f.Add([]byte(`junk`))
	f.Fuzz(func(t *testing.T, line []byte) {
		m := Parse(line)
		if m.Kind != Junk && !json.Valid(line) {
			t.Fatalf("Parse(%q).Kind = %v for invalid JSON, want junk", line, m.Kind)
		}
		switch m.Kind {
		case Request, Response:
			if m.ID == nil {
				t.Fatalf("Parse(%q): %v without id", line, m.Kind)
			}
		case Junk:
			if m.ID != nil || m.Method != "" {
				t.Fatalf("junk with envelope fields: %q", line)
			}
		}
	})
}

package acp

import (
	"bytes"
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
		{`{"jsonrpc":"2.0","id":9007199254740993,"result":{}}`, Response, "", "9007199254740993", ""},
		{`{"jsonrpc":"2.0","id":5,"method":""}`, Request, "", "5", ""},
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
	tests := []struct{ id, want string }{
		{`1`, `1`},
		{` 1 `, `1`},
		{"\t\"7f1c\"\r\n", `"7f1c"`},
		{`"1"`, `"1"`},
		{`9007199254740992`, `9007199254740992`},
		{`9007199254740993`, `9007199254740993`},
		{`{ "a" : [1, 2] }`, `{"a":[1,2]}`},
		{`not json`, `not json`},
	}
	for _, tt := range tests {
		if got := IDKey(json.RawMessage(tt.id)); got != tt.want {
			t.Errorf("IDKey(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
	distinct := [][2]string{
		{`1`, `"1"`},
		{`9007199254740992`, `9007199254740993`}, // equal as float64
		{`1`, `1.0`},
	}
	for _, ids := range distinct {
		if a, b := IDKey(json.RawMessage(ids[0])), IDKey(json.RawMessage(ids[1])); a == b {
			t.Errorf("IDKey(%s) = IDKey(%s) = %q, want them different", ids[0], ids[1], a)
		}
	}
}

func TestEncode(t *testing.T) {
	tests := []struct {
		name string
		line func() ([]byte, error)
		want string
		kind Kind
	}{
		{
			"request",
			func() ([]byte, error) {
				return EncodeRequest(json.RawMessage(`0`), "initialize", map[string]any{"protocolVersion": 1})
			},
			`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`,
			Request,
		},
		{
			"request without params",
			func() ([]byte, error) { return EncodeRequest(json.RawMessage(`"7f1c"`), "session/list", nil) },
			`{"jsonrpc":"2.0","id":"7f1c","method":"session/list"}`,
			Request,
		},
		{
			"notification with HTML characters",
			func() ([]byte, error) {
				return EncodeNotification("session/update", map[string]any{"text": "<b> & </b>"})
			},
			`{"jsonrpc":"2.0","method":"session/update","params":{"text":"<b> & </b>"}}`,
			Notification,
		},
		{
			"empty result",
			func() ([]byte, error) { return EncodeResult(json.RawMessage(`3`), struct{}{}) },
			`{"jsonrpc":"2.0","id":3,"result":{}}`,
			Response,
		},
		{
			"raw result",
			func() ([]byte, error) {
				return EncodeResult(json.RawMessage(` 3 `), json.RawMessage(` { "a" : "<&>" } `))
			},
			`{"jsonrpc":"2.0","id":3,"result":{"a":"<&>"}}`,
			Response,
		},
		{
			"null result",
			func() ([]byte, error) { return EncodeResult(json.RawMessage(`3`), map[string]any(nil)) },
			`{"jsonrpc":"2.0","id":3,"result":null}`,
			Response,
		},
		{
			"error",
			func() ([]byte, error) {
				return EncodeError(json.RawMessage(`null`), &ResponseError{Code: CodeParseError, Message: "parse error"})
			},
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
			Error,
		},
	}
	for _, tt := range tests {
		line, err := tt.line()
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got, want := string(line), tt.want+"\n"; got != want {
			t.Errorf("%s: encoded %q, want %q", tt.name, got, want)
		}
		if got := Parse(line).Kind; got != tt.kind {
			t.Errorf("%s: Parse(%s).Kind = %v, want %v", tt.name, line, got, tt.kind)
		}
	}
}

func TestEncodeFails(t *testing.T) {
	if _, err := EncodeResult(json.RawMessage(`1`), map[string]any{"c": make(chan int)}); err == nil {
		t.Error("EncodeResult of a channel: no error, want one")
	}
	if _, err := EncodeError(json.RawMessage(`{`), &ResponseError{Code: CodeInternalError}); err == nil {
		t.Error("EncodeError with the id `{`: no error, want one")
	}
}

func TestResponseError(t *testing.T) {
	e := &ResponseError{Code: CodeInternalError, Message: "boom"}
	if got, want := e.Error(), "boom (code -32603)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":9007199254740993,"method":"fs/read_text_file","params":{"path":"/a"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`))
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
		if m.ID != nil {
			var spaced bytes.Buffer
			if err := json.Indent(&spaced, m.ID, " ", "\t"); err != nil {
				t.Fatalf("Parse(%q).ID = %q, not JSON: %v", line, m.ID, err)
			}
			if IDKey(spaced.Bytes()) != IDKey(m.ID) {
				t.Fatalf("IDKey(%q) = %q, want IDKey(%q) = %q", spaced.Bytes(), IDKey(spaced.Bytes()), m.ID, IDKey(m.ID))
			}
		}
		checkReencoded(t, line, m)
	})
}

// checkReencoded checks that m, parsed from line, parses back the same
// once written by the Encode functions.
func checkReencoded(t *testing.T, line []byte, m Message) {
	t.Helper()
	var (
		out []byte
		err error
	)
	switch {
	case m.Kind == Request && m.Method != "":
		out, err = EncodeRequest(m.ID, m.Method, payload(m.Params))
	case m.Kind == Notification && m.Method != "":
		out, err = EncodeNotification(m.Method, payload(m.Params))
	case m.Kind == Response:
		out, err = EncodeResult(m.ID, payload(m.Result))
	case m.Kind == Error:
		out, err = EncodeError(m.ID, &ResponseError{Code: m.ErrorCode, Message: m.ErrorMessage})
	default:
		return // junk, or an empty method, which an Envelope leaves out
	}
	if err != nil {
		t.Fatalf("re-encoding %q: %v", line, err)
	}
	got := Parse(out)
	if got.Kind != m.Kind || got.Method != m.Method || IDKey(got.ID) != IDKey(m.ID) || got.UpdateKind != m.UpdateKind ||
		got.ErrorCode != m.ErrorCode || got.ErrorMessage != m.ErrorMessage ||
		compact(got.Params) != compact(m.Params) || compact(got.Result) != compact(m.Result) {
		t.Fatalf("Parse(%q) = %+v, re-encoded as %q: %+v", line, m, out, got)
	}
}

// compact returns raw without white space, or as it is if it is not JSON.
func compact(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// payload is raw as an Encode argument: nil, to be left out, when absent.
func payload(raw json.RawMessage) any {
	if raw == nil {
		return nil
	}
	return raw
}

func TestStateUpdate(t *testing.T) {
	for _, kind := range []string{"available_commands_update", "current_mode_update", "config_option_update", "session_info_update", "usage_update"} {
		if !StateUpdate(kind) {
			t.Errorf("StateUpdate(%q) = false, want true", kind)
		}
	}
	for _, kind := range []string{"agent_message_chunk", "tool_call", "tool_call_update", "plan", ""} {
		if StateUpdate(kind) {
			t.Errorf("StateUpdate(%q) = true, want false", kind)
		}
	}
}

func TestParseResultDetails(t *testing.T) {
	text := "hello"
	for _, tc := range []struct {
		result string
		want   ResultDetails
		ok     bool
	}{
		{`{"sessionId":"s1"}`, ResultDetails{SessionID: "s1"}, true},
		{`{"stopReason":"end_turn","_meta":{}}`, ResultDetails{StopReason: "end_turn"}, true},
		{`{"terminalId":"t7"}`, ResultDetails{TerminalID: "t7"}, true},
		{`{"outcome":{"outcome":"selected","optionId":"allow"}}`, ResultDetails{Outcome: "selected", OptionID: "allow"}, true},
		{`{"content":"hello"}`, ResultDetails{Content: &text}, true},
		{`{"sessionId":"s2","content":[{"type":"text"}]}`, ResultDetails{SessionID: "s2"}, true},
		{`null`, ResultDetails{}, true},
		{`[1]`, ResultDetails{}, false},
	} {
		got, ok := ParseResultDetails(json.RawMessage(tc.result))
		if ok != tc.ok || got.SessionID != tc.want.SessionID || got.StopReason != tc.want.StopReason ||
			got.TerminalID != tc.want.TerminalID || got.Outcome != tc.want.Outcome || got.OptionID != tc.want.OptionID ||
			(got.Content == nil) != (tc.want.Content == nil) || (got.Content != nil && *got.Content != *tc.want.Content) {
			t.Errorf("ParseResultDetails(%s) = %+v, %v; want %+v, %v", tc.result, got, ok, tc.want, tc.ok)
		}
	}
}

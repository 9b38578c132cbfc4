package driver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestRewriteMessage(t *testing.T) {
	upper := func(s string) string {
		if strings.HasPrefix(s, "sess") {
			return "SESS" + s[4:]
		}
		return s
	}
	tests := []struct {
		name, in string
		id       string
		want     string
	}{
		{
			"payload strings, not envelope or keys",
			`{"jsonrpc":"2.0", "id" : "sess_id", "method":"sess/x","params":{"sessionId":"sess_1","sess_k":["sess_2",1,true,null,{"a":"sess_3"}]}}`,
			"",
			`{"jsonrpc":"2.0", "id" : "sess_id", "method":"sess/x","params":{"sessionId":"SESS_1","sess_k":["SESS_2",1,true,null,{"a":"SESS_3"}]}}`,
		},
		{
			"id replaced, spacing kept",
			"{\"jsonrpc\":\"2.0\",\"id\":  7 ,\"result\":{\"outcome\":{\"outcome\":\"selected\"}}}\r",
			`"7f0c-uuid"`,
			"{\"jsonrpc\":\"2.0\",\"id\":  \"7f0c-uuid\" ,\"result\":{\"outcome\":{\"outcome\":\"selected\"}}}\r",
		},
		{
			"nested id members are payload",
			`{"id":1,"result":{"id":"sess_9","text":"sess \u00e9\n<b>"}}`,
			`2`,
			`{"id":2,"result":{"id":"SESS_9","text":"SESS é\n<b>"}}`,
		},
		{
			"unchanged strings keep their escapes",
			`{"id":1,"result":{"text":"\u0041\/b"}}`,
			"",
			`{"id":1,"result":{"text":"\u0041\/b"}}`,
		},
		{"not JSON", `{"id":1,"result":"sess_1"`, `2`, `{"id":1,"result":"sess_1"`},
		{"trailing garbage", `{"id":1,"result":"sess_1"} x`, `2`, `{"id":1,"result":"sess_1"} x`},
	}
	for _, tt := range tests {
		var id json.RawMessage
		if tt.id != "" {
			id = json.RawMessage(tt.id)
		}
		if got := rewriteMessage([]byte(tt.in), upper, id); string(got) != tt.want {
			t.Errorf("%s:\nrewriteMessage(%s)\n = %s\nwant %s", tt.name, tt.in, got, tt.want)
		}
	}
}

// transform applies fn to the strings of v as rewriteMessage does.
func transform(v any, fn func(string) string, top bool) any {
	switch v := v.(type) {
	case string:
		return fn(v)
	case []any:
		for i := range v {
			v[i] = transform(v[i], fn, false)
		}
	case map[string]any:
		for k := range v {
			if !top || !envelopeMembers[k] {
				v[k] = transform(v[k], fn, false)
			}
		}
	}
	return v
}

func FuzzRewrite(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi \"there\" \ud83d\ude00"}]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","result":{"content":"a\nb","n":-1.5e3,"ok":false,"z":null}}`))
	f.Add([]byte(` [ "a" , {"b" : [ ] } , { } ] `))
	f.Add([]byte(`"just a string"`))
	f.Add([]byte("{\"a\":\"\xff\"}"))
	f.Add([]byte(`{"a":tru}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if got := rewriteMessage(line, func(s string) string { return s }, nil); !bytes.Equal(got, line) {
			t.Fatalf("identity rewrite of %q = %q", line, got)
		}
		upper := func(s string) string { return strings.ToUpper(s) + "!" }
		got := rewriteMessage(line, upper, json.RawMessage(`"new-id"`))
		if !json.Valid(line) {
			if !bytes.Equal(got, line) {
				t.Fatalf("rewrite of invalid %q = %q, want it unchanged", line, got)
			}
			return
		}
		want, ok := decodeJSON(line)
		if !ok {
			return
		}
		want = transform(want, upper, true)
		if m, ok := want.(map[string]any); ok {
			if _, ok := m["id"]; ok {
				m["id"] = "new-id"
			}
		}
		have, ok := decodeJSON(got)
		if !ok || !json.Valid(got) {
			t.Fatalf("rewrite of %q = %q, not JSON", line, got)
		}
		if !reflect.DeepEqual(have, want) {
			t.Fatalf("rewrite of %q = %q, want the value %#v", line, got, want)
		}
	})
}

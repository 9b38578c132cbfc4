package redact

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestSecretMember(t *testing.T) {
	for _, name := range []string{"apiKey", "proxy_key", "API_KEY", "key", "authToken", "X-Auth-Token", "client_secret",
		"X-Api-Secret", "password", "Password", "Authorization", "cookie", "COOKIE"} {
		if !SecretMember(name) {
			t.Errorf("SecretMember(%q) = false, want true", name)
		}
	}
	for _, name := range []string{"maxTokens", "inputTokens", "keys", "keyboard", "tokenizer", "passwords", "db_password",
		"sessionId", "X-Ratelimit-Remaining-Tokens", "Content-Type", "", "ke"} {
		if SecretMember(name) {
			t.Errorf("SecretMember(%q) = true, want false", name)
		}
	}
}

func TestMembers(t *testing.T) {
	tests := []struct{ in, want string }{
		// JetBrains' initialize: the gateway key deep in _meta.
		{`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"_meta":{"proxyConfig":{"url":"https://gw.example","proxy_key":"pk-planted-1"}}}}`,
			`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"_meta":{"proxyConfig":{"url":"https://gw.example","proxy_key":"[REDACTED]"}}}}`},
		{`{"method":"authenticate","params":{"methodId":"api-key","apiKey":"sk-1","Authorization":"Bearer x","password":"p","Cookie":"a=b"}}`,
			`{"method":"authenticate","params":{"methodId":"api-key","apiKey":"[REDACTED]","Authorization":"[REDACTED]","password":"[REDACTED]","Cookie":"[REDACTED]"}}`},
		// White space anywhere is kept; so are empty values, numbers,
		// and the names themselves.
		{" { \"token\" :\t\"t-1\" , \"n\" : 1, \"accessToken\": \"\", \"maxTokens\": 100, \"key\": 5 } ",
			" { \"token\" :\t\"[REDACTED]\" , \"n\" : 1, \"accessToken\": \"\", \"maxTokens\": 100, \"key\": 5 } "},
		// A secret member's object or array: every string in it.
		{`{"secret":{"a":"x","b":["y",2,{"c":"z"}]},"other":"w"}`,
			`{"secret":{"a":"[REDACTED]","b":["[REDACTED]",2,{"c":"[REDACTED]"}]},"other":"w"}`},
		// An escaped name, an escaped value.
		{`{"api\u004bey":"a\"b\\c","x":"apiKey"}`, `{"api\u004bey":"[REDACTED]","x":"apiKey"}`},
		// ACP's environment variables and headers of MCP servers.
		{`{"mcpServers":[{"name":"s","env":[{"name":"GITHUB_TOKEN","value":"ghp-1"},{"value":"keep","name":"PATH"},{"value":"pw","name":"DB_PASSWORD"}],"headers":[{"name":"Authorization","value":"Bearer 1"}]}]}`,
			`{"mcpServers":[{"name":"s","env":[{"name":"GITHUB_TOKEN","value":"[REDACTED]"},{"value":"keep","name":"PATH"},{"value":"[REDACTED]","name":"DB_PASSWORD"}],"headers":[{"name":"Authorization","value":"[REDACTED]"}]}]}`},
		// Arrays at the top.
		{`[{"key":"k"},{"id":1}]`, `[{"key":"[REDACTED]"},{"id":1}]`},
	}
	for _, tt := range tests {
		in := []byte(tt.in)
		orig := bytes.Clone(in)
		got := Members(in)
		if string(got) != tt.want {
			t.Errorf("Members(%s)\n= %s\nwant %s", tt.in, got, tt.want)
		}
		if !bytes.Equal(in, orig) {
			t.Errorf("Members changed its argument: %s", in)
		}
		if !json.Valid(got) {
			t.Errorf("Members(%s) is not JSON: %s", tt.in, got)
		}
	}
}

func TestMembersLeavesAlone(t *testing.T) {
	for _, in := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"set \"apiKey\": \"x\" in the config"}}}}`,
		`{"usage":{"inputTokens":10,"outputTokens":5},"keys":["a"]}`,
		`not json: "api": "sk-1"`,
		`{"name":"x","value":"sk-1"`, // cut short
		`{"name":"PATH","value":"/bin"}`,
		``,
	} {
		got := Members([]byte(in))
		if string(got) != in {
			t.Errorf("Members(%s) = %s, want it as it was", in, got)
		}
	}
}

// TestMembersInText: a line that is not JSON, such as an agent's log of
// what it received, has the string members of the JSON quoted in it
// masked by the same rules.
func TestMembersInText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`testagent: authenticate params: {"methodId":"api-key","apiKey":"sk-1"}`, `testagent: authenticate params: {"methodId":"api-key","apiKey":"[REDACTED]"}`},
		{`{"apiKey":"sk-1"`, `{"apiKey":"[REDACTED]"`},
		{`recv {"env":[{"name":"GITHUB_TOKEN","value":"g-1"},{"name":"PATH","value":"/bin"}]} and more`, `recv {"env":[{"name":"GITHUB_TOKEN","value":"[REDACTED]"},{"name":"PATH","value":"/bin"}]} and more`},
		{`log: "token" : "a\"b" "password":""`, `log: "token" : "[REDACTED]" "password":""`},
	} {
		if got := string(Members([]byte(tt.in))); got != tt.want {
			t.Errorf("Members(%s)\n= %s\nwant %s", tt.in, got, tt.want)
		}
	}
}

// TestMaybeSecretMember: the look over a line before it is parsed finds
// every name Members masks, escaped or not, and passes lines without one.
func TestMaybeSecretMember(t *testing.T) {
	for _, in := range []string{`{"apiKey":1}`, `{"x" : {"TOKEN"  :1}}`, `{"a\u0062":1}`, `{"value":1}`, `{"Authorization":"x"}`, "{\"cookie\"\n:1}"} {
		if !maybeSecretMember([]byte(in)) {
			t.Errorf("maybeSecretMember(%s) = false", in)
		}
	}
	for _, in := range []string{`{"maxTokens":1,"url":"https://x:1/"}`, `{"notapassword":1}`, `{"session":"key"}`, `key: value`, `{"` + strings.Repeat("a", 200) + `key":1}`} {
		if maybeSecretMember([]byte(in)) {
			t.Errorf("maybeSecretMember(%s) = true", in)
		}
	}
	// A name too long for the look back: no secret name is that long,
	// unless it is escaped, and Members does not mask it either.
	if in := `{"` + strings.Repeat("a", 200) + `key":"v"}`; string(Members([]byte(in))) == in {
		t.Logf("a 203-byte name ending in key is not masked: by design of the look back")
	}
}

func TestMembersAllocations(t *testing.T) {
	line := []byte(benchFrame(false))
	if got := testing.AllocsPerRun(10, func() { Members(line) }); got != 0 {
		t.Errorf("Members of a line without a secret member: %v allocations, want 0", got)
	}
}

func TestHeaderNameRules(t *testing.T) {
	got := New(nil).Header(http.Header{"X-Auth-Token": {"t-1"}, "X-Api-Secret": {"s-1"}, "X-Ratelimit-Remaining-Tokens": {"10"}})
	for k, want := range map[string]string{"X-Auth-Token": Mask, "X-Api-Secret": Mask, "X-Ratelimit-Remaining-Tokens": "10"} {
		if g := got.Get(k); g != want {
			t.Errorf("header %s = %q, want %q", k, g, want)
		}
	}
}

func TestArgv(t *testing.T) {
	r := New([]string{"OPENAI_API_KEY=sk-env-0123456789"})
	got := r.Argv([]string{"agent", "--api-key", "sk-1", "--token=t-1", "-password", "pw", "--model", "m",
		"OPENAI_API_KEY=sk-2", "--prompt", "use sk-env-0123456789", "--no-key", "--verbose", "DEBUG=1",
		"-H", "X-Auth-Token: t-2", "--header", "Authorization:Bearer b", "--config", `{"provider":{"apiKey":"sk-3"}}`, "http://h:80/x"})
	want := []string{"agent", "--api-key", Mask, "--token=" + Mask, "-password", Mask, "--model", "m",
		"OPENAI_API_KEY=" + Mask, "--prompt", "use [REDACTED:OPENAI_API_KEY]", "--no-key", "--verbose", "DEBUG=1",
		"-H", "X-Auth-Token: " + Mask, "--header", "Authorization: " + Mask, "--config", `{"provider":{"apiKey":"[REDACTED]"}}`, "http://h:80/x"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Argv =\n%q\nwant\n%q", got, want)
	}
	if r.Argv(nil) != nil {
		t.Errorf("Argv(nil) is not nil")
	}
}

func TestText(t *testing.T) {
	r := New([]string{"MY_TOKEN=tok-0123456789"})
	tests := []struct{ in, want string }{
		{`OPENAI_BASE_URL=https://user:pw@host/v1: invalid upstream URL "https://user:pw@host/v1": credentials in the URL`,
			`OPENAI_BASE_URL=https://[REDACTED]@host/v1: invalid upstream URL "https://[REDACTED]@host/v1": credentials in the URL`},
		{`GET http://h/p?alt=sse&key=AIza1&client_secret=c: refused`, `GET http://h/p?alt=sse&key=[REDACTED]&client_secret=[REDACTED]: refused`},
		{`exec: tok-0123456789: not found`, `exec: [REDACTED:MY_TOKEN]: not found`},
		{`nothing here: http://host:8080/v1?q=1`, `nothing here: http://host:8080/v1?q=1`},
	}
	for _, tt := range tests {
		if got := r.Text(tt.in); got != tt.want {
			t.Errorf("Text(%q)\n= %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

// benchFrame is a 4 KiB ACP line, with a secret member or without.
func benchFrame(secret bool) string {
	line := benchLine(0, "")
	if !secret {
		return line
	}
	return strings.Replace(line, `{"sessionId"`, `{"_meta":{"proxyConfig":{"proxy_key":"pk-0123456789"}},"sessionId"`, 1)
}

// BenchmarkMembers is what masking secret members costs a stdio line on
// the recording path: a 4 KiB line without any (the common case, which
// is only looked over), a small one without, and one with a member to
// mask (parsed and copied).
func BenchmarkMembers(b *testing.B) {
	small := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello"}}}}`
	for _, line := range []struct{ name, text string }{{"clean-4KiB", benchFrame(false)}, {"clean-small", small}, {"secret-4KiB", benchFrame(true)}} {
		in := []byte(line.text)
		if masked := !bytes.Equal(Members(in), in); masked != strings.HasPrefix(line.name, "secret") {
			b.Fatalf("%s: masked %v", line.name, masked)
		}
		b.Run(line.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				Members(in)
			}
		})
	}
}

func TestMembersSmallCleanLineNotParsed(t *testing.T) {
	small := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello"}}}}`
	if maybeSecretMember([]byte(small)) {
		t.Errorf("maybeSecretMember of a message chunk = true")
	}
}

// FuzzMembers: whatever the line, Members keeps valid JSON valid, and
// every string under a secret member (or the value of a secret name's
// pair) reads back as the mask or empty, as encoding/json decodes it.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{"apiKey":"x"}`, `{"a":{"TOKEN":["x",{"b":"y"}]}}`, `{"name":"GITHUB_TOKEN","value":"v"}`,
		`{"value":"v","name":"X_KEY","token":"t"}`, `{"api\u004bey":"x\"y"}`, `[1,"key",{"cookie":"c"}]`, `"apiKey"`, `{"x":"\"key\": 1"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		out := Members(in)
		if !bytes.Equal(in, orig) {
			t.Fatalf("Members changed its argument")
		}
		if !json.Valid(in) {
			// Only quoted members are masked, and a mask is shorter
			// than the text around it can be.
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Members(%q) = %q: not JSON", in, out)
		}
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		if bad := unmasked(v, false); bad != "" {
			t.Fatalf("Members(%q) = %q: %q is not masked", in, out, bad)
		}
	})
}

// unmasked returns a string of v that Members should have masked, or "".
func unmasked(v any, secret bool) string {
	switch v := v.(type) {
	case string:
		if secret && v != "" && v != Mask {
			return v
		}
	case []any:
		for _, e := range v {
			if bad := unmasked(e, secret); bad != "" {
				return bad
			}
		}
	case map[string]any:
		name, _ := v["name"].(string)
		pair := SecretMember(name) || SecretName(name)
		for k, e := range v {
			if bad := unmasked(e, secret || SecretMember(k) || pair && k == "value"); bad != "" {
				return bad
			}
		}
	}
	return ""
}

package fakeanthropic

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/fakellm"

	"github.com/klauspost/compress/zstd"

	"github.com/acptap/acptap/internal/sse"
	"github.com/acptap/acptap/internal/wire"
)

// post sends a request body to path, compressed with encoding if not
// empty, and returns the response.
func post(t *testing.T, c *http.Client, url, path, encoding, body string) *http.Response {
	t.Helper()
	b := []byte(body)
	switch encoding {
	case "zstd":
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		b = enc.EncodeAll(b, nil)
		enc.Close()
	case "gzip":
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		b = buf.Bytes()
	}
	req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const bashTool = `{"name":"Bash","description":"Run a command","input_schema":{"type":"object","properties":{"command":{"type":"string"},"description":{"type":"string"}},"required":["command"]}}`
const readTool = `{"name":"Read","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}}}}`

func user(text string) string {
	b, _ := json.Marshal(text)
	return `{"role":"user","content":[{"type":"text","text":"<system-reminder>\nYou may run tools.\n</system-reminder>"},{"type":"text","text":` + string(b) + `}]}`
}

func body(stream bool, tools string, msgs ...string) string {
	s := "false"
	if stream {
		s = "true"
	}
	return `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":` + s + `,"system":[{"type":"text","text":"You are Claude Code."}],"messages":[` + strings.Join(msgs, ",") + `],"tools":[` + tools + `]}`
}

// events parses a stream with internal/sse, checking that each event's
// event line names the type in its data, and returns the types.
func events(t *testing.T, b []byte) []string {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(b))
	var types []string
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var d struct{ Type string }
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
			t.Fatalf("event %q: data %q: %v", ev.Type, ev.Data, err)
		}
		if !strings.HasPrefix(ev.Data, `{"type":`) {
			t.Errorf("event %q: data %q, want the type first as the real API has it", ev.Type, ev.Data)
		}
		if d.Type != ev.Type {
			t.Errorf("event line %q, data type %q", ev.Type, d.Type)
		}
		types = append(types, ev.Type)
	}
	if rest := r.Rest(); len(bytes.TrimSpace(rest)) > 0 {
		t.Errorf("bytes after the last event: %q", rest)
	}
	return types
}

const toolResult = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01x","content":[{"type":"text","text":"hello-from-claude\n"}]}]}`
const toolResultString = `{"role":"user","content":[{"tool_use_id":"toolu_01x","type":"tool_result","content":"ls: cannot access 'x': No such file\nmore","is_error":true}]}`
const lookupToolDef = `{"name":"mcp__notes__lookup","input_schema":{"type":"object","properties":{"topic":{"type":"string"}}}}`
const assistantLookup = `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_02x","name":"mcp__notes__lookup","input":{"topic":"answer"}}]}`
const lookupResult = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_02x","content":[{"type":"text","text":"42"}]}]}`

// qwenShellTool is qwen-code's shell tool: a required boolean flag, and a
// property of several types.
const qwenShellTool = `{"name":"run_shell_command","description":"Run a command","input_schema":{"type":"object","properties":{"command":{"type":"string"},"is_background":{"type":"boolean"},"directory":{"type":["string","null"]},"description":{"type":"string"}},"required":["command","is_background"]}}`

const assistantCall = `{"role":"assistant","content":[{"type":"text","text":"I'll run the command."},{"type":"tool_use","id":"toolu_01x","name":"Bash","input":{"command":"echo"}}]}`

// textEvents are the events of a text answer streamed in n deltas.
func textEvents(n int) string {
	return "message_start content_block_start ping " + strings.Repeat("content_block_delta ", n) + "content_block_stop message_delta message_stop"
}

// toolEvents are the events of ToolPreamble (two deltas) and a tool_use
// block whose input streams in an empty fragment and n more.
func toolEvents(n int) string {
	return "message_start content_block_start ping content_block_delta content_block_delta content_block_stop content_block_start " +
		strings.Repeat("content_block_delta ", 1+n) + "content_block_stop message_delta message_stop"
}

func TestScript(t *testing.T) {
	l := Start(Options{})
	defer l.Close()
	bashInput := `{"command":"` + BashCommand + `","description":"` + BashDescription + `"}`
	qwenShellInput := `{"command":"` + BashCommand + `","description":"` + BashDescription + `","is_background":false}`
	tests := []struct {
		name, encoding, body string
		step, text, stop     string
		events               string // for a stream, the event types
		call                 *wire.ToolCall
	}{
		{
			name: "text", body: body(true, bashTool, user("Say hi to me")),
			step: "text", text: fakellm.Answer("Say hi to me"), stop: "end_turn", events: textEvents(4), // 11 words, 3 a delta
		},
		{
			name: "string content", body: body(true, "", `{"role":"user","content":"Say hi"}`),
			step: "text", text: fakellm.Answer("Say hi"), stop: "end_turn",
		},
		{
			name: "zstd", encoding: "zstd", body: body(true, "", user("Say hi")),
			step: "text", text: fakellm.Answer("Say hi"), stop: "end_turn",
		},
		{
			name: "gzip", encoding: "gzip", body: body(true, "", user("Say hi")),
			step: "text", text: fakellm.Answer("Say hi"), stop: "end_turn",
		},
		{
			name: "bash", body: body(true, readTool+","+bashTool, user("Please run the command")),
			step: "bash", text: ToolPreamble, stop: "tool_use", events: toolEvents((len(bashInput) + 11) / 12),
			call: &wire.ToolCall{Name: "Bash", Arguments: bashInput},
		},
		{
			name: "bash not streamed", body: body(false, bashTool, user("run it")),
			step: "bash", text: ToolPreamble, stop: "tool_use",
			call: &wire.ToolCall{Name: "Bash", Arguments: bashInput},
		},
		{
			name: "run_shell_command", body: body(true, readTool+","+qwenShellTool, user("Please run the command")),
			step: "bash", text: ToolPreamble, stop: "tool_use", events: toolEvents((len(qwenShellInput) + 11) / 12),
			call: &wire.ToolCall{Name: "run_shell_command", Arguments: qwenShellInput},
		},
		{
			name: "no bash", body: body(true, readTool, user("run it")),
			step: "text", text: "I have no Bash tool to run it with; the tools offered are: Read", stop: "end_turn",
		},
		{
			name: "run in a reminder only", body: body(true, bashTool, user("truncate nothing")),
			step: "text", text: fakellm.Answer("truncate nothing"), stop: "end_turn",
		},
		{
			name: "tool result", body: body(true, bashTool, user("run it"), assistantCall, toolResult),
			step: "tool-answer", text: fakellm.ToolAnswer(BashOutput, BashOutput), stop: "end_turn", events: textEvents(2), // 4 words
		},
		{
			name: "failed tool result", body: body(true, bashTool, user("run it"), assistantCall, toolResultString),
			step: "tool-answer", text: "The command did not print what I expected: ls: cannot access 'x': No such file", stop: "end_turn",
		},
		{
			name: "mcp lookup", body: body(true, bashTool+","+lookupToolDef, user("Please look the answer up")),
			step: "mcp", text: ToolPreamble, stop: "tool_use", events: toolEvents((len(LookupArguments) + 11) / 12),
			call: &wire.ToolCall{Name: "mcp__notes__lookup", Arguments: LookupArguments},
		},
		{
			name: "mcp lookup result", body: body(true, lookupToolDef, user("Please look the answer up"), assistantLookup, lookupResult),
			step: "mcp-answer", text: LookupAnswer("42"), stop: "end_turn",
		},
		{
			name: "not streamed", body: body(false, "", user("Say hi")),
			step: "text", text: fakellm.Answer("Say hi"), stop: "end_turn",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, l.HTTP.Client(), l.URL, "/v1/messages", tt.encoding, tt.body)
			b := readAll(t, resp)
			stream := strings.Contains(tt.body, `"stream":true`)
			wantType := "application/json"
			if stream {
				wantType = "text/event-stream"
			}
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), wantType) {
				t.Fatalf("status %d, Content-Type %q, want 200 %s; body %s", resp.StatusCode, resp.Header.Get("Content-Type"), wantType, b)
			}
			if !strings.HasPrefix(resp.Header.Get("Request-Id"), "req_") {
				t.Errorf("request-id %q, want req_...", resp.Header.Get("Request-Id"))
			}
			if stream {
				if got := strings.Join(events(t, b), " "); tt.events != "" && got != tt.events {
					t.Errorf("events\n%s\nwant\n%s", got, tt.events)
				}
			}
			m, err := wire.Reassemble(wire.Anthropic, b)
			if err != nil {
				t.Fatalf("acptap's parser rejects the response: %v\n%s", err, b)
			}
			if m.Text != tt.text {
				t.Errorf("text %q, want %q", m.Text, tt.text)
			}
			if m.StopReason != tt.stop {
				t.Errorf("stop reason %q, want %q", m.StopReason, tt.stop)
			}
			if m.Model != "claude-sonnet-4-5" || !strings.HasPrefix(m.ID, "msg_01") {
				t.Errorf("model %q id %q, want the request's model and a msg_01 id", m.Model, m.ID)
			}
			if want := countTokens([]byte(tt.body)); m.Usage.InputTokens != want || m.Usage.OutputTokens == 0 {
				t.Errorf("usage %+v, want %d input tokens and some output tokens", m.Usage, want)
			}
			switch {
			case tt.call == nil && len(m.ToolCalls) > 0:
				t.Errorf("tool calls %+v, want none", m.ToolCalls)
			case tt.call != nil && (len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != tt.call.Name || !strings.HasPrefix(m.ToolCalls[0].ID, "toolu_01")):
				t.Errorf("tool calls %+v, want one %s call with a toolu_01 id", m.ToolCalls, tt.call.Name)
			case tt.call != nil:
				var got, want any
				if err := json.Unmarshal([]byte(m.ToolCalls[0].Arguments), &got); err != nil {
					t.Errorf("tool input %q is not complete JSON: %v", m.ToolCalls[0].Arguments, err)
				}
				json.Unmarshal([]byte(tt.call.Arguments), &want)
				if g, w := string(marshal(got)), string(marshal(want)); g != w {
					t.Errorf("tool input %s, want %s", g, w)
				}
			}
			reqs := l.Requests()
			if len(reqs) != i+1 {
				t.Fatalf("%d requests kept, want %d", len(reqs), i+1)
			}
			got := reqs[i]
			if got.Step != tt.step || got.Encoding != tt.encoding || string(got.Body) != tt.body || got.Stream != stream {
				t.Errorf("kept request step %q encoding %q stream %v body %q, want %q %q %v %q", got.Step, got.Encoding, got.Stream, got.Body, tt.step, tt.encoding, stream, tt.body)
			}
		})
	}
}

// TestFreshIDs checks that two answers to the same request have different
// message and tool_use ids.
func TestFreshIDs(t *testing.T) {
	l := Start(Options{})
	defer l.Close()
	var msgIDs, toolIDs []string
	for range 2 {
		m, err := wire.Reassemble(wire.Anthropic, readAll(t, post(t, l.HTTP.Client(), l.URL, "/v1/messages", "", body(true, bashTool, user("run it")))))
		if err != nil || len(m.ToolCalls) != 1 {
			t.Fatalf("message %+v, error %v; want a tool call", m, err)
		}
		msgIDs = append(msgIDs, m.ID)
		toolIDs = append(toolIDs, m.ToolCalls[0].ID)
	}
	if msgIDs[0] == msgIDs[1] || toolIDs[0] == toolIDs[1] {
		t.Errorf("message ids %q, tool ids %q; want fresh ones per response", msgIDs, toolIDs)
	}
	if len(msgIDs[0]) != len("msg_01")+22 || len(toolIDs[0]) != len("toolu_01")+22 {
		t.Errorf("ids %q %q, want the real API's length", msgIDs[0], toolIDs[0])
	}
}

func TestSideEndpoints(t *testing.T) {
	l := Start(Options{})
	defer l.Close()
	c := l.HTTP.Client()

	b := body(false, bashTool, user("hi"))
	resp := post(t, c, l.URL, "/v1/messages/count_tokens", "", b)
	var ct struct {
		InputTokens int `json:"input_tokens"`
	}
	if raw := readAll(t, resp); resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &ct) != nil || ct.InputTokens != countTokens([]byte(b)) {
		t.Errorf("count_tokens: status %d body %s, want 200 {\"input_tokens\": %d}", resp.StatusCode, raw, countTokens([]byte(b)))
	}

	resp, err := c.Get(l.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct {
			Type, ID string
		}
		HasMore bool   `json:"has_more"`
		FirstID string `json:"first_id"`
	}
	if raw := readAll(t, resp); resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &list) != nil || len(list.Data) != len(Models) || list.Data[0].Type != "model" || list.FirstID != Models[0].ID {
		t.Errorf("models: status %d body %s, want 200 and a list of %d", resp.StatusCode, raw, len(Models))
	}
	resp, err = c.Get(l.URL + "/v1/models/" + Models[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if raw := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), Models[1].DisplayName) {
		t.Errorf("one model: status %d body %s, want 200", resp.StatusCode, raw)
	}

	for _, method := range []string{http.MethodHead, http.MethodGet} {
		req, _ := http.NewRequest(method, l.URL+"/", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if readAll(t, resp); resp.StatusCode != http.StatusOK {
			t.Errorf("%s /: status %d, want 200", method, resp.StatusCode)
		}
	}
	var steps []string
	for _, r := range l.Requests() {
		steps = append(steps, r.Step)
	}
	if got, want := strings.Join(steps, " "), "count-tokens models models root root"; got != want {
		t.Errorf("steps %q, want %q", got, want)
	}
}

func TestErrors(t *testing.T) {
	l := Start(Options{})
	defer l.Close()
	for _, tt := range []struct {
		name, path, encoding, body string
		status                     int
	}{
		{"not JSON", "/v1/messages", "", `{`, http.StatusBadRequest},
		{"no messages", "/v1/messages", "", `{"model":"m","max_tokens":1,"messages":[]}`, http.StatusBadRequest},
		{"no model", "/v1/messages", "", `{"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadRequest},
		{"unknown encoding", "/v1/messages", "compress", `{}`, http.StatusBadRequest},
		{"count_tokens not JSON", "/v1/messages/count_tokens", "", `{`, http.StatusBadRequest},
		{"other path", "/v1/complete", "", `{}`, http.StatusNotFound},
	} {
		resp := post(t, l.HTTP.Client(), l.URL, tt.path, tt.encoding, tt.body)
		b := readAll(t, resp)
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if resp.StatusCode != tt.status || json.Unmarshal(b, &e) != nil || e.Type != "error" || e.Error.Type == "" || e.Error.Message == "" {
			t.Errorf("%s: status %d body %s, want %d with an Anthropic error body", tt.name, resp.StatusCode, b, tt.status)
		}
	}
}

// TestSlow checks that a "slowly" answer streams its deltas and then
// holds the response open until the client leaves.
func TestSlow(t *testing.T) {
	l := Start(Options{Delay: time.Millisecond})
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.URL+"/v1/messages", strings.NewReader(body(true, bashTool, user("Answer slowly"))))
	resp, err := l.HTTP.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	deltas := 0
	var text strings.Builder
	for deltas < SlowDeltas && sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"text_delta"`) {
			var ev struct{ Delta struct{ Text string } }
			json.Unmarshal([]byte(d), &ev)
			text.WriteString(ev.Delta.Text)
			deltas++
		}
	}
	if deltas != SlowDeltas || text.String() != fakellm.SlowAnswer {
		t.Fatalf("%d deltas %q, want %d making %q (scan error %v)", deltas, text.String(), SlowDeltas, fakellm.SlowAnswer, sc.Err())
	}
	next := make(chan string, 1)
	go func() {
		var rest strings.Builder
		for sc.Scan() {
			rest.WriteString(sc.Text())
		}
		next <- rest.String()
	}()
	cancel()
	if rest := <-next; strings.Contains(rest, "message_") {
		t.Errorf("after its deltas the stalled answer sent %q, want nothing", rest)
	}
	if got := l.Requests(); len(got) != 1 || got[0].Step != "slow" {
		t.Errorf("requests %+v, want one slow step", got)
	}
}

// TestCloseEndsStalledStreams checks that Close does not wait for a client
// that never leaves.
func TestCloseEndsStalledStreams(t *testing.T) {
	l := Start(Options{})
	resp := post(t, l.HTTP.Client(), l.URL, "/v1/messages", "", body(true, "", user("Answer slowly")))
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	l.Close() // returns: the stalled handler ended
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Errorf("the stalled stream ended cleanly on Close, want an error")
	}
}

func TestTLS(t *testing.T) {
	l, err := StartTLS(Options{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !strings.HasPrefix(l.URL, "https://127.0.0.1:") {
		t.Errorf("URL %q, want https://127.0.0.1:PORT", l.URL)
	}
	pem, err := os.ReadFile(l.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no PEM certificate", l.CAFile)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	m, err := wire.Reassemble(wire.Anthropic, readAll(t, post(t, c, l.URL, "/v1/messages", "", body(true, "", user("hi")))))
	if err != nil || m.Text != fakellm.Answer("hi") {
		t.Errorf("over TLS: text %q, error %v; want %q", m.Text, err, fakellm.Answer("hi"))
	}
	if _, err := http.Post(l.URL+"/v1/messages", "application/json", strings.NewReader(`{}`)); err == nil {
		t.Errorf("a client without the CA reached the TLS fake")
	}
}

func TestVariant(t *testing.T) {
	l := Start(Options{Variant: "Changed. "})
	defer l.Close()
	m, err := wire.Reassemble(wire.Anthropic, readAll(t, post(t, l.HTTP.Client(), l.URL, "/v1/messages", "", body(true, "", user("hi")))))
	if err != nil || m.Text != "Changed. "+fakellm.Answer("hi") {
		t.Errorf("text %q, error %v; want the variant's prefix", m.Text, err)
	}
}

// shape is the set of field paths in an event's data, such as
// "content_block_start.content_block.id", two levels deep.
func shape(t *testing.T, b []byte) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	r := sse.NewReader(bytes.NewReader(b))
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal([]byte(ev.Data), &top); err != nil {
			t.Fatalf("event %q: %v", ev.Type, err)
		}
		for k, v := range top {
			keys[ev.Type+"."+k] = true
			var sub map[string]json.RawMessage
			if json.Unmarshal(v, &sub) == nil {
				var d struct{ Type string }
				json.Unmarshal(v, &d)
				for k2 := range sub {
					keys[ev.Type+"."+k+"("+d.Type+")."+k2] = true
				}
			}
		}
	}
	return keys
}

// TestRealShape checks that every field of the real API's tool call
// stream in testdata/wire-samples is in the fake's.
func TestRealShape(t *testing.T) {
	real, err := os.ReadFile("../../../testdata/wire-samples/anth_tool_real.sse")
	if err != nil {
		t.Fatal(err)
	}
	l := Start(Options{})
	defer l.Close()
	fake := shape(t, readAll(t, post(t, l.HTTP.Client(), l.URL, "/v1/messages", "", body(true, bashTool, user("run it")))))
	for k := range shape(t, real) {
		if !fake[k] {
			t.Errorf("the real stream has %s, the fake's has not", k)
		}
	}
}

// TestBetaQuery checks the path Claude Code posts to, with ?beta=true.
func TestBetaQuery(t *testing.T) {
	l := Start(Options{})
	defer l.Close()
	m, err := wire.Reassemble(wire.Anthropic, readAll(t, post(t, l.HTTP.Client(), l.URL, "/v1/messages?beta=true", "", body(true, bashTool, user("run it")))))
	if err != nil || len(m.ToolCalls) != 1 || m.StopReason != "tool_use" {
		t.Errorf("POST /v1/messages?beta=true: message %+v, error %v; want a Bash call", m, err)
	}
	if got := l.Requests(); len(got) != 1 || got[0].Path != "/v1/messages" || got[0].Step != "bash" {
		t.Errorf("requests %+v, want one bash step at /v1/messages", got)
	}
}

// TestStructuredOutput checks the answer to a request for JSON of a
// schema, as Claude Code's session-title request makes.
func TestStructuredOutput(t *testing.T) {
	l := Start(Options{})
	defer l.Close()
	req := `{"model":"claude-3-5-haiku-20241022","max_tokens":1024,"stream":true,"messages":[` + user("<session>\nPlease run the command now\n</session>") + `],` +
		`"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}}}}`
	m, err := wire.Reassemble(wire.Anthropic, readAll(t, post(t, l.HTTP.Client(), l.URL, "/v1/messages", "", req)))
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Title string }
	if err := json.Unmarshal([]byte(m.Text), &got); err != nil {
		t.Fatalf("the answer %q is not JSON: %v", m.Text, err)
	}
	if want := "Please run the command now"; got.Title != want || Title("Please run the command now and quickly") != want {
		t.Errorf("title %q, want %q", got.Title, want)
	}
	if reqs := l.Requests(); len(reqs) != 1 || reqs[0].Step != "json" {
		t.Errorf("requests %+v, want one json step", reqs)
	}
}

// TestFaults checks that the first Messages requests get the real API's
// errors, side endpoints none, and the script answers after them.
func TestFaults(t *testing.T) {
	l := Start(Options{Faults: []int{429, 529, 500}, RetryAfter: 2})
	defer l.Close()
	c := l.HTTP.Client()
	if resp := post(t, c, l.URL, "/v1/messages/count_tokens", "", body(false, "", user("hi"))); resp.StatusCode != http.StatusOK {
		t.Errorf("count_tokens: status %d, want 200 (faults are for /v1/messages)", resp.StatusCode)
	}
	title := `{"model":"m","max_tokens":9,"messages":[` + user("<session>hi</session>") + `],"output_config":{"format":{"type":"json_schema","schema":{"required":["title"]}}}}`
	if resp := post(t, c, l.URL, "/v1/messages", "", title); resp.StatusCode != http.StatusOK {
		t.Errorf("a title request: status %d, want 200 (faults are for the turns)", resp.StatusCode)
	}
	for _, want := range []struct {
		status      int
		typ, header string
	}{{429, "rate_limit_error", "2"}, {529, "overloaded_error", ""}, {500, "api_error", ""}} {
		resp := post(t, c, l.URL, "/v1/messages", "", body(true, "", user("Say hi")))
		b := readAll(t, resp)
		var e struct {
			Type  string
			Error struct{ Type, Message string }
			ID    string `json:"request_id"`
		}
		json.Unmarshal(b, &e)
		if resp.StatusCode != want.status || e.Type != "error" || e.Error.Type != want.typ || e.Error.Message == "" ||
			e.ID != resp.Header.Get("Request-Id") || resp.Header.Get("Retry-After") != want.header {
			t.Errorf("fault: status %d, retry-after %q, body %s; want %d, %q, a %s error with the request id", resp.StatusCode, resp.Header.Get("Retry-After"), b, want.status, want.header, want.typ)
		}
	}
	m, err := wire.Reassemble(wire.Anthropic, readAll(t, post(t, c, l.URL, "/v1/messages", "", body(true, "", user("Say hi")))))
	if err != nil || m.Text != fakellm.Answer("Say hi") {
		t.Errorf("after the faults: text %q, error %v; want the answer", m.Text, err)
	}
	var steps []string
	for _, r := range l.Requests() {
		steps = append(steps, r.Step)
	}
	if got, want := strings.Join(steps, " "), "count-tokens json fault-429 fault-529 fault-500 text"; got != want {
		t.Errorf("steps %q, want %q", got, want)
	}
}

// TestTurnDelay checks that a turn's answer waits TurnDelay and a title
// request does not: the title request, sent second, is answered while the
// turn still waits, until its client gives up.
func TestTurnDelay(t *testing.T) {
	l := Start(Options{TurnDelay: time.Hour})
	defer l.Close()
	c := l.HTTP.Client()
	ctx, cancel := context.WithCancel(context.Background())
	turn := make(chan error)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.URL+"/v1/messages", strings.NewReader(body(true, "", user("Say hi"))))
		resp, err := c.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		turn <- err
	}()
	// The turn's request is kept before its answer waits.
	for len(l.Requests()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	title := `{"model":"m","max_tokens":9,"stream":true,"messages":[` + user("<session>Say hi</session>") + `],"output_config":{"format":{"type":"json_schema","schema":{"required":["title"]}}}}`
	m, err := wire.Reassemble(wire.Anthropic, readAll(t, post(t, c, l.URL, "/v1/messages", "", title)))
	if err != nil || m.Text != `{"title":"Say hi"}` {
		t.Errorf("the title answer %q, error %v; want its JSON at once", m.Text, err)
	}
	select {
	case err := <-turn:
		t.Fatalf("the turn was answered (error %v) within its TurnDelay", err)
	default:
	}
	cancel()
	if err := <-turn; !errors.Is(err, context.Canceled) {
		t.Errorf("the turn's request ended with %v, want the client's cancel", err)
	}
}

// TestAwaitTitle checks that with AwaitTitle a turn's answer waits for a
// title request to be answered, and is answered once it is.
func TestAwaitTitle(t *testing.T) {
	l := Start(Options{AwaitTitle: true})
	defer l.Close()
	c := l.HTTP.Client()
	turn := make(chan string)
	go func() {
		m, _ := wire.Reassemble(wire.Anthropic, readAll(t, post(t, c, l.URL, "/v1/messages", "", body(true, "", user("Say hi")))))
		turn <- m.Text
	}()
	for len(l.Requests()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case text := <-turn:
		t.Fatalf("the turn was answered (%q) before any title", text)
	default:
	}
	title := `{"model":"m","max_tokens":9,"stream":true,"messages":[` + user("<session>Say hi</session>") + `],"output_config":{"format":{"type":"json_schema","schema":{"required":["title"]}}}}`
	readAll(t, post(t, c, l.URL, "/v1/messages", "", title))
	if text := <-turn; text != fakellm.Answer("Say hi") {
		t.Errorf("the turn's answer %q, want %q", text, fakellm.Answer("Say hi"))
	}
	// A second title request answers as well; the turns no longer wait.
	readAll(t, post(t, c, l.URL, "/v1/messages", "", title))
	m, _ := wire.Reassemble(wire.Anthropic, readAll(t, post(t, c, l.URL, "/v1/messages", "", body(true, "", user("Say bye")))))
	if m.Text != fakellm.Answer("Say bye") {
		t.Errorf("a later turn's answer %q, want %q", m.Text, fakellm.Answer("Say bye"))
	}
}

// TestToolInputDelay checks that the start of a tool_use block is sent
// before its input waits, and the whole call after it.
func TestToolInputDelay(t *testing.T) {
	l := Start(Options{ToolInputDelay: time.Hour})
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.URL+"/v1/messages", strings.NewReader(body(true, bashTool, user("Please run it"))))
	resp, err := l.HTTP.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before the tool_use block started: %v", err)
		}
		if strings.Contains(line, `"content_block_start"`) && strings.Contains(line, `"tool_use"`) {
			break
		}
		if strings.Contains(line, "input_json_delta") {
			t.Fatalf("input before the block's start: %s", line)
		}
	}
	// The input waits: the client gives up, and the stream ends without it.
	cancel()
	rest, _ := io.ReadAll(br)
	if bytes.Contains(rest, []byte("input_json_delta")) {
		t.Errorf("the input came within ToolInputDelay: %s", rest)
	}
}

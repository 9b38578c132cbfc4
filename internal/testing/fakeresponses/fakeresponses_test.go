package fakeresponses

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/fakellm"

	"github.com/klauspost/compress/zstd"

	"github.com/acptap/acptap/internal/wire"
)

// post sends a Responses request body, compressed with encoding if not
// empty, and returns the response.
func post(t *testing.T, c *http.Client, url, encoding, body string) *http.Response {
	t.Helper()
	b := []byte(body)
	if encoding == "zstd" {
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		b = enc.EncodeAll(b, nil)
		enc.Close()
	}
	req, err := http.NewRequest(http.MethodPost, url+"/responses", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
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

const execTool = `{"type":"function","name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}}`
const shellCommandTool = `{"type":"function","name":"shell_command","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}`
const shellTool = `{"type":"function","name":"shell","parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}}}}`

func user(text string) string {
	b, _ := json.Marshal(text)
	return `{"type":"message","role":"user","content":[{"type":"input_text","text":` + string(b) + `}]}`
}

func TestScript(t *testing.T) {
	l := Start(Options{})
	defer l.Close()
	dev := `{"type":"message","role":"developer","content":[{"type":"input_text","text":"be brief; run nothing"}]}`
	tests := []struct {
		name, encoding, body string
		step, text           string
		call                 *wire.ToolCall
	}{
		{
			name: "text", body: `{"model":"m","stream":true,"input":[` + dev + `,` + user("Say hi") + `],"tools":[` + execTool + `]}`,
			step: "text", text: fakellm.Answer("Say hi"),
		},
		{
			name: "zstd", encoding: "zstd", body: `{"model":"m","stream":true,"input":[` + user("Say hi") + `]}`,
			step: "text", text: fakellm.Answer("Say hi"),
		},
		{
			name: "exec_command", body: `{"model":"m","stream":true,"input":[` + user("Please run the command") + `],"tools":[` + execTool + `]}`,
			step: "shell", call: &wire.ToolCall{Name: "exec_command", Arguments: `{"cmd":"` + ShellCommand + `"}`},
		},
		{
			name: "shell_command preferred", body: `{"model":"m","stream":true,"input":[` + user("run it") + `],"tools":[` + execTool + `,` + shellCommandTool + `]}`,
			step: "shell", call: &wire.ToolCall{Name: "shell_command", Arguments: `{"command":"` + ShellCommand + `"}`},
		},
		{
			name: "shell argv", body: `{"model":"m","stream":true,"input":[` + user("run it") + `],"tools":[` + shellTool + `]}`,
			step: "shell", call: &wire.ToolCall{Name: "shell", Arguments: `{"command":["bash","-lc","` + ShellCommand + `"]}`},
		},
		{
			name: "no shell", body: `{"model":"m","stream":true,"input":[` + user("run it") + `],"tools":[]}`,
			step: "text", text: "I have no shell tool to run it with; the tools offered are: ",
		},
		{
			name: "word run only", body: `{"model":"m","stream":true,"input":[` + user("truncate nothing") + `],"tools":[` + execTool + `]}`,
			step: "text", text: fakellm.Answer("truncate nothing"),
		},
		{
			name: "tool output", body: `{"model":"m","stream":true,"input":[` + user("run it") +
				`,{"type":"function_call","name":"shell_command","arguments":"{}","call_id":"call_1"},{"type":"function_call_output","call_id":"call_1","output":"Exit code: 0\nOutput:\nhello-from-codex\n"}]}`,
			step: "tool-answer", text: fakellm.ToolAnswer(ShellOutput, ShellOutput),
		},
		{
			name: "failed tool output", body: `{"model":"m","stream":true,"input":[{"type":"function_call_output","call_id":"call_1","output":"Exit code: 1\nno such file"}]}`,
			step: "tool-answer", text: "The command did not print what I expected: Exit code: 1",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, l.HTTP.Client(), l.URL, tt.encoding, tt.body)
			body := readAll(t, resp)
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, Content-Type %q, want 200 text/event-stream; body %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			m, err := wire.Reassemble(wire.OpenAIResponses, body)
			if err != nil {
				t.Fatalf("acptap's parser rejects the stream: %v\n%s", err, body)
			}
			if m.Text != tt.text {
				t.Errorf("text %q, want %q", m.Text, tt.text)
			}
			if m.StopReason != "completed" {
				t.Errorf("stop reason %q, want completed", m.StopReason)
			}
			if m.Usage.OutputTokens == 0 {
				t.Errorf("usage %+v, want output tokens", m.Usage)
			}
			switch {
			case tt.call == nil && len(m.ToolCalls) > 0:
				t.Errorf("tool calls %+v, want none", m.ToolCalls)
			case tt.call != nil && (len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != tt.call.Name || m.ToolCalls[0].Arguments != tt.call.Arguments || !strings.HasPrefix(m.ToolCalls[0].ID, "call_")):
				t.Errorf("tool calls %+v, want one %s call with arguments %s", m.ToolCalls, tt.call.Name, tt.call.Arguments)
			}
			reqs := l.Requests()
			if len(reqs) != i+1 {
				t.Fatalf("%d requests kept, want %d", len(reqs), i+1)
			}
			got := reqs[i]
			if got.Step != tt.step || got.Encoding != tt.encoding || string(got.Body) != tt.body {
				t.Errorf("kept request step %q encoding %q body %q, want %q %q %q", got.Step, got.Encoding, got.Body, tt.step, tt.encoding, tt.body)
			}
		})
	}
}

// TestEventShape checks the details of the stream that a real client
// relies on: event lines matching the data's type, sequence numbers from
// 0, the item and response ids linked, and fresh ids per call.
func TestEventShape(t *testing.T) {
	l := Start(Options{})
	defer l.Close()
	body := `{"model":"gpt-x","stream":true,"input":[` + user("run it") + `],"tools":[` + execTool + `]}`
	var ids []string
	for range 2 {
		b := readAll(t, post(t, l.HTTP.Client(), l.URL, "", body))
		var types []string
		respID, itemID := "", ""
		for i, ev := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
			name, data, ok := strings.Cut(ev, "\ndata: ")
			if !ok || !strings.HasPrefix(name, "event: ") {
				t.Fatalf("event %d is not `event:` then `data:`: %q", i, ev)
			}
			var d struct {
				Type     string `json:"type"`
				Seq      *int   `json:"sequence_number"`
				ItemID   string `json:"item_id"`
				Item     struct{ ID string }
				Response struct {
					ID        string `json:"id"`
					Model     string `json:"model"`
					CreatedAt int64  `json:"created_at"`
				}
			}
			if err := json.Unmarshal([]byte(data), &d); err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			if d.Type != strings.TrimPrefix(name, "event: ") {
				t.Errorf("event %d: event line %q, data type %q", i, name, d.Type)
			}
			if d.Seq == nil || *d.Seq != i {
				t.Errorf("event %d: sequence_number %v, want %d", i, d.Seq, i)
			}
			if d.Response.ID != "" {
				if respID != "" && d.Response.ID != respID {
					t.Errorf("event %d: response id %q, want %q as before", i, d.Response.ID, respID)
				}
				respID = d.Response.ID
				if d.Response.Model != "gpt-x" || time.Since(time.Unix(d.Response.CreatedAt, 0)) > time.Hour {
					t.Errorf("event %d: model %q created_at %d, want the request's model and now", i, d.Response.Model, d.Response.CreatedAt)
				}
			}
			if d.Item.ID != "" {
				itemID = d.Item.ID
			}
			if d.ItemID != "" && d.ItemID != itemID {
				t.Errorf("event %d: item_id %q, want %q of output_item.added", i, d.ItemID, itemID)
			}
			types = append(types, d.Type)
		}
		want := []string{"response.created", "response.in_progress", "response.output_item.added",
			"response.function_call_arguments.delta", "response.function_call_arguments.delta",
			"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
		if strings.Join(types, " ") != strings.Join(want, " ") {
			t.Errorf("events %q, want %q", types, want)
		}
		ids = append(ids, respID)
	}
	if ids[0] == ids[1] || !strings.HasPrefix(ids[0], "resp_") {
		t.Errorf("response ids %q, want fresh resp_ ids per call", ids)
	}
}

// TestSlow checks that a "slowly" answer streams its deltas and then
// holds the response open until the client leaves.
func TestSlow(t *testing.T) {
	l := Start(Options{Delay: time.Millisecond})
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.URL+"/responses",
		strings.NewReader(`{"model":"m","stream":true,"input":[`+user("Answer slowly")+`]}`))
	resp, err := l.HTTP.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	deltas := 0
	var text strings.Builder
	for deltas < SlowDeltas && sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"response.output_text.delta"`) {
			var ev struct{ Delta string }
			json.Unmarshal([]byte(d), &ev)
			text.WriteString(ev.Delta)
			deltas++
		}
	}
	if deltas != SlowDeltas || text.String() != fakellm.SlowAnswer {
		t.Fatalf("%d deltas %q, want %d making %q (scan error %v)", deltas, text.String(), SlowDeltas, fakellm.SlowAnswer, sc.Err())
	}
	// Nothing else comes, not even response.completed, until the client
	// leaves: the reader gets the cancellation, not an event or EOF.
	next := make(chan string, 1)
	go func() {
		var rest strings.Builder
		for sc.Scan() {
			rest.WriteString(sc.Text())
		}
		next <- rest.String()
	}()
	cancel()
	if rest := <-next; strings.Contains(rest, "response.") {
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
	resp := post(t, l.HTTP.Client(), l.URL, "", `{"model":"m","stream":true,"input":[`+user("Answer slowly")+`]}`)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	l.Close() // returns: the stalled handler ended
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Logf("reading after Close: %v", err)
	}
}

func TestErrors(t *testing.T) {
	l := Start(Options{})
	defer l.Close()
	for _, tt := range []struct {
		name, encoding, body string
		status               int
	}{
		{"not JSON", "", `{`, http.StatusBadRequest},
		{"not streamed", "", `{"model":"m","input":[` + user("hi") + `]}`, http.StatusBadRequest},
		{"no input", "", `{"model":"m","stream":true,"input":[]}`, http.StatusBadRequest},
		{"unknown encoding", "br", `{}`, http.StatusBadRequest},
	} {
		resp := post(t, l.HTTP.Client(), l.URL, tt.encoding, tt.body)
		b := readAll(t, resp)
		var e struct {
			Error struct{ Message string }
		}
		if resp.StatusCode != tt.status || json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
			t.Errorf("%s: status %d body %s, want %d with an OpenAI error body", tt.name, resp.StatusCode, b, tt.status)
		}
	}
	resp, err := l.HTTP.Client().Get(l.URL + "/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	if readAll(t, resp); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/chat/completions: status %d, want 404", resp.StatusCode)
	}
}

func TestTLS(t *testing.T) {
	l, err := StartTLS(Options{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !strings.HasPrefix(l.URL, "https://127.0.0.1:") {
		t.Errorf("URL %q, want https://127.0.0.1:PORT/v1", l.URL)
	}
	pem, err := os.ReadFile(l.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no PEM certificate", l.CAFile)
	}
	// A client that trusts only the CA file reaches the fake.
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	m, err := wire.Reassemble(wire.OpenAIResponses, readAll(t, post(t, c, l.URL, "", `{"model":"m","stream":true,"input":[`+user("hi")+`]}`)))
	if err != nil || m.Text != fakellm.Answer("hi") {
		t.Errorf("over TLS: text %q, error %v; want %q", m.Text, err, fakellm.Answer("hi"))
	}
	// One that does not trust it is refused.
	if _, err := http.Post(l.URL+"/responses", "application/json", strings.NewReader(`{}`)); err == nil {
		t.Errorf("a client without the CA reached the TLS fake")
	}
}

func TestVariant(t *testing.T) {
	l := Start(Options{Variant: "Changed. "})
	defer l.Close()
	m, err := wire.Reassemble(wire.OpenAIResponses, readAll(t, post(t, l.HTTP.Client(), l.URL, "", `{"model":"m","stream":true,"input":[`+user("hi")+`]}`)))
	if err != nil || m.Text != "Changed. "+fakellm.Answer("hi") {
		t.Errorf("text %q, error %v; want the variant's prefix", m.Text, err)
	}
}

package fakegemini

import (
	"bytes"
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

	"github.com/acptap/acptap/internal/sse"
	"github.com/acptap/acptap/internal/wire"
)

// do sends a request and returns the response and its body.
func do(t *testing.T, c *http.Client, method, url, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-goog-api-key", "test-key")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func streamURL(l *Listener, model string) string {
	return l.URL + "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
}

const shellDecl = `{"functionDeclarations":[{"name":"read_file","parametersJsonSchema":{"type":"object"}},{"name":"run_shell_command","parametersJsonSchema":{"type":"object","properties":{"command":{"type":"string"},"description":{"type":"string"}}}}]}`

func user(text string) string {
	b, _ := json.Marshal(text)
	return `{"role":"user","parts":[{"text":` + string(b) + `}]}`
}

// checkFraming checks that the body is SSE data events with CRLF line
// breaks only, as the real API sends them, and returns the events.
func checkFraming(t *testing.T, body []byte) []sse.Event {
	t.Helper()
	if bytes.Contains(bytes.ReplaceAll(body, []byte("\r\n"), nil), []byte("\n")) {
		t.Errorf("body has a bare LF:\n%q", body)
	}
	if !bytes.HasPrefix(body, []byte("data: {")) || !bytes.HasSuffix(body, []byte("}\r\n\r\n")) {
		t.Errorf("body does not start with `data: {` and end with `}\\r\\n\\r\\n`:\n%q", body)
	}
	r := sse.NewReader(bytes.NewReader(body))
	var evs []sse.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("sse: %v", err)
		}
		if ev.Type != "message" || !json.Valid([]byte(ev.Data)) {
			t.Errorf("event type %q data %q, want message with JSON", ev.Type, ev.Data)
		}
		evs = append(evs, ev)
	}
	if len(r.Rest()) != 0 {
		t.Errorf("bytes after the last event: %q", r.Rest())
	}
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	return evs
}

func TestScript(t *testing.T) {
	l := Start(Options{})
	defer l.Close()
	tests := []struct {
		name, body string
		step, text string
		call       *wire.ToolCall
	}{
		{
			name: "text", body: `{"contents":[` + user("Say hi") + `],"tools":[` + shellDecl + `]}`,
			step: "text", text: fakellm.Answer("Say hi"),
		},
		{
			name: "shell", body: `{"contents":[` + user("Please run the command") + `],"tools":[` + shellDecl + `]}`,
			step: "shell", text: "I will run the command.",
			call: &wire.ToolCall{Name: ShellTool, Arguments: `{"command":"` + ShellCommand + `","description":"` + ShellDescription + `"}`},
		},
		{
			// gemini-cli's first turn: its session context, then the prompt.
			name: "session context", body: `{"contents":[{"role":"user","parts":[{"text":"<session_context>\nToday's date is Tuesday, December 1, 2026. Do not run anything slowly.\n</session_context>"},{"text":"Say hi"}]}],"tools":[` + shellDecl + `]}`,
			step: "text", text: fakellm.Answer("Say hi"),
		},
		{
			name: "no shell", body: `{"contents":[` + user("run it") + `]}`,
			step: "text", text: "I have no shell tool to run it with; the tools offered are: ",
		},
		{
			name: "word run only", body: `{"contents":[` + user("truncate nothing") + `],"tools":[` + shellDecl + `]}`,
			step: "text", text: fakellm.Answer("truncate nothing"),
		},
		{
			name: "function response", body: `{"contents":[` + user("run it") +
				`,{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{"command":"x"}}}]}` +
				`,{"role":"user","parts":[{"functionResponse":{"id":"run_shell_command-1","name":"run_shell_command","response":{"output":"Command: x\nDirectory: (root)\nOutput: hello-from-gemini\nError: (none)\nExit Code: 0"}}}]}],"tools":[` + shellDecl + `]}`,
			step: "tool-answer", text: fakellm.ToolAnswer(ShellOutput, ShellOutput),
		},
		{
			name: "failed function response", body: `{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"run_shell_command","response":{"error":"Command rejected by the user."}}}]}]}`,
			step: "tool-answer", text: "The command did not print what I expected: Command rejected by the user.",
		},
		{
			name: "next speaker", body: `{"contents":[` + user("Who speaks next?") + `],"generationConfig":{"responseMimeType":"application/json"}}`,
			step: "json", text: NextSpeaker,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, l.HTTP.Client(), http.MethodPost, streamURL(l, "gemini-2.5-pro"), tt.body)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, Content-Type %q, want 200 text/event-stream; body %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			evs := checkFraming(t, body)
			for j, ev := range evs {
				var c struct {
					UsageMetadata *struct{ TotalTokenCount int }
					ModelVersion  string
					ResponseID    string
				}
				json.Unmarshal([]byte(ev.Data), &c)
				if c.UsageMetadata == nil || c.UsageMetadata.TotalTokenCount == 0 || c.ModelVersion != "gemini-2.5-pro" || len(c.ResponseID) != 23 {
					t.Errorf("chunk %d: %s\nwant usageMetadata, modelVersion gemini-2.5-pro and a 23-character responseId", j, ev.Data)
				}
			}
			m, err := wire.Reassemble(wire.Gemini, body)
			if err != nil {
				t.Fatalf("acptap's parser rejects the stream: %v\n%s", err, body)
			}
			if m.Text != tt.text {
				t.Errorf("text %q, want %q", m.Text, tt.text)
			}
			if m.StopReason != "STOP" {
				t.Errorf("stop reason %q, want STOP", m.StopReason)
			}
			if m.Usage.InputTokens == 0 || m.Usage.OutputTokens == 0 || m.Usage.TotalTokens != m.Usage.InputTokens+m.Usage.OutputTokens {
				t.Errorf("usage %+v, want input and output tokens adding up", m.Usage)
			}
			if m.Events != len(evs) || m.Model != "gemini-2.5-pro" {
				t.Errorf("events %d model %q, want %d gemini-2.5-pro", m.Events, m.Model, len(evs))
			}
			switch {
			case tt.call == nil && len(m.ToolCalls) > 0:
				t.Errorf("tool calls %+v, want none", m.ToolCalls)
			case tt.call != nil && (len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != tt.call.Name || m.ToolCalls[0].Arguments != tt.call.Arguments):
				t.Errorf("tool calls %+v, want one %s call with arguments %s", m.ToolCalls, tt.call.Name, tt.call.Arguments)
			}
			reqs := l.Requests()
			if len(reqs) != i+1 {
				t.Fatalf("%d requests kept, want %d", len(reqs), i+1)
			}
			got := reqs[i]
			if got.Step != tt.step || string(got.Body) != tt.body || got.Model != "gemini-2.5-pro" || got.Call != "streamGenerateContent" || got.RawQuery != "alt=sse" || got.Header.Get("X-Goog-Api-Key") != "test-key" {
				t.Errorf("kept request %+v\nwant step %q, the body sent, model gemini-2.5-pro, streamGenerateContent, alt=sse and the key", got, tt.step)
			}
		})
	}
}

// TestGenerateContent checks the non-streamed form: one JSON document with
// the whole answer.
func TestGenerateContent(t *testing.T) {
	l := Start(Options{Variant: "[v2] "})
	defer l.Close()
	body := `{"contents":[` + user("Say hi") + `]}`
	resp, b := do(t, l.HTTP.Client(), http.MethodPost, l.URL+"/v1beta/models/gemini-2.5-flash:generateContent?key=k", body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, Content-Type %q, want 200 JSON; body %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	m, err := wire.Reassemble(wire.Gemini, b)
	if err != nil {
		t.Fatalf("Reassemble: %v\n%s", err, b)
	}
	if want := "[v2] " + fakellm.Answer("Say hi"); m.Text != want || m.StopReason != "STOP" || m.Events != 1 || m.Model != "gemini-2.5-flash" || m.Usage.OutputTokens == 0 {
		t.Errorf("got %+v\nwant text %q, STOP, 1 event, model gemini-2.5-flash, usage", m, want)
	}
}

// TestJSONArray checks streamGenerateContent without alt=sse: a JSON
// array of the chunks.
func TestJSONArray(t *testing.T) {
	l := Start(Options{})
	defer l.Close()
	body := `{"contents":[` + user("Please run the command") + `],"tools":[` + shellDecl + `]}`
	resp, b := do(t, l.HTTP.Client(), http.MethodPost, l.URL+"/v1beta/models/gemini-2.5-pro:streamGenerateContent", body)
	var chunks []json.RawMessage
	if err := json.Unmarshal(b, &chunks); err != nil || resp.StatusCode != http.StatusOK || len(chunks) != 2 {
		t.Fatalf("status %d body %s (%v), want 200 and a JSON array of 2 chunks", resp.StatusCode, b, err)
	}
	m, err := wire.Reassemble(wire.Gemini, b)
	if err != nil || m.Events != 2 || len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != ShellTool || m.StopReason != "STOP" {
		t.Errorf("Reassemble: %+v %v, want 2 events, one %s call, STOP", m, err, ShellTool)
	}
}

func TestFreshIDs(t *testing.T) {
	l := Start(Options{})
	defer l.Close()
	body := `{"contents":[` + user("Say hi") + `]}`
	var ids []string
	for range 2 {
		_, b := do(t, l.HTTP.Client(), http.MethodPost, streamURL(l, "gemini-2.5-pro"), body)
		m, err := wire.Reassemble(wire.Gemini, b)
		if err != nil || m.ID == "" {
			t.Fatalf("Reassemble: %v, id %q\n%s", err, m.ID, b)
		}
		ids = append(ids, m.ID)
	}
	if ids[0] == ids[1] {
		t.Errorf("responseIds %q and %q, want them to differ", ids[0], ids[1])
	}
}

func TestSideEndpoints(t *testing.T) {
	l := Start(Options{})
	defer l.Close()
	c := l.HTTP.Client()

	resp, b := do(t, c, http.MethodPost, l.URL+"/v1beta/models/gemini-2.5-pro:countTokens", `{"contents":[`+user("Say hi")+`]}`)
	var ct struct{ TotalTokens int }
	if err := json.Unmarshal(b, &ct); err != nil || resp.StatusCode != http.StatusOK || ct.TotalTokens <= 0 {
		t.Errorf("countTokens: status %d body %s (%v), want 200 and totalTokens > 0", resp.StatusCode, b, err)
	}

	resp, b = do(t, c, http.MethodGet, l.URL+"/v1beta/models?key=k", "")
	var list struct {
		Models []struct {
			Name                       string
			SupportedGenerationMethods []string
		}
	}
	if err := json.Unmarshal(b, &list); err != nil || resp.StatusCode != http.StatusOK || len(list.Models) != len(Models) || list.Models[0].Name != "models/"+Models[0] {
		t.Errorf("models: status %d body %s (%v), want 200 and %d models", resp.StatusCode, b, err, len(Models))
	}

	resp, b = do(t, c, http.MethodGet, l.URL+"/v1beta/models/gemini-2.5-pro", "")
	var one struct{ Name string }
	if err := json.Unmarshal(b, &one); err != nil || resp.StatusCode != http.StatusOK || one.Name != "models/gemini-2.5-pro" {
		t.Errorf("model: status %d body %s (%v), want 200 and models/gemini-2.5-pro", resp.StatusCode, b, err)
	}

	resp, b = do(t, c, http.MethodPost, l.URL+"/v1beta/models/gemini-embedding-001:embedContent", `{"content":{"parts":[{"text":"hi"}]}}`)
	var emb struct{ Embedding struct{ Values []float64 } }
	if err := json.Unmarshal(b, &emb); err != nil || resp.StatusCode != http.StatusOK || len(emb.Embedding.Values) == 0 {
		t.Errorf("embedContent: status %d body %s (%v), want 200 and values", resp.StatusCode, b, err)
	}

	resp, b = do(t, c, http.MethodPost, l.URL+"/v1/chat/completions", `{}`)
	var e struct{ Error struct{ Code int } }
	if json.Unmarshal(b, &e); resp.StatusCode != http.StatusNotFound || e.Error.Code != http.StatusNotFound {
		t.Errorf("other path: status %d body %s, want a 404 error", resp.StatusCode, b)
	}

	var steps []string
	for _, r := range l.Requests() {
		steps = append(steps, r.Step)
	}
	if got, want := strings.Join(steps, ","), "count-tokens,models,model,embed,error"; got != want {
		t.Errorf("steps %s, want %s", got, want)
	}
}

// TestSlow checks that a "slowly" answer streams its chunks and then stalls
// until the client cancels.
func TestSlow(t *testing.T) {
	l := Start(Options{Delay: 10 * time.Millisecond})
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, streamURL(l, "gemini-2.5-pro"), strings.NewReader(`{"contents":[`+user("Answer slowly")+`]}`))
	resp, err := l.HTTP.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body)
	var text strings.Builder
	for i := range SlowChunks {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		m, err := wire.Reassemble(wire.Gemini, ev.Raw)
		if err != nil || m.StopReason != "" {
			t.Fatalf("chunk %d: %+v %v, want text and no finishReason", i, m, err)
		}
		text.WriteString(m.Text)
	}
	if got, want := text.String(), fakellm.SlowAnswer; got != want {
		t.Errorf("slow text %q, want %q", got, want)
	}
	next := make(chan error, 1)
	go func() { _, err := r.Next(); next <- err }()
	select {
	case err := <-next:
		t.Fatalf("stream went on after %d chunks: %v", SlowChunks, err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	select {
	case <-next:
	case <-time.After(5 * time.Second):
		t.Fatal("stream did not end after the client cancelled")
	}
	if reqs := l.Requests(); len(reqs) != 1 || reqs[0].Step != "slow" {
		t.Errorf("requests %+v, want one slow", reqs)
	}
}

func TestTLS(t *testing.T) {
	l, err := StartTLS(Options{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !strings.HasPrefix(l.URL, "https://127.0.0.1:") {
		t.Errorf("URL %q, want https on loopback", l.URL)
	}
	pemBytes, err := os.ReadFile(l.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("CA file %s holds no certificate", l.CAFile)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer c.CloseIdleConnections()
	for _, url := range []string{streamURL(l, "gemini-2.5-pro"), streamURL(l, "gemini-2.5-flash")} {
		resp, b := do(t, c, http.MethodPost, url, `{"contents":[`+user("Say hi")+`]}`)
		checkFraming(t, b)
		m, err := wire.Reassemble(wire.Gemini, b)
		if err != nil || resp.StatusCode != http.StatusOK || m.Text != fakellm.Answer("Say hi") {
			t.Errorf("%s: status %d, %+v %v, want 200 and the answer", url, resp.StatusCode, m, err)
		}
	}
}

// keys returns the sorted key paths of a JSON value, arrays looked into
// through their first element, such as "candidates[].content.parts[].text".
func keys(prefix string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			out[prefix+k] = true
			keys(prefix+k+".", e, out)
		}
	case []any:
		if len(v) > 0 {
			keys(strings.TrimSuffix(prefix, ".")+"[].", v[0], out)
		}
	}
}

// TestShapeOfRealCapture checks that the last chunk of a plain answer has
// the fields of the last chunk of a real capture, thinking tokens apart.
func TestShapeOfRealCapture(t *testing.T) {
	real, err := os.ReadFile("../../../testdata/wire-samples/gem_real.sse")
	if err != nil {
		t.Fatal(err)
	}
	l := Start(Options{})
	defer l.Close()
	_, fake := do(t, l.HTTP.Client(), http.MethodPost, streamURL(l, "gemini-2.5-pro"), `{"contents":[`+user("Say hi")+`]}`)
	shape := func(body []byte) map[string]bool {
		evs := checkFraming(t, body)
		var v any
		if err := json.Unmarshal([]byte(evs[len(evs)-1].Data), &v); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		keys("", v, out)
		return out
	}
	// The real API's field order, which a byte-level diff of two
	// recordings shows.
	order := []string{`"candidates"`, `"usageMetadata"`, `"modelVersion"`, `"responseId"`}
	evs := checkFraming(t, fake)
	last := -1
	for _, k := range order {
		i := strings.Index(evs[len(evs)-1].Data, k)
		if i < last {
			t.Errorf("fields out of the real order %v: %s", order, evs[len(evs)-1].Data)
			break
		}
		last = i
	}
	want, got := shape(real), shape(fake)
	delete(want, "usageMetadata.thoughtsTokenCount")
	for k := range want {
		if !got[k] {
			t.Errorf("the fake's last chunk lacks %s", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("the fake's last chunk has %s, which the real one has not", k)
		}
	}
}

// TestFaults checks that the first requests get the faults asked for, with
// the real API's error bodies, and the next one the scripted answer.
func TestFaults(t *testing.T) {
	l := Start(Options{Faults: []int{429, 503, 500}, RetryDelay: 1500 * time.Millisecond})
	defer l.Close()
	body := `{"contents":[` + user("Say hi") + `]}`
	for _, want := range []struct {
		code   int
		status string
	}{{429, "RESOURCE_EXHAUSTED"}, {503, "UNAVAILABLE"}, {500, "INTERNAL"}} {
		resp, b := do(t, l.HTTP.Client(), http.MethodPost, streamURL(l, "gemini-2.5-pro"), body)
		var e struct {
			Error struct {
				Code    int
				Status  string
				Details []struct{ RetryDelay string }
			}
		}
		if err := json.Unmarshal(b, &e); err != nil || resp.StatusCode != want.code || e.Error.Code != want.code || e.Error.Status != want.status {
			t.Errorf("status %d body %s (%v), want %d %s", resp.StatusCode, b, err, want.code, want.status)
		}
		if want.code == 429 && (len(e.Error.Details) != 1 || e.Error.Details[0].RetryDelay != "1.5s") {
			t.Errorf("429 details %+v, want a RetryInfo of 1.5s", e.Error.Details)
		}
		m, err := wire.Reassemble(wire.Gemini, b)
		if err != nil || len(m.Errors) != 1 {
			t.Errorf("Reassemble: %+v %v, want one API error", m, err)
		}
	}
	resp, b := do(t, l.HTTP.Client(), http.MethodPost, streamURL(l, "gemini-2.5-pro"), body)
	if m, err := wire.Reassemble(wire.Gemini, b); err != nil || resp.StatusCode != http.StatusOK || m.Text != fakellm.Answer("Say hi") {
		t.Errorf("after the faults: status %d, %+v %v, want 200 and the answer", resp.StatusCode, m, err)
	}
	var steps []string
	for _, r := range l.Requests() {
		steps = append(steps, r.Step)
	}
	if got, want := strings.Join(steps, ","), "fault,fault,fault,text"; got != want {
		t.Errorf("steps %s, want %s", got, want)
	}
}

// TestNoCapacity checks the 429 of a server out of capacity for the model:
// an ErrorInfo MODEL_CAPACITY_EXHAUSTED naming it, then the RetryInfo.
func TestNoCapacity(t *testing.T) {
	l := Start(Options{Faults: []int{429}, RetryDelay: 100 * time.Millisecond, NoCapacity: true})
	defer l.Close()
	resp, b := do(t, l.HTTP.Client(), http.MethodPost, streamURL(l, "gemini-2.5-flash"), `{"contents":[`+user("Say hi")+`]}`)
	var e struct {
		Error struct {
			Code    int
			Message string
			Status  string
			Details []struct {
				Type       string `json:"@type"`
				Reason     string
				Metadata   struct{ Model string }
				RetryDelay string
			}
		}
	}
	if err := json.Unmarshal(b, &e); err != nil || resp.StatusCode != 429 || e.Error.Status != "RESOURCE_EXHAUSTED" {
		t.Fatalf("status %d body %s (%v), want 429 RESOURCE_EXHAUSTED", resp.StatusCode, b, err)
	}
	if got, want := e.Error.Message, "No capacity available for model gemini-2.5-flash on the server"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	d := e.Error.Details
	if len(d) != 2 || d[0].Type != "type.googleapis.com/google.rpc.ErrorInfo" || d[0].Reason != "MODEL_CAPACITY_EXHAUSTED" || d[0].Metadata.Model != "gemini-2.5-flash" ||
		d[1].Type != "type.googleapis.com/google.rpc.RetryInfo" || d[1].RetryDelay != "0.1s" {
		t.Errorf("details %+v, want the ErrorInfo MODEL_CAPACITY_EXHAUSTED of the model, then a RetryInfo of 0.1s", d)
	}
}

package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/sse"
	"github.com/acptap/acptap/internal/testing/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// fixtures maps each body to its format. Names without a directory are the
// real captures (testkit.WireSamplesDir); those in testdata/synthetic are
// written after the APIs' documentation to cover what the captures do not.
var fixtures = map[string]Format{
	"anth_text.sse":          Anthropic,
	"anth_tool_real.sse":     Anthropic,
	"gem_real.sse":           Gemini,
	"oai_chat_text.sse":      OpenAIChat,
	"oai_chat_tool_real.sse": OpenAIChat,
	"ollama_tool.ndjson":     Ollama,
	"resp_text.sse":          OpenAIResponses,

	"synthetic/anth_error.json":         Anthropic,
	"synthetic/anth_error.sse":          Anthropic,
	"synthetic/anth_message.json":       Anthropic,
	"synthetic/anth_thinking.sse":       Anthropic,
	"synthetic/chat_completion.json":    OpenAIChat,
	"synthetic/chat_error.sse":          OpenAIChat,
	"synthetic/chat_parallel_tools.sse": OpenAIChat,
	"synthetic/gem_array.json":          Gemini,
	"synthetic/gem_error.json":          Gemini,
	"synthetic/gem_thought_tool.sse":    Gemini,
	"synthetic/ollama_chat.json":        Ollama,
	"synthetic/ollama_error.ndjson":     Ollama,
	"synthetic/ollama_generate.ndjson":  Ollama,
	"synthetic/resp_failed.sse":         OpenAIResponses,
	"synthetic/resp_incomplete.json":    OpenAIResponses,
	"synthetic/resp_tool_reasoning.sse": OpenAIResponses,
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	if !strings.Contains(name, "/") {
		return testkit.WireSample(t, name)
	}
	b, err := os.ReadFile(filepath.Join("testdata", filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFixturesListed keeps fixtures and testdata in step, so that no body
// goes untested.
func TestFixturesListed(t *testing.T) {
	for _, pattern := range []string{"*.sse", "*.ndjson"} {
		for name := range testkit.WireSamples(t, pattern) {
			if _, ok := fixtures[name]; !ok {
				t.Errorf("wire sample %s is not in fixtures", name)
			}
		}
	}
	paths, err := filepath.Glob("testdata/synthetic/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		name := "synthetic/" + filepath.Base(p)
		if _, ok := fixtures[name]; !ok {
			t.Errorf("%s is not in fixtures", name)
		}
	}
}

func TestGolden(t *testing.T) {
	for name, f := range fixtures {
		t.Run(name, func(t *testing.T) {
			m, err := Reassemble(f, readFixture(t, name))
			if err != nil {
				t.Fatalf("Reassemble: %v", err)
			}
			got, err := json.MarshalIndent(m, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "golden", filepath.Base(name)+".json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Message differs from %s (run go test -update to accept):\ngot\n%s\nwant\n%s", golden, got, want)
			}
		})
	}
}

// wantCall is a ToolCall with its arguments decoded, to compare arguments as
// JSON values rather than texts. Arguments that are not JSON stay a string.
type wantCall struct {
	ID, Name string
	Args     any
}

// TestFacts checks the facts that matter in each fixture, independently of
// the golden files.
func TestFacts(t *testing.T) {
	tests := []struct {
		name      string
		model, id string
		text      string
		reasoning string
		calls     []wantCall
		usage     Usage
		stop      string
		events    int
		errors    []string
	}{
		{
			name:  "anth_text.sse",
			model: "claude-sonnet-4-20250514", id: "msg_01R8",
			text:   "Olá!",
			usage:  Usage{InputTokens: 16, OutputTokens: 38, TotalTokens: 54},
			stop:   "end_turn",
			events: 7,
		},
		{
			name:  "anth_tool_real.sse",
			model: "claude-sonnet-4-20250514", id: "msg_01Kgk6kMJLdJJC26r3uFwpRU",
			text:   "I'll get the weather information for Florence, Italy for you.",
			calls:  []wantCall{{"toolu_01N2eM4V43kGCDkq2Lw7ChWQ", "weather", map[string]any{"location": "Florence,Italy"}}},
			usage:  Usage{InputTokens: 394, OutputTokens: 67, TotalTokens: 461},
			stop:   "tool_use",
			events: 16,
		},
		{
			name:  "gem_real.sse",
			model: "gemini-2.5-pro", id: "aQCzaYSIIp3Uz7IP4L7z4Qk",
			text: "Of course!\n\nThe most common way to say \"hi\" in Portuguese is:\n\n**Oi**\n\n" +
				"You can also say:\n\n**Olá** (This is a bit more like \"Hello\" and can be used in any situation.)",
			// The last chunk's usage, with the thoughts counted as output.
			usage:  Usage{InputTokens: 11, OutputTokens: 49 + 603, TotalTokens: 663, ReasoningTokens: 603},
			stop:   "STOP",
			events: 3,
		},
		{
			name:  "oai_chat_text.sse",
			model: "gpt-4o-mini-2024-07-18", id: "chatcmpl-A1",
			text:   "Olá!",
			usage:  Usage{InputTokens: 20, OutputTokens: 2, TotalTokens: 22},
			stop:   "stop",
			events: 5,
		},
		{
			name:  "oai_chat_tool_real.sse",
			model: "gpt-4o-mini-2024-07-18", id: "chatcmpl-DuLdRJdgsTDkaWQbovITznUPevjfI",
			calls:  []wantCall{{"call_qLFv8oQOs68qRuEVmG8TuEJp", "weather", map[string]any{"location": "Florence,Italy"}}},
			usage:  Usage{InputTokens: 61, OutputTokens: 16, TotalTokens: 77},
			stop:   "tool_calls",
			events: 12,
		},
		{
			name:   "ollama_tool.ndjson",
			model:  "qwen3",
			calls:  []wantCall{{"call_k3j2h1g0", "get_weather", map[string]any{"city": "Tokyo"}}},
			usage:  Usage{InputTokens: 169, OutputTokens: 15, TotalTokens: 184},
			stop:   "stop",
			events: 2,
		},
		{
			name:  "resp_text.sse",
			model: "gpt-4o-mini-2024-07-18", id: "resp_0a6fc3349e38704d016a3c120ac63c819e941b6f18b7170ff4",
			text:   `Hi in Portuguese is "Oi!"`,
			usage:  Usage{InputTokens: 20, OutputTokens: 8, TotalTokens: 28},
			stop:   "completed",
			events: 15,
		},
		{
			name:   "synthetic/anth_error.json",
			errors: []string{"rate_limit_error: Number of request tokens has exceeded your per-minute rate limit"},
			events: 1,
		},
		{
			name:  "synthetic/anth_error.sse",
			model: "claude-sonnet-4-20250514", id: "msg_E",
			usage:  Usage{InputTokens: 5, OutputTokens: 1, TotalTokens: 6},
			errors: []string{"overloaded_error: Overloaded"},
			events: 2,
		},
		{
			name:  "synthetic/anth_message.json",
			model: "claude-sonnet-4-20250514", id: "msg_J",
			text:      "Checking.",
			reasoning: "Weather needs a tool.",
			calls:     []wantCall{{"toolu_J", "weather", map[string]any{"location": "Rome"}}},
			usage:     Usage{InputTokens: 20, OutputTokens: 44, TotalTokens: 64},
			stop:      "tool_use",
			events:    1,
		},
		{
			name:  "synthetic/anth_thinking.sse",
			model: "claude-opus-4-1", id: "msg_T",
			text:      "It is 4.",
			reasoning: "Let me think step by step.",
			calls:     []wantCall{{"toolu_N", "now", map[string]any{}}},
			// Cache reads and writes count as input.
			usage:  Usage{InputTokens: 12 + 100 + 2000, OutputTokens: 57, TotalTokens: 2112 + 57, CachedTokens: 2000},
			stop:   "tool_use",
			events: 15,
		},
		{
			name:  "synthetic/chat_completion.json",
			model: "gpt-4o-mini-2024-07-18", id: "chatcmpl-J",
			calls: []wantCall{
				{"call_x", "weather", map[string]any{"location": "Paris"}},
				{"call_y", "time", map[string]any{}},
			},
			usage:  Usage{InputTokens: 50, OutputTokens: 30, TotalTokens: 80},
			stop:   "tool_calls",
			events: 1,
		},
		{
			name:  "synthetic/chat_error.sse",
			model: "gpt-4o", id: "chatcmpl-E",
			text:   "Par",
			errors: []string{"server_error: The server had an error processing your request."},
			events: 2,
		},
		{
			name:  "synthetic/chat_parallel_tools.sse",
			model: "deepseek-reasoner", id: "chatcmpl-P",
			text:      "Reading both.",
			reasoning: "The user wants two files.",
			calls: []wantCall{
				{"call_1", "read", map[string]any{"path": "a.go"}},
				{"call_2", "read", map[string]any{"path": "b.go"}},
			},
			usage:  Usage{InputTokens: 100, OutputTokens: 40, TotalTokens: 140, CachedTokens: 64, ReasoningTokens: 25},
			stop:   "tool_calls",
			events: 9,
		},
		{
			name:  "synthetic/gem_array.json",
			model: "gemini-2.0-flash", id: "A1",
			text:   "Hello there",
			usage:  Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5},
			stop:   "MAX_TOKENS",
			events: 2,
		},
		{
			name:   "synthetic/gem_error.json",
			errors: []string{"RESOURCE_EXHAUSTED: Resource has been exhausted (e.g. check quota)."},
			events: 1,
		},
		{
			name:  "synthetic/gem_thought_tool.sse",
			model: "gemini-2.5-flash", id: "G1",
			text:      "Reading it now.",
			reasoning: "The user asks for a file.",
			calls: []wantCall{
				{"", "read_file", map[string]any{"path": "a.go", "limit": float64(10)}},
				{"", "list_dir", map[string]any{}},
			},
			usage:  Usage{InputTokens: 40, OutputTokens: 18 + 20, TotalTokens: 78, CachedTokens: 32, ReasoningTokens: 20},
			stop:   "STOP",
			events: 3,
		},
		{
			name:      "synthetic/ollama_chat.json",
			model:     "llama3.2",
			text:      "Sure.",
			reasoning: "Easy.",
			usage:     Usage{InputTokens: 26, OutputTokens: 290, TotalTokens: 316},
			stop:      "length",
			events:    1,
		},
		{
			name:   "synthetic/ollama_error.ndjson",
			model:  "llama3.2",
			text:   "Hi",
			errors: []string{"model runner has unexpectedly stopped"},
			events: 2,
		},
		{
			name:      "synthetic/ollama_generate.ndjson",
			model:     "deepseek-r1",
			text:      "Three.",
			reasoning: "Count the letters.",
			usage:     Usage{InputTokens: 9, OutputTokens: 6, TotalTokens: 15},
			stop:      "stop",
			events:    5,
		},
		{
			name:  "synthetic/resp_failed.sse",
			model: "gpt-4.1", id: "resp_3",
			errors: []string{
				"server_error: The server had an error while processing your request.",
				"server_error: The server had an error while processing your request.",
			},
			stop:   "failed",
			events: 3,
		},
		{
			name:  "synthetic/resp_incomplete.json",
			model: "o4-mini", id: "resp_4",
			text:      "The answer is",
			reasoning: "Thinking about it.",
			calls:     []wantCall{{"call_9", "lookup", map[string]any{"q": "x"}}},
			usage:     Usage{InputTokens: 30, OutputTokens: 16, TotalTokens: 46, ReasoningTokens: 12},
			stop:      "max_output_tokens",
			events:    1,
		},
		{
			name:  "synthetic/resp_tool_reasoning.sse",
			model: "gpt-5-codex", id: "resp_2",
			text: "Let me read it.",
			// Summary parts are separate paragraphs.
			reasoning: "**Reading the file**\n\nI need to look at main.go.",
			calls: []wantCall{
				{"call_A", "shell", map[string]any{"command": []any{"cat", "main.go"}}},
				{"call_B", "apply_patch", "*** Begin Patch\n*** End Patch"},
			},
			usage:  Usage{InputTokens: 1200, OutputTokens: 90, TotalTokens: 1290, CachedTokens: 1024, ReasoningTokens: 64},
			stop:   "completed",
			events: 21,
		},
	}
	seen := make(map[string]bool)
	for _, tt := range tests {
		seen[tt.name] = true
		t.Run(tt.name, func(t *testing.T) {
			f, ok := fixtures[tt.name]
			if !ok {
				t.Fatalf("no fixture %s", tt.name)
			}
			m, err := Reassemble(f, readFixture(t, tt.name))
			if err != nil {
				t.Fatalf("Reassemble: %v", err)
			}
			if m.Model != tt.model || m.ID != tt.id {
				t.Errorf("model, id = %q, %q; want %q, %q", m.Model, m.ID, tt.model, tt.id)
			}
			if m.Text != tt.text {
				t.Errorf("Text = %q, want %q", m.Text, tt.text)
			}
			if m.Reasoning != tt.reasoning {
				t.Errorf("Reasoning = %q, want %q", m.Reasoning, tt.reasoning)
			}
			var calls []wantCall
			for _, tc := range m.ToolCalls {
				c := wantCall{ID: tc.ID, Name: tc.Name}
				if err := json.Unmarshal([]byte(tc.Arguments), &c.Args); err != nil {
					// Free text, as custom tools take; it then
					// differs from any JSON value wanted.
					c.Args = tc.Arguments
				}
				calls = append(calls, c)
			}
			if !reflect.DeepEqual(calls, tt.calls) {
				t.Errorf("tool calls:\ngot  %#v\nwant %#v", calls, tt.calls)
			}
			if m.Usage != tt.usage {
				t.Errorf("Usage = %+v, want %+v", m.Usage, tt.usage)
			}
			if m.StopReason != tt.stop {
				t.Errorf("StopReason = %q, want %q", m.StopReason, tt.stop)
			}
			if m.Events != tt.events {
				t.Errorf("Events = %d, want %d", m.Events, tt.events)
			}
			if !reflect.DeepEqual(m.Errors, tt.errors) {
				t.Errorf("Errors = %q, want %q", m.Errors, tt.errors)
			}
		})
	}
	for name := range fixtures {
		if !seen[name] {
			t.Errorf("no facts for fixture %s", name)
		}
	}
}

// TestCutStreams reassembles every prefix of every stream fixture: the text
// so far is a prefix of the whole text, a cut at an event boundary is no
// error, and a cut inside an event is ErrTruncated, never ErrMalformed.
func TestCutStreams(t *testing.T) {
	for name, f := range fixtures {
		if strings.HasSuffix(name, ".json") {
			continue
		}
		body := readFixture(t, name)
		full, err := Reassemble(f, body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		bounds := boundaries(t, f, body)
		for k := 1; k < len(body); k++ {
			if !nearLineBreak(body, k) && k%7 != 0 {
				// Cuts inside a line all come to the same; test
				// some, and every cut near a line break.
				continue
			}
			m, err := Reassemble(f, body[:k])
			if !strings.HasPrefix(full.Text, m.Text) || !strings.HasPrefix(full.Reasoning, m.Reasoning) {
				t.Fatalf("%s cut at %d: text %q, reasoning %q: not prefixes of the whole", name, k, m.Text, m.Reasoning)
			}
			switch {
			case bounds[k]:
				if err != nil {
					t.Fatalf("%s cut at event end %d: %v", name, k, err)
				}
			case err == nil:
				// A cut between events or in a line that is not data.
			case errors.Is(err, ErrMalformed) || !errors.Is(err, ErrTruncated):
				t.Fatalf("%s cut at %d: error %v, want only ErrTruncated", name, k, err)
			}
		}
	}
}

// nearLineBreak reports whether a cut at k is within two bytes of a line
// break of body.
func nearLineBreak(body []byte, k int) bool {
	for i := max(0, k-2); i < min(len(body), k+2); i++ {
		if body[i] == '\n' || body[i] == '\r' {
			return true
		}
	}
	return false
}

// boundaries returns the offsets in body at which an event ends.
func boundaries(t *testing.T, f Format, body []byte) map[int]bool {
	t.Helper()
	b := make(map[int]bool)
	if f == Ollama {
		for i, c := range body {
			if c == '\n' {
				b[i+1] = true
			}
		}
		return b
	}
	var s sse.Scanner
	for _, e := range s.Feed(body) {
		b[e] = true
	}
	return b
}

func TestMalformedEvent(t *testing.T) {
	body := readFixture(t, "anth_tool_real.sse")
	// Break the JSON of the fourth event, the first text delta.
	i := bytes.Index(body, []byte(`"I'll get`))
	bad := bytes.Clone(body)
	bad[i] = '?'
	m, err := Reassemble(Anthropic, bad)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "event 4") {
		t.Fatalf("error = %v, want ErrMalformed naming event 4", err)
	}
	if want := " for Florence, Italy for you."; m.Text != want {
		t.Errorf("Text = %q, want the rest of the text %q", m.Text, want)
	}
	if len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != "weather" {
		t.Errorf("ToolCalls = %+v, want the weather call", m.ToolCalls)
	}

	_, err = Reassemble(OpenAIChat, []byte("<html>Bad Gateway</html>\n"))
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("Reassemble of HTML: error %v, want ErrMalformed", err)
	}
	_, err = Reassemble(Gemini, []byte(`{"candidates": 3}`))
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("Reassemble of a bad JSON body: error %v, want ErrMalformed", err)
	}
	_, err = Reassemble(Ollama, []byte("{\"done\":false}\nnot json\n{\"done\":true}\n"))
	if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrTruncated) {
		t.Errorf("Reassemble of NDJSON with junk: error %v, want ErrMalformed", err)
	}
}

func TestEmptyBody(t *testing.T) {
	for f := OpenAIChat; f <= Ollama; f++ {
		m, err := Reassemble(f, []byte(" \r\n"))
		if err != nil || !reflect.DeepEqual(m, Message{}) {
			t.Errorf("Reassemble(%v, blank) = %+v, %v; want an empty Message", f, m, err)
		}
	}
}

func TestUnknownFormat(t *testing.T) {
	for _, f := range []Format{Unknown, Ollama + 1} {
		if _, err := Reassemble(f, []byte("data: {}\n\n")); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("Reassemble(%v) error = %v, want ErrUnknownFormat", f, err)
		}
	}
}

func TestString(t *testing.T) {
	want := map[Format]string{
		Unknown:         "unknown",
		OpenAIChat:      "openai-chat",
		OpenAIResponses: "openai-responses",
		Anthropic:       "anthropic",
		Gemini:          "gemini",
		Ollama:          "ollama",
		Format(200):     "format(200)",
	}
	for f, w := range want {
		if got := f.String(); got != w {
			t.Errorf("Format(%d).String() = %q, want %q", uint8(f), got, w)
		}
	}
}

func TestDetect(t *testing.T) {
	sseHeader := http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}
	tests := []struct {
		method, url string
		header      http.Header
		want        Format
	}{
		{"POST", "https://api.openai.com/v1/chat/completions", sseHeader, OpenAIChat},
		{"POST", "/v1/chat/completions", http.Header{"Content-Type": {"application/json"}}, OpenAIChat},
		{"POST", "https://x.openai.azure.com/openai/deployments/gpt4/chat/completions?api-version=2024-10-21", nil, OpenAIChat},
		{"POST", "https://api.openai.com/v1/responses", sseHeader, OpenAIResponses},
		{"POST", "http://127.0.0.1:9999/backend-api/codex/responses/", nil, OpenAIResponses},
		{"POST", "https://api.anthropic.com/v1/messages?beta=true", sseHeader, Anthropic},
		{"POST", "https://us-east5-aiplatform.googleapis.com/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4:streamRawPredict", sseHeader, Anthropic},
		{"POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", sseHeader, Gemini},
		{"POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent", http.Header{"Content-Type": {"application/json; charset=UTF-8"}}, Gemini},
		{"POST", "http://localhost:11434/api/chat", http.Header{"Content-Type": {"application/x-ndjson"}}, Ollama},
		{"POST", "http://localhost:11434/api/generate", http.Header{"Content-Type": {"application/json; charset=utf-8"}}, Ollama},
		// A Go server that sets no Content-Type sends text/plain.
		{"POST", "/v1/chat/completions", http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, OpenAIChat},
		{"POST", "/v1/problem/messages", http.Header{"Content-Type": {"application/problem+json"}}, Anthropic},

		{"GET", "https://api.openai.com/v1/responses", nil, Unknown},
		{"GET", "https://api.openai.com/v1/models", nil, Unknown},
		{"POST", "https://api.openai.com/v1/embeddings", nil, Unknown},
		{"POST", "https://api.anthropic.com/v1/messages/count_tokens", nil, Unknown},
		{"POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:countTokens", nil, Unknown},
		{"POST", "https://us-east5-aiplatform.googleapis.com/v1/projects/p/publishers/meta/models/llama:rawPredict", nil, Unknown},
		{"POST", "https://api.openai.com/v1/chat/completions", http.Header{"Content-Type": {"text/html"}}, Unknown},
		{"POST", "https://api.openai.com/v1/chat/completions", http.Header{"Content-Type": {"bogus;;"}}, Unknown},
		{"POST", "", nil, Unknown},
	}
	for _, tt := range tests {
		if got := Detect(tt.method, tt.url, tt.header); got != tt.want {
			t.Errorf("Detect(%q, %q, %v) = %v, want %v", tt.method, tt.url, tt.header, got, tt.want)
		}
	}
}

func TestRequestInfo(t *testing.T) {
	tests := []struct {
		f          Format
		url, body  string
		model      string
		wantStream bool
	}{
		{OpenAIChat, "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"messages":[]}`, "gpt-4o", true},
		{OpenAIChat, "/v1/chat/completions", `{"messages":[],"model":"gpt-4o"}`, "gpt-4o", false},
		{OpenAIResponses, "/v1/responses", `{"model":"gpt-5-codex","stream":true}`, "gpt-5-codex", true},
		{Anthropic, "/v1/messages", `{"model":"claude-sonnet-4-20250514","stream":false}`, "claude-sonnet-4-20250514", false},
		{Anthropic, "/v1/projects/p/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict", `{"anthropic_version":"vertex-2023-10-16"}`, "claude-sonnet-4@20250514", true},
		{Gemini, "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", `{"contents":[]}`, "gemini-2.5-pro", true},
		{Gemini, "/v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[]}`, "gemini-2.5-flash", false},
		{Ollama, "/api/chat", `{"model":"qwen3","messages":[]}`, "qwen3", true},
		{Ollama, "/api/generate", `{"model":"qwen3","stream":false}`, "qwen3", false},
		{Unknown, "/v1/whatever", `{"model":"m","stream":true}`, "m", true},
		{OpenAIChat, "/v1/chat/completions", `not json`, "", false},
		{OpenAIChat, "/v1/chat/completions", `{"model":7,"stream":"yes"}`, "", false},
	}
	for _, tt := range tests {
		model, stream := RequestInfo(tt.f, tt.url, []byte(tt.body))
		if model != tt.model || stream != tt.wantStream {
			t.Errorf("RequestInfo(%v, %q, %s) = %q, %v; want %q, %v", tt.f, tt.url, tt.body, model, stream, tt.model, tt.wantStream)
		}
	}
}

func FuzzReassemble(f *testing.F) {
	for name := range fixtures {
		f.Add(readFixture(f, name))
	}
	f.Add([]byte("data: [DONE]\n\ndata: {\"error\":\"x\"}\n\n"))
	f.Add([]byte(`[{"error":{"code":1}},{"candidates":[{"content":{"parts":[{"functionCall":{"args":[1]}}]}}]}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var events int
		r := sse.NewReader(bytes.NewReader(body))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
			events++
		}
		for format := OpenAIChat; format <= Ollama; format++ {
			m, err := Reassemble(format, body)
			if errors.Is(err, ErrUnknownFormat) {
				t.Fatalf("Reassemble(%v): %v", format, err)
			}
			again, err2 := Reassemble(format, body)
			if !reflect.DeepEqual(m, again) || (err == nil) != (err2 == nil) {
				t.Fatalf("Reassemble(%v) differs between two runs", format)
			}
			b := trimSpace(body)
			if format != Ollama && len(b) > 0 && b[0] != '{' && b[0] != '[' && m.Events != events {
				t.Fatalf("Reassemble(%v): Events = %d, but the stream has %d", format, m.Events, events)
			}
		}
	})
}

func TestLLMRequest(t *testing.T) {
	tests := []struct {
		method, url string
		want        bool
	}{
		{"POST", "https://api.openai.com/v1/chat/completions", true},
		{"POST", "https://api.openai.com/v1/completions", true},
		{"POST", "https://api.openai.com/v1/responses", true},
		{"POST", "https://api.anthropic.com/v1/messages?beta=true", true},
		{"POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", true},
		{"POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent", true},
		{"POST", "http://localhost:11434/api/chat", true},
		{"POST", "http://localhost:11434/api/generate", true},
		{"POST", "https://us-east5-aiplatform.googleapis.com/v1/projects/p/publishers/meta/models/llama:rawPredict", true},
		{"POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1:0/invoke-with-response-stream", true},
		{"POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.claude/converse-stream", true},
		{"POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/meta.llama3/converse", true},
		{"POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/meta.llama3/invoke", true},

		{"POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/invoke", false},
		{"GET", "https://api.openai.com/v1/chat/completions", false},
		{"GET", "https://api.openai.com/v1/responses/resp_123", false},
		{"GET", "https://api.openai.com/v1/models", false},
		{"POST", "https://api.openai.com/v1/embeddings", false},
		{"POST", "https://api.anthropic.com/v1/messages/count_tokens", false},
		{"POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:countTokens", false},
		{"POST", "https://generativelanguage.googleapis.com/v1beta/models/text-embedding-004:embedContent", false},
		{"HEAD", "https://api.anthropic.com/", false},
		{"GET", "https://registry.npmjs.org/left-pad", false},
		{"POST", "https://telemetry.example/v1/events", false},
		{"GET", "http://127.0.0.1:4096/session", false},
		{"POST", "", false},
	}
	for _, tt := range tests {
		if got := LLMRequest(tt.method, tt.url); got != tt.want {
			t.Errorf("LLMRequest(%q, %q) = %v, want %v", tt.method, tt.url, got, tt.want)
		}
	}
}

// TestRequestFormat: the request alone gives the format that Detect gives
// with an API's response headers.
func TestRequestFormat(t *testing.T) {
	for _, tt := range []struct {
		method, url string
		want        Format
	}{
		{"POST", "https://api.openai.com/v1/chat/completions", OpenAIChat},
		{"POST", "https://api.openai.com/v1/responses", OpenAIResponses},
		{"POST", "https://api.anthropic.com/v1/messages", Anthropic},
		{"POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", Gemini},
		{"POST", "http://localhost:11434/api/generate", Ollama},
		{"POST", "https://api.openai.com/v1/completions", Unknown},
		{"GET", "https://api.openai.com/v1/chat/completions", Unknown},
	} {
		if got := RequestFormat(tt.method, tt.url); got != tt.want {
			t.Errorf("RequestFormat(%q, %q) = %v, want %v", tt.method, tt.url, got, tt.want)
		}
		if tt.want != Unknown {
			if got := Detect(tt.method, tt.url, http.Header{"Content-Type": {"text/event-stream"}}); got != tt.want {
				t.Errorf("Detect(%q, %q) = %v, want RequestFormat's %v", tt.method, tt.url, got, tt.want)
			}
		}
	}
}

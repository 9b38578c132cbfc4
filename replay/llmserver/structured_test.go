package llmserver

import "testing"

func TestStructuredOutput(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       bool
	}{
		{"anthropic json_schema", `{"model":"m","output_config":{"effort":"medium","format":{"type":"json_schema","schema":{}}}}`, true},
		{"anthropic effort only", `{"model":"m","output_config":{"effort":"medium"}}`, false},
		{"openai chat json_schema", `{"model":"m","response_format":{"type":"json_schema"}}`, true},
		{"openai chat json_object", `{"model":"m","response_format":{"type":"json_object"}}`, true},
		{"openai chat text", `{"model":"m","response_format":{"type":"text"}}`, false},
		{"responses json_schema", `{"model":"m","text":{"format":{"type":"json_schema"}}}`, true},
		{"responses text", `{"model":"m","text":{"format":{"type":"text"},"verbosity":"low"}}`, false},
		{"gemini mime", `{"generationConfig":{"responseMimeType":"application/json"}}`, true},
		{"gemini schema", `{"generationConfig":{"responseJsonSchema":{"type":"object"}}}`, true},
		{"gemini plain", `{"generationConfig":{"temperature":0}}`, false},
		{"ollama format", `{"model":"m","format":"json"}`, true},
		{"ollama no format", `{"model":"m","format":""}`, false},
		{"a turn", `{"model":"m","messages":[],"tools":[{"name":"Bash"}],"stream":true}`, false},
		{"not JSON", `model=m`, false},
		{"odd types", `{"model":"m","text":"hello"}`, false},
		{"key in other case", `{"model":"m","FORMAT":"json"}`, true},
		{"escaped key", `{"model":"m","\u0066ormat":"json"}`, true},
		{"invalid after the member", `{"format":"json",`, false},
		{"text after the object", `{"format":"json"} x`, false},
		{"not an object", `["format","json"]`, false},
	} {
		if got := structuredOutput([]byte(tt.body)); got != tt.want {
			t.Errorf("%s: structuredOutput(%s) = %v, want %v", tt.name, tt.body, got, tt.want)
		}
	}
}

package llmserver

import (
	"testing"

	"github.com/acptap/acptap/internal/wire"
)

// requestModel must read the model as wire.RequestInfo does, body and
// URL, for every format.
func TestRequestModelAsRequestInfo(t *testing.T) {
	bodies := []string{
		``, `null`, `[]`, `"model"`, `{}`, `{"model":"gpt-5"}`, `{"model":"gpt-5","messages":[{"model":"inner"}]}`,
		`{"Model":"a"}`, `{"MODEL":"a","model":"b"}`, `{"model":"b","MODEL":"a"}`, `{"model":"a","Model":1}`,
		`{"model":null}`, `{"model":7}`, `{"mod\u0065l":"escaped"}`, `{"model":"\u00e9t\u00e9"}`, `{"model":"a"`,
		`{"model":"a"} x`, "{\"model\":\"\xff\"}", ` { "model" : "spaced" } `, `{"modelx":"a","xmodel":"b"}`,
		`{"messages":"{\"model\":\"in a string\"}","model":"outer"}`,
	}
	urls := []string{
		"http://h/v1/chat/completions",
		"http://h/v1/messages",
		"http://h/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
		"http://h/v1/projects/p/locations/l/publishers/anthropic/models/claude-x:streamRawPredict",
		"http://h/api/chat",
	}
	for _, u := range urls {
		f := wire.Detect("POST", u, nil)
		for _, b := range bodies {
			want, _ := wire.RequestInfo(f, u, []byte(b))
			if got := requestModel(f, u, []byte(b)); got != want {
				t.Errorf("requestModel(%s, %q) = %q, want %q", u, b, got, want)
			}
		}
	}
}

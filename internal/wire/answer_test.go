package wire

import (
	"net/http"
	"slices"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
)

func TestSaid(t *testing.T) {
	m := &Message{Reasoning: "think", Text: "a \"quoted\" answer that is long", ToolCalls: []ToolCall{{Name: "read", Arguments: `{"path":"/a/b/c/d"}`}}}
	got := m.Said(12)
	want := []Said{{"reasoning", `"think"`}, {"text", `"a \"quoted\" …"`}, {"tool", `read{"path":"/a…`}}
	if !slices.Equal(got, want) {
		t.Errorf("Said(12) = %q, want %q", got, want)
	}
	if got := (&Message{}).Said(10); got != nil {
		t.Errorf("an empty message says %q", got)
	}
}

func TestAnswer(t *testing.T) {
	x := &exchange.Exchange{
		Method: "POST", URL: "https://api.openai.com/v1/chat/completions", Status: 200,
		ResponseHeaders: http.Header{"Content-Type": {"application/json"}},
		Chunks:          []exchange.Chunk{{Data: []byte(`{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)}},
	}
	f, m := Answer(x)
	if f != OpenAIChat || m == nil || m.Text != "hi" {
		t.Errorf("Answer = %v, %+v; want openai-chat saying hi", f, m)
	}
	x.Status = 0
	if _, m := Answer(x); m != nil {
		t.Errorf("an exchange without a response has the answer %+v", m)
	}
	x.Status, x.ResponseHeaders = 502, http.Header{"Content-Type": {"text/html"}}
	if f, m := Answer(x); f != Unknown || m != nil {
		t.Errorf("a gateway's HTML page reassembles as %v, %+v", f, m)
	}
}

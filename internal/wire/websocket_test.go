package wire

import (
	"bytes"
	"testing"

	"github.com/acptap/acptap/internal/sse"
	"github.com/acptap/acptap/internal/testing/testkit"
)

// TestWebSocket: the Responses API's WebSocket mode is OpenAIResponses, an
// LLM request; its messages, each an event of the event stream, joined
// back to back, reassemble as the stream does; its response ends at
// response.completed.
func TestWebSocket(t *testing.T) {
	for _, c := range []struct {
		method, url string
		want        Format
	}{
		{"GET", "wss://api.openai.com/v1/responses", OpenAIResponses},
		{"GET", "ws://127.0.0.1:9/SECRET/v1/responses", OpenAIResponses},
		{"GET", "https://api.openai.com/v1/responses", Unknown},
		{"GET", "wss://api.openai.com/v1/realtime", Unknown},
	} {
		if got := RequestFormat(c.method, c.url); got != c.want {
			t.Errorf("RequestFormat(%s %s) = %v, want %v", c.method, c.url, got, c.want)
		}
	}
	if !LLMRequest("GET", "wss://api.openai.com/v1/responses") {
		t.Errorf("a Responses WebSocket is not an LLM request")
	}
	stream := testkit.WireSample(t, "resp_text.sse")
	want, err := Reassemble(OpenAIResponses, stream)
	if err != nil {
		t.Fatal(err)
	}
	var messages []byte
	r := sse.NewReader(bytes.NewReader(stream))
	last := ""
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		if ev.Data == "" || ev.Data == "[DONE]" {
			continue
		}
		messages = append(messages, ev.Data...)
		last = ev.Data
	}
	got, err := Reassemble(OpenAIResponses, messages)
	if err != nil || got.Text != want.Text || got.StopReason != want.StopReason || got.Text == "" {
		t.Errorf("the messages reassemble to %q (%q, %v); the stream to %q (%q)", got.Text, got.StopReason, err, want.Text, want.StopReason)
	}
	if !WebSocketTurnEnd(OpenAIResponses, []byte(last)) {
		t.Errorf("the last event %s does not end the turn", last)
	}
	for _, m := range []string{`{"type":"response.output_text.delta","delta":"x"}`, `not json`} {
		if WebSocketTurnEnd(OpenAIResponses, []byte(m)) {
			t.Errorf("%s ends the turn", m)
		}
	}
	if WebSocketTurnEnd(Unknown, []byte(`{"type":"response.completed"}`)) {
		t.Errorf("a message of an unknown format ends the turn")
	}
}

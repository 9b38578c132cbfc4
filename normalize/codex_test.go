package normalize

import (
	"net/http"
	"testing"
)

// codex-acp sends available_commands_update from a background task: in
// one run it comes between two chunks of the answer, in the next after the
// turn's end. Two such runs must compare equal, and a changed update must
// still show.
func TestStreamStateUpdatesFloat(t *testing.T) {
	acu := func(name string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"01a22922-ae97-7ba0-8bcd-ad27ae779924","update":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"` + name + `","description":"Review my current changes"}]}}}`
	}
	chunk := func(s string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"01a22922-ae97-7ba0-8bcd-ad27ae779924","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + s + `"}}}}`
	}
	result := `{"jsonrpc":"2.0","result":{"stopReason":"end_turn"},"id":2}`
	stream := func(lines ...string) []any {
		frames := make([]Frame, len(lines))
		for i, l := range lines {
			frames[i] = Frame{Side: Agent, Line: []byte(l)}
		}
		var out []any
		for _, m := range New(Options{}).Stream(frames) {
			v, _ := decode(m)
			out = append(out, v)
		}
		return out
	}
	recorded := stream(chunk("Hello "), acu("review"), chunk("world"), result)
	if path, a, b, differ := FirstDifference(recorded, stream(chunk("Hello "), chunk("world"), result, acu("review"))); differ {
		t.Errorf("an available_commands_update sent later differs at %s: %v vs %v, want equal", path, a, b)
	}
	if _, _, _, differ := FirstDifference(recorded, stream(chunk("Hello "), chunk("world"), result, acu("init"))); !differ {
		t.Errorf("a changed available_commands_update compares equal, want a difference")
	}
	if _, _, _, differ := FirstDifference(recorded, stream(chunk("Hello "), chunk("world"), result)); !differ {
		t.Errorf("a missing available_commands_update compares equal, want a difference")
	}
}

// Codex's X-Codex-Turn-Metadata header holds turn_started_at_unix_ms.
func TestRequestUnixMillis(t *testing.T) {
	req := func(turn, ms string) any {
		h := http.Header{"X-Codex-Turn-Metadata": {`{"request_kind":"turn","turn_id":"` + turn + `","turn_started_at_unix_ms":` + ms + `}`}}
		return New(Options{}).Request("POST", "https://127.0.0.1:8443/v1/responses", h, []byte(`{"model":"gpt-5.2-codex"}`))
	}
	a := req("01a22922-aeb9-7700-a66f-5b98997181ce", "1795986468539")
	b := req("01a22922-b1c3-7cb3-a2d9-403895811f7e", "1795986469316")
	if path, av, bv, differ := FirstDifference(a, b); differ {
		t.Errorf("two turns' requests differ at %s: %v vs %v, want equal", path, av, bv)
	}
}

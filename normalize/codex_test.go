package normalize

import (
	"net/http"
	"testing"

	"github.com/acptap/acptap/lane"
)

// codex-acp sends available_commands_update from a background task: in
// one run it comes between two chunks of the answer, in the next after the
// turn's end. Two such runs must compare equal, and a changed or missing
// update must still show.
func TestStreamStateUpdatesFloat(t *testing.T) {
	acu := func(name string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"01a22922-ae97-7ba0-8bcd-ad27ae779924","update":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"` + name + `","description":"Review my current changes"}]}}}`
	}
	chunk := func(s string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"01a22922-ae97-7ba0-8bcd-ad27ae779924","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + s + `"}}}}`
	}
	result := `{"jsonrpc":"2.0","result":{"stopReason":"end_turn"},"id":2}`
	transcript := func(lines ...string) *Transcript {
		frames := make([]lane.Line, len(lines))
		for i, l := range lines {
			frames[i] = lane.Line{Lane: lane.Agent, Data: []byte(l)}
		}
		return New(Options{}).Transcript(frames)
	}
	recorded := transcript(chunk("Hello "), acu("review"), chunk("world"), result)
	if d := Compare(recorded, transcript(chunk("Hello "), chunk("world"), result, acu("review"))).Diff; d != nil {
		t.Errorf("an available_commands_update sent after the answer differs: %+v, want equal", d)
	}
	if d := Compare(recorded, transcript(chunk("Hello "), chunk("world"), result, acu("init"))).Diff; d == nil || !d.State || d.Stream != "available_commands_update" || d.Field() != "availableCommands[0].name" {
		t.Errorf("a changed available_commands_update: difference %+v, want one in its name", d)
	}
	if d := Compare(recorded, transcript(chunk("Hello "), chunk("world"), result)).Diff; d == nil || !d.State || d.Live != (Missing{}) {
		t.Errorf("a missing available_commands_update: difference %+v, want it missing", d)
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

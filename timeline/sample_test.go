package timeline

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/store"
)

// sampleCreated is the sample recording's start, fixed for the goldens.
var sampleCreated = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// sampleStore writes the sample recording into a fresh store file: a
// session of two turns with every lane, an LLM tool call (a real captured
// Chat Completions stream) that the agent runs as an ACP tool call with a
// permission request, a file read and a terminal, the LLM exchange that
// carries the tool's result, a message in chunks, junk, a stderr line
// recorded in two pieces, and an error answer.
func sampleStore(t testing.TB, name string) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sampleInto(t, st, name, "Florence")
	return st
}

// sampleInto writes the sample recording into st, the city it asks about
// being city.
func sampleInto(t testing.TB, st *store.Store, name, city string) {
	t.Helper()
	w, err := st.Create(store.Recording{
		Name: name, Created: sampleCreated, Argv: []string{"my-agent", "--acp"}, Cwd: "/work/project",
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Duration(0)
	line := func(lane store.Lane, s string, flags ...store.Flag) {
		at += 7 * time.Millisecond
		var f store.Flag
		for _, x := range flags {
			f |= x
		}
		w.Append(store.Event{Kind: store.KindFrame, Lane: lane, Offset: at, Flags: f, Data: []byte(s)})
	}
	ed, ag := store.LaneEditor, store.LaneAgent
	const callID = "call_qLFv8oQOs68qRuEVmG8TuEJp" // the id in oai_chat_tool_real.sse
	line(ed, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	line(ag, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)
	line(ag, `not json: starting up`)
	line(ed, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/work/project","mcpServers":[]}}`)
	line(ag, `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"sess_1"}}`)
	line(ed, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"What is the weather in `+city+`?"}]}}`)
	exchangeEvent(t, w, &at, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"What is the weather in `+city+`?"}],"tools":[{"type":"function","function":{"name":"weather"}}]}`,
		testkit.WireSample(t, "oai_chat_tool_real.sse"))
	line(ag, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call","toolCallId":"`+callID+`","title":"weather Florence","status":"pending"}}}`)
	line(ag, `{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":{"toolCallId":"`+callID+`"},"options":[{"optionId":"allow","kind":"allow_once","name":"Allow"}]}}`)
	line(ed, `{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
	line(ag, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"`+callID+`","status":"in_progress"}}}`)
	line(ag, `{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"sessionId":"sess_1","path":"/work/project/cities.txt"}}`)
	line(ed, `{"jsonrpc":"2.0","id":1,"result":{"content":"Florence, Italy"}}`)
	line(ag, `{"jsonrpc":"2.0","id":2,"method":"terminal/create","params":{"sessionId":"sess_1","command":"weather","args":["Florence"]}}`)
	line(ed, `{"jsonrpc":"2.0","id":2,"result":{"terminalId":"term_1"}}`)
	line(store.LaneStderr, `log: running weather for Florence, `, store.FlagContinued)
	line(store.LaneStderr, `Italy`)
	line(ag, `{"jsonrpc":"2.0","id":3,"method":"terminal/output","params":{"sessionId":"sess_1","terminalId":"term_1"}}`)
	line(ed, `{"jsonrpc":"2.0","id":3,"result":{"output":"sunny, 24C","truncated":false}}`)
	line(ag, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"`+callID+`","status":"completed"}}}`)
	exchangeEvent(t, w, &at, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"What is the weather in `+city+`?"},{"role":"tool","tool_call_id":"`+callID+`","content":"sunny, 24C"}]}`,
		testkit.WireSample(t, "oai_chat_text.sse"))
	for _, s := range []string{"It is ", "sunny in ", city + "."} {
		line(ag, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+s+`"}}}}`)
	}
	line(ag, `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)
	line(ed, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"And tomorrow?"}]}}`)
	line(ag, `{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"internal error: the model is gone"}}`)
	w.Update(func(r *store.Recording) { r.Done, r.Duration = true, at })
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// exchangeEvent appends a recorded exchange answering body with sse, its
// chunks the SSE events.
func exchangeEvent(t testing.TB, w *store.Writer, at *time.Duration, body string, sse []byte) {
	t.Helper()
	*at += 5 * time.Millisecond
	x := &exchange.Exchange{
		Route: exchange.RouteBaseURL, BaseURLVar: "OPENAI_BASE_URL",
		Method: "POST", URL: "https://api.openai.com/v1/chat/completions",
		RequestHeaders:  http.Header{"Authorization": {"Bearer <redacted>"}, "Content-Type": {"application/json"}},
		RequestBody:     []byte(body),
		Status:          200,
		ResponseHeaders: http.Header{"Content-Type": {"text/event-stream"}},
		TTFB:            120 * time.Millisecond, Duration: 480 * time.Millisecond, End: exchange.EndComplete,
	}
	for i, ev := range strings.SplitAfter(string(sse), "\n\n") {
		if ev != "" {
			x.Chunks = append(x.Chunks, exchange.Chunk{At: 120*time.Millisecond + time.Duration(i)*10*time.Millisecond, Data: []byte(ev)})
		}
	}
	data, err := exchange.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{Kind: store.KindExchange, Lane: store.LaneLLM, Offset: *at, Data: data})
	// What the agent does next, it does once it has the answer.
	*at += x.Duration
}

// bigStore writes a recording of n frames: turns of a prompt, a tool call
// with a permission request and a read, an LLM exchange, and message
// chunks, over and over, as a long session has.
func bigStore(t testing.TB, name string, n int) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "big.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w, err := st.Create(store.Recording{Name: name, Created: sampleCreated, Argv: []string{"my-agent"}, Cwd: "/w"}, false)
	if err != nil {
		t.Fatal(err)
	}
	sse := testkit.WireSample(t, "oai_chat_text.sse")
	at, frames := time.Duration(0), 0
	line := func(lane store.Lane, s string) {
		at += time.Millisecond
		frames++
		w.Append(store.Event{Kind: store.KindFrame, Lane: lane, Offset: at, Data: []byte(s)})
	}
	line(store.LaneEditor, `{"jsonrpc":"2.0","id":0,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	line(store.LaneAgent, `{"jsonrpc":"2.0","id":0,"result":{"sessionId":"s1"}}`)
	for turn := 1; frames < n; turn++ {
		line(store.LaneEditor, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"step %d"}]}}`, turn, turn))
		exchangeEvent(t, w, &at, fmt.Sprintf(`{"model":"m","stream":true,"messages":[{"role":"user","content":"step %d"}]}`, turn), sse)
		call := fmt.Sprintf("call_%d", turn)
		line(store.LaneAgent, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"`+call+`","title":"read notes","status":"pending"}}}`)
		line(store.LaneAgent, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"%s"}}}`, turn, call))
		line(store.LaneEditor, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`, turn))
		line(store.LaneAgent, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"fs/read_text_file","params":{"sessionId":"s1","path":"/w/notes.txt"}}`, 100000+turn))
		line(store.LaneEditor, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":"notes %d"}}`, 100000+turn, turn))
		line(store.LaneAgent, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"`+call+`","status":"completed"}}}`)
		line(store.LaneStderr, fmt.Sprintf("turn %d: tool done", turn))
		for c := range 8 {
			line(store.LaneAgent, fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk %d of turn %d "}}}}`, c, turn))
		}
		line(store.LaneAgent, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"stopReason":"end_turn"}}`, turn))
	}
	w.Update(func(r *store.Recording) { r.Done, r.Duration = true, at })
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return st
}

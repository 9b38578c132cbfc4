package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/acptap/acptap/internal/acp"
)

// The sizes of the shapes' bulk.
const (
	frameSize     = 900  // a bulk frame's line, newline included, about
	promptUpdates = 1000 // updates of one prompt of the agent shape
	mixUpdates    = 100  // of one prompt of the mix shape, to interleave finely
	llmDeltas     = 8    // content deltas of one LLM answer
	llmDeltaSize  = 1024 // bytes of text of each
	llmWindow     = 4    // earlier LLM turns a request carries
	llmModel      = "bench-model"
	sessionID     = "bench-session-1"
)

// text returns n bytes of text that the seed determines: 7/8 random hex
// and the rest a repeat of its start, so that it compresses to about half,
// as text does.
func text(seed uint64, n int) string {
	if n <= 0 {
		return ""
	}
	r := rand.New(rand.NewPCG(seed, 0x6269677368617065))
	random := n * 7 / 8
	raw := make([]byte, (random+1)/2)
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	h := hex.EncodeToString(raw)[:random]
	var b strings.Builder
	b.Grow(n)
	for b.Len() < n {
		b.WriteString(h[:min(len(h), n-b.Len())])
	}
	return b.String()
}

// line encodes an envelope, or panics: every value here encodes.
func line(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func rawID(id any) json.RawMessage { return line(json.Marshal(id)) }

// padTo returns the text that makes a frame whose other bytes are fixed
// bytes long about size bytes.
func padTo(size, fixed int) int { return max(16, size-fixed) }

func initializeRequest() []byte {
	return line(acp.EncodeRequest(rawID(0), "initialize", map[string]any{
		"protocolVersion":    1,
		"clientCapabilities": map[string]any{"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false},
		"clientInfo":         map[string]string{"name": "bigshape", "version": "1"},
	}))
}

func newSessionRequest() []byte {
	return line(acp.EncodeRequest(rawID(1), "session/new", map[string]any{"cwd": "/bench", "mcpServers": []any{}}))
}

// putID is the id of the n-th put: numeric and string ids alternate.
func putID(n int) json.RawMessage {
	if n%2 == 1 {
		return rawID(fmt.Sprintf("put-%d", n))
	}
	return rawID(1_000_000_000 + n)
}

// putRequest is the n-th _bench/put request.
func putRequest(n int) []byte {
	const fixed = 120
	return line(acp.EncodeRequest(putID(n), "_bench/put", map[string]any{
		"sessionId": sessionID, "key": fmt.Sprintf("k%d", n), "data": text(uint64(n), padTo(frameSize, fixed)),
	}))
}

// echoNotification is the n-th _bench/echo notification.
func echoNotification(n int) []byte {
	const fixed = 100
	return line(acp.EncodeNotification("_bench/echo", map[string]any{
		"sessionId": sessionID, "seq": n, "data": text(1<<40+uint64(n), padTo(frameSize, fixed)),
	}))
}

// echoRequest is the n-th _bench/echo request, numeric and string ids
// alternating, which the agent writes back whole as cat would: a request
// to the editor with the same id, which the editor leaves unanswered.
func echoRequest(n int) []byte {
	const fixed = 120
	id := rawID(2_000_000_000 + n)
	if n%2 == 1 {
		id = rawID(fmt.Sprintf("echo-%d", n))
	}
	return line(acp.EncodeRequest(id, "_bench/echo", map[string]any{
		"sessionId": sessionID, "seq": n, "data": text(1<<40+uint64(n), padTo(frameSize, fixed)),
	}))
}

// Prompts say what the agent does: "updates N" sends N session/update
// notifications; "llm" makes one LLM request.
func promptRequest(id int, prompt string) []byte {
	return line(acp.EncodeRequest(rawID(id), "session/prompt", map[string]any{
		"sessionId": sessionID,
		"prompt":    []any{map[string]string{"type": "text", "text": prompt}},
	}))
}

func updatesPrompt(turn, n int) string { return fmt.Sprintf("updates %d turn %d", n, turn) }

// llmPrompt is the prompt of the t-th LLM turn: a question and a pasted
// excerpt of about 900 bytes.
func llmPrompt(t int) string {
	return fmt.Sprintf("llm turn %d: what does this excerpt do?\n", t) + text(2<<40+uint64(t), 860)
}

// update is the i-th session/update of turn t: a message chunk, a tool
// call, its completion, in turn.
func update(t, i int) []byte {
	id := fmt.Sprintf("call-%d-%d", t, i/3)
	seed := 3<<40 + uint64(t)<<20 + uint64(i)
	var u map[string]any
	switch i % 3 {
	case 0:
		u = map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": text(seed, padTo(frameSize, 150))}}
	case 1:
		u = map[string]any{"sessionUpdate": "tool_call", "toolCallId": id, "title": fmt.Sprintf("Read part %d", i/3), "kind": "read", "status": "pending",
			"rawInput": map[string]string{"path": fmt.Sprintf("src/part%d.txt", i/3), "query": text(seed, padTo(frameSize, 260))}}
	default:
		u = map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "completed",
			"content": []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": text(seed, padTo(frameSize, 210))}}}}
	}
	return line(acp.EncodeNotification("session/update", map[string]any{"sessionId": sessionID, "update": u}))
}

func messageChunk(s string) []byte {
	return line(acp.EncodeNotification("session/update", map[string]any{"sessionId": sessionID,
		"update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": s}}}))
}

// llmDelta is the i-th delta of the answer to LLM turn t.
func llmDelta(t, i int) string { return text(4<<40+uint64(t)<<8+uint64(i), llmDeltaSize) }

// systemPrompt is the LLM requests' system message, the same in all.
var systemPrompt = "You are bigshape, a benchmark agent. Answer every question at length.\n" + text(5<<40, 2000)

// Package demollm is a scripted OpenAI Chat Completions server that stands in for an LLM in acptap's demo.
package demollm

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Answer is what the scripted model says once it has read the file.
const Answer = `Fixed the typo: "Teh" is now "The". notes.txt reads: "The quick brown fox jumps over the lazy dog."`

// Handler answers POST .../chat/completions with streamed chunks, the way
// the OpenAI API does: for a prompt that names a file it first calls the
// read_file tool; with the tool's result it answers; a title request gets a
// title; anything else gets a short reply. Ids and timestamps are fresh on
// every call, as a real API's are.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.Error(w, `{"error":{"message":"demollm serves POST /v1/chat/completions only"}}`, http.StatusNotFound)
			return
		}
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"message":"bad request body"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		s := &stream{w: w, id: "chatcmpl-" + randomHex(12), model: req.Model}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case req.Model == "title-model":
			s.text("Fixing a typo in notes")
		case last.Role == "tool":
			s.text(Answer)
		case strings.Contains(last.Content, "notes.txt"):
			s.toolCall("read_file", `{"path":"notes.txt"}`)
		default:
			s.text("You're welcome!")
		}
	})
}

// stream writes Chat Completions chunks.
type stream struct {
	w     http.ResponseWriter
	id    string
	model string
}

func (s *stream) chunk(delta map[string]any, finish any) {
	b, _ := json.Marshal(map[string]any{
		"id": s.id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": s.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	})
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.w.(http.Flusher).Flush()
}

func (s *stream) done() {
	fmt.Fprint(s.w, "data: [DONE]\n\n")
	s.w.(http.Flusher).Flush()
}

// text streams an answer a few words at a time.
func (s *stream) text(answer string) {
	s.chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	words := strings.SplitAfter(answer, " ")
	for i := 0; i < len(words); i += 3 {
		s.chunk(map[string]any{"content": strings.Join(words[i:min(i+3, len(words))], "")}, nil)
	}
	s.chunk(map[string]any{}, "stop")
	s.done()
}

// toolCall streams one function call, its arguments in two fragments.
func (s *stream) toolCall(name, args string) {
	half := len(args) / 2
	s.chunk(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
		"index": 0, "id": "call_" + randomHex(8), "type": "function",
		"function": map[string]any{"name": name, "arguments": args[:half]},
	}}}, nil)
	s.chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args[half:]}}}}, nil)
	s.chunk(map[string]any{}, "tool_calls")
	s.done()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

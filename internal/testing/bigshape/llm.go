package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// llmMain serves llmHandler on addr, prints its base URL (".../v1") on
// stdout, and serves until killed.
func llmMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bigshape llm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "the address to listen on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "bigshape llm: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "http://%s/v1\n", l.Addr())
	if err := http.Serve(l, llmHandler()); err != nil {
		fmt.Fprintf(stderr, "bigshape llm: %v\n", err)
	}
	return 1
}

// llmHandler is a Chat Completions upstream that answers the prompt "llm
// turn T: ..." with llmDeltas deltas of llmDelta(T, i), streamed, then the
// finish reason, the usage and [DONE].
func llmHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		var t int
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") ||
			json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"message":"bigshape llm serves POST /v1/chat/completions"}}`, http.StatusBadRequest)
			return
		}
		if _, err := fmt.Sscanf(req.Messages[len(req.Messages)-1].Content, "llm turn %d:", &t); err != nil {
			http.Error(w, `{"error":{"message":"the last message is not \"llm turn T: ...\""}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f, _ := w.(http.Flusher)
		event := func(choices, usage string) {
			fmt.Fprintf(w, `data: {"id":"chatcmpl-bench-%d","object":"chat.completion.chunk","created":1782321902,"model":%q,"choices":[%s],"usage":%s}`+"\n\n", t, req.Model, choices, usage)
			if f != nil {
				f.Flush()
			}
		}
		for i := range llmDeltas {
			event(fmt.Sprintf(`{"index":0,"delta":{"content":%q},"finish_reason":null}`, llmDelta(t, i)), "null")
		}
		event(`{"index":0,"delta":{},"finish_reason":"stop"}`, "null")
		event("", `{"prompt_tokens":12000,"completion_tokens":2000,"total_tokens":14000}`)
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
}

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/internal/chatapi"
	"github.com/acptap/acptap/internal/sse"
)

// agent answers the editor's frames one at a time, in the order read.
type agent struct {
	out     *bufio.Writer
	stderr  io.Writer
	llmURL  string            // $OPENAI_BASE_URL/chat/completions, "" without
	history []chatapi.Message // the last llmWindow LLM turns
	client  *http.Client
}

func agentMain(stdin io.Reader, stdout, stderr io.Writer, baseURL string) int {
	a := &agent{out: bufio.NewWriterSize(stdout, 64<<10), stderr: stderr, client: &http.Client{}}
	if baseURL != "" {
		a.llmURL = strings.TrimRight(baseURL, "/") + "/chat/completions"
	}
	in := bufio.NewReaderSize(stdin, 64<<10)
	for {
		l, err := in.ReadBytes('\n')
		if len(l) > 0 {
			a.handle(l)
			if err := a.out.Flush(); err != nil {
				fmt.Fprintf(stderr, "bigshape agent: %v\n", err)
				return 1
			}
		}
		if errors.Is(err, io.EOF) {
			return 0
		}
		if err != nil {
			fmt.Fprintf(stderr, "bigshape agent: %v\n", err)
			return 1
		}
	}
}

func (a *agent) write(b []byte) { a.out.Write(b) }

func (a *agent) handle(l []byte) {
	// Echoed frames are written back whole, unparsed, as cat would.
	if bytes.Contains(l, []byte(`"method":"_bench/echo"`)) {
		a.write(l)
		return
	}
	var m acp.Envelope
	if err := json.Unmarshal(l, &m); err != nil || m.Method == "" {
		fmt.Fprintf(a.stderr, "bigshape agent: ignoring %.80q\n", l)
		return
	}
	if m.ID == nil { // notifications: session/cancel and the like
		return
	}
	switch m.Method {
	case "initialize":
		a.write(line(acp.EncodeResult(m.ID, map[string]any{
			"protocolVersion":   1,
			"agentCapabilities": map[string]any{"loadSession": false, "promptCapabilities": map[string]bool{"image": false, "audio": false, "embeddedContext": true}},
			"agentInfo":         map[string]string{"name": "bigshape", "version": "1"},
			"authMethods":       []any{},
		})))
	case "session/new":
		a.write(line(acp.EncodeResult(m.ID, map[string]string{"sessionId": sessionID})))
	case "_bench/put":
		var p struct {
			Key  string `json:"key"`
			Data string `json:"data"`
		}
		json.Unmarshal(m.Params, &p)
		a.write(line(acp.EncodeResult(m.ID, map[string]any{"key": p.Key, "stored": len(p.Data)})))
	case "session/prompt":
		a.prompt(m)
	default:
		a.write(line(acp.EncodeError(m.ID, &acp.ResponseError{Code: -32601, Message: "method not found: " + m.Method})))
	}
}

func (a *agent) prompt(m acp.Envelope) {
	var p struct {
		Prompt []struct {
			Text string `json:"text"`
		} `json:"prompt"`
	}
	json.Unmarshal(m.Params, &p)
	var text string
	if len(p.Prompt) > 0 {
		text = p.Prompt[0].Text
	}
	var n, turn int
	switch {
	case strings.HasPrefix(text, "llm turn "):
		if err := a.llmTurn(text); err != nil {
			fmt.Fprintf(a.stderr, "bigshape agent: LLM: %v\n", err)
			a.write(messageChunk("error: " + err.Error()))
		}
	case func() bool { k, _ := fmt.Sscanf(text, "updates %d turn %d", &n, &turn); return k == 2 }():
		for i := range n {
			a.write(update(turn, i))
		}
	default:
		a.write(messageChunk("bigshape: a prompt says \"updates N turn T\" or \"llm turn T: ...\""))
	}
	a.write(line(acp.EncodeResult(m.ID, map[string]string{"stopReason": "end_turn"})))
}

// llmTurn sends one streamed Chat Completions request, carrying the
// system prompt, the last llmWindow turns and the prompt, and forwards
// each delta of the answer as a message chunk.
func (a *agent) llmTurn(prompt string) error {
	if a.llmURL == "" {
		return errors.New("OPENAI_BASE_URL is not set")
	}
	user := chatapi.Message{Role: "user", Content: prompt}
	req := chatapi.Request{Model: llmModel, Stream: true,
		Messages: append(append([]chatapi.Message{{Role: "system", Content: systemPrompt}}, a.history...), user)}
	body := line(json.Marshal(req))
	resp, err := a.client.Post(a.llmURL, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	var answer strings.Builder
	r := sse.NewReader(resp.Body)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return errors.New("the stream ended without [DONE]")
		}
		if err != nil {
			return err
		}
		if ev.Data == "[DONE]" {
			break
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			return fmt.Errorf("event %s: %v", strconv.Quote(ev.Data[:min(len(ev.Data), 80)]), err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" {
				answer.WriteString(ch.Delta.Content)
				a.write(messageChunk(ch.Delta.Content))
			}
		}
	}
	a.history = append(a.history, user, chatapi.Message{Role: "assistant", Content: answer.String()})
	if len(a.history) > 2*llmWindow {
		a.history = a.history[len(a.history)-2*llmWindow:]
	}
	return nil
}

// Package mcpwire reads the MCP messages of an exchange with an HTTP MCP server, and says in a line what a message or an exchange did.
package mcpwire

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/sse"
)

// Message is one MCP message an exchange carried.
type Message struct {
	// ToServer is true for a message of the agent's, in the request
	// body; false for the server's, in the response body.
	ToServer bool
	// At is when it was sent, since the exchange started: 0 for the
	// request's, the arrival of the chunk that completed it for the
	// response's.
	At   time.Duration
	Data []byte
}

// Messages returns the MCP messages of an exchange: those of its request
// body (one message or a batch), then those of its response body (a JSON
// message or batch, or the message events of an event stream).
func Messages(x *exchange.Exchange) []Message {
	var out []Message
	for _, m := range Split(x.RequestBody) {
		out = append(out, Message{ToServer: true, Data: m})
	}
	if !IsEventStream(x.ResponseHeaders) {
		for _, m := range Split(x.Body()) {
			out = append(out, Message{At: x.TTFB, Data: m})
		}
		return out
	}
	// Each event at the time of the chunk its end arrived in.
	var ends []int
	var at []time.Duration
	n := 0
	for _, c := range x.Chunks {
		n += len(c.Data)
		ends, at = append(ends, n), append(at, c.At)
	}
	r := sse.NewReader(bytes.NewReader(x.Body()))
	read := 0
	for {
		ev, err := r.Next()
		if err != nil {
			return out
		}
		read += len(ev.Raw)
		if ev.Type != "message" {
			continue
		}
		var when time.Duration
		if i, _ := slices.BinarySearch(ends, read); i < len(at) {
			when = at[i]
		}
		for _, m := range Split([]byte(ev.Data)) {
			out = append(out, Message{At: when, Data: m})
		}
	}
}

// Split returns the JSON-RPC messages of a body: itself, or the elements
// of a batch; none for one that is not JSON.
func Split(body []byte) [][]byte {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || !json.Valid(body) {
		return nil
	}
	if body[0] != '[' {
		return [][]byte{body}
	}
	var batch []json.RawMessage
	if json.Unmarshal(body, &batch) != nil {
		return nil
	}
	out := make([][]byte, len(batch))
	for i, m := range batch {
		out[i] = m
	}
	return out
}

// IsEventStream reports whether h's Content-Type is text/event-stream.
func IsEventStream(h http.Header) bool {
	mt, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// message is an MCP message as Hint and Summary read it.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string          `json:"name"`
		URI       string          `json:"uri"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"params"`
	Result *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Hint is what a message tells beyond its envelope, with a leading
// space: a tools/call's tool and arguments, a prompts/get's name, a
// resources/read's URI, a tool result's first text (" → "42""); "" for
// anything else.
func Hint(line []byte) string {
	var m message
	if json.Unmarshal(line, &m) != nil {
		return ""
	}
	return m.hint()
}

func (m *message) hint() string {
	switch m.Method {
	case "tools/call":
		return " " + m.Params.Name + " " + truncate(string(m.Params.Arguments), 60)
	case "prompts/get":
		return " " + m.Params.Name
	case "resources/read":
		return " " + m.Params.URI
	}
	if m.Result != nil {
		for _, c := range m.Result.Content {
			if c.Type == "text" {
				s := " → " + strconv.Quote(truncate(c.Text, 60))
				if m.Result.IsError {
					s += " (error)"
				}
				return s
			}
		}
	}
	return ""
}

// Summary says in a line what an exchange with an HTTP MCP server did:
// the agent's message and the server's answer, as in `tools/call lookup
// {"topic":"answer"} → "42"`; a request without a message by its method
// ("GET stream", "DELETE").
func Summary(x *exchange.Exchange) string {
	var parts []string
	answered := false
	for _, msg := range Messages(x) {
		var m message
		if json.Unmarshal(msg.Data, &m) != nil {
			continue
		}
		switch {
		case msg.ToServer && m.Method != "":
			parts = append(parts, m.Method+m.hint())
		case msg.ToServer:
			parts = append(parts, "result id="+string(m.ID))
		case m.Method != "":
			parts = append(parts, "← "+m.Method)
		case m.Error != nil:
			parts = append(parts, "→ error "+strconv.Itoa(m.Error.Code)+" "+truncate(m.Error.Message, 60))
			answered = true
		case !answered:
			if h := m.hint(); h != "" {
				parts = append(parts, strings.TrimSpace(h))
			} else {
				parts = append(parts, "→ result")
			}
			answered = true
		}
	}
	if len(parts) == 0 {
		if x.Method == http.MethodGet && IsEventStream(x.ResponseHeaders) {
			return "GET stream"
		}
		return x.Method
	}
	return strings.Join(parts, " ")
}

func truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return string([]rune(s)[:max-1]) + "…"
}

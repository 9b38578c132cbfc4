package testagent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/acptap/acptap/internal/chatapi"
	"github.com/acptap/acptap/internal/wsframe"
)

// wsClient speaks the OpenAI Responses API over a WebSocket (--llm-ws), as
// Codex does by default: one connection, opened at the first request and
// kept, each turn a response.create message answered by the events of a
// stream, one a message. It offers the model no tools.
type wsClient struct {
	url  string // {base}/responses, its scheme ws or wss
	http *http.Client
	key  string

	mu   sync.Mutex // guards conn and br, and serializes requests
	conn io.ReadWriteCloser
	br   *bufio.Reader
}

// wsURLOf returns base's /responses with the scheme of a WebSocket.
func wsURLOf(base string) string {
	u := strings.TrimRight(base, "/") + "/responses"
	switch {
	case strings.HasPrefix(u, "https://"):
		return "wss://" + strings.TrimPrefix(u, "https://")
	case strings.HasPrefix(u, "http://"):
		return "ws://" + strings.TrimPrefix(u, "http://")
	}
	return u
}

// dial opens the connection; c.mu is held.
func (c *wsClient) dial(ctx context.Context) error {
	// The upgrade is an ordinary GET of the http(s) URL.
	u := "http" + strings.TrimPrefix(c.url, "ws")
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("User-Agent", "acptap-testagent/1")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return fmt.Errorf("GET %s: %s: %s", c.url, resp.Status, strings.TrimSpace(string(b)))
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return fmt.Errorf("GET %s: switched protocols without a connection", c.url)
	}
	c.conn, c.br = conn, bufio.NewReader(conn)
	return nil
}

// stream sends req as a response.create message and reads its events.
func (c *wsClient) stream(ctx context.Context, req *chatapi.Request, onText func(string)) (*completion, error) {
	msg := map[string]any{"type": "response.create", "model": req.Model, "input": []any{}}
	var input []any
	for _, m := range req.Messages {
		switch m.Role {
		case "system":
			msg["instructions"] = m.Content
		case "user", "assistant":
			input = append(input, map[string]any{"type": "message", "role": m.Role, "content": m.Content})
		}
	}
	msg["input"] = input
	if req.Metadata != nil {
		msg["metadata"] = req.Metadata
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		if err := c.dial(ctx); err != nil {
			return nil, err
		}
	}
	stop := context.AfterFunc(ctx, func() { c.conn.Close() })
	defer stop()
	comp, err := c.exchange(body, onText)
	if err != nil {
		c.conn.Close()
		c.conn = nil
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the WebSocket %s: %w", c.url, err)
	}
	return comp, nil
}

// exchange sends body and reads the events until the response ends.
func (c *wsClient) exchange(body []byte, onText func(string)) (*completion, error) {
	if _, err := c.conn.Write(wsframe.Append(nil, wsframe.ClientFrame(wsframe.Text, body))); err != nil {
		return nil, err
	}
	var comp completion
	var text strings.Builder
	var asm wsframe.Assembler
	for {
		f, _, err := wsframe.Read(c.br, 64<<20)
		if err != nil {
			return nil, err
		}
		switch f.Opcode {
		case wsframe.Ping:
			c.conn.Write(wsframe.Append(nil, wsframe.ClientFrame(wsframe.Pong, f.Payload)))
			continue
		case wsframe.Close:
			code, reason := wsframe.CloseCode(f.Payload)
			return nil, fmt.Errorf("closed by the server: %d %s", code, reason)
		}
		m, err := asm.Add(f)
		if err != nil {
			return nil, err
		}
		if m == nil {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			return nil, fmt.Errorf("malformed message %.200q: %w", m.Data, err)
		}
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
			if onText != nil {
				onText(ev.Delta)
			}
		case "response.completed", "response.incomplete":
			comp.text, comp.finishReason = text.String(), "stop"
			return &comp, nil
		case "error", "response.failed":
			why := "the response failed"
			if ev.Error != nil {
				why = ev.Error.Message
			}
			return nil, fmt.Errorf("error event: %s", why)
		}
	}
}

package driver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"maps"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/lane"
	"github.com/acptap/acptap/replay/driver"
)

// TestReplayRequestsPerSession: an agent's requests are answered by method
// and order within their session. Two sessions' fs/read_text_file requests
// come in the other order live than recorded; each still gets its own
// session's recorded answer, the live sessions known by the ids their
// session/new answers gave.
func TestReplayRequestsPerSession(t *testing.T) {
	f := func(l lane.Lane, s string) lane.Line { return lane.Line{Lane: l, Data: []byte(s)} }
	e, a := lane.Editor, lane.Agent
	recorded := []lane.Line{
		f(e, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`),
		f(e, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`),
		f(a, `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"sess_rec1aaaa"}}`),
		f(a, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"sess_rec2bbbb"}}`),
		f(e, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess_rec1aaaa","prompt":[]}}`),
		f(e, `{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"sess_rec2bbbb","prompt":[]}}`),
		f(a, `{"jsonrpc":"2.0","id":90,"method":"fs/read_text_file","params":{"sessionId":"sess_rec1aaaa","path":"/w/a"}}`),
		f(a, `{"jsonrpc":"2.0","id":91,"method":"fs/read_text_file","params":{"sessionId":"sess_rec2bbbb","path":"/w/b"}}`),
		f(e, `{"jsonrpc":"2.0","id":90,"result":{"content":"for session 1"}}`),
		f(e, `{"jsonrpc":"2.0","id":91,"result":{"content":"for session 2"}}`),
		f(a, `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`),
		f(a, `{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}`),
	}
	d := driver.New(driver.Options{Recorded: recorded, Timeout: 10 * time.Second})
	pr, pw := io.Pipe()
	sent := make(chan acp.Message, 16)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			sent <- acp.Parse([]byte(sc.Text()))
		}
		close(sent)
	}()
	live := make(chan []byte)
	answers := map[string]string{} // live request id → the content it got
	go func() {
		next := func(method string) acp.Message {
			for m := range sent {
				if m.Method == method || method == "" {
					return m
				}
			}
			return acp.Message{}
		}
		next("session/new")
		next("session/new")
		live <- []byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"sess_live1xxxx"}}`)
		live <- []byte(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"sess_live2yyyy"}}`)
		next("session/prompt")
		next("session/prompt")
		// Session 2 asks first this time.
		live <- []byte(`{"jsonrpc":"2.0","id":"q1","method":"fs/read_text_file","params":{"sessionId":"sess_live2yyyy","path":"/w/b"}}`)
		live <- []byte(`{"jsonrpc":"2.0","id":"q2","method":"fs/read_text_file","params":{"sessionId":"sess_live1xxxx","path":"/w/a"}}`)
		for range 2 {
			m := next("")
			var r struct {
				Content string `json:"content"`
			}
			json.Unmarshal(m.Result, &r)
			answers[acp.IDKey(m.ID)] = r.Content
		}
		live <- []byte(`{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}`)
		live <- []byte(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	_, err := d.Run(ctx, pw, live)
	pw.Close()
	close(live)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	q1, q2 := acp.IDKey(json.RawMessage(`"q1"`)), acp.IDKey(json.RawMessage(`"q2"`))
	if want := map[string]string{q1: "for session 2", q2: "for session 1"}; !maps.Equal(answers, want) {
		t.Errorf("answers by live request id %v, want %v", answers, want)
	}
}

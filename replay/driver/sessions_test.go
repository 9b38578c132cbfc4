package driver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	answers := map[string]string{} // live request id → the content it got
	_, err := runScripted(t, recorded, func(a *scriptedAgent) {
		a.method("session/new")
		a.method("session/new")
		a.send(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"sess_live1xxxx"}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"sess_live2yyyy"}}`)
		a.method("session/prompt")
		a.method("session/prompt")
		// Session 2 asks first this time.
		a.send(`{"jsonrpc":"2.0","id":"q1","method":"fs/read_text_file","params":{"sessionId":"sess_live2yyyy","path":"/w/b"}}`,
			`{"jsonrpc":"2.0","id":"q2","method":"fs/read_text_file","params":{"sessionId":"sess_live1xxxx","path":"/w/a"}}`)
		for range 2 {
			m := a.await(func(m acp.Message) bool { return m.Kind == acp.Response })
			var r struct {
				Content string `json:"content"`
			}
			json.Unmarshal(m.Result, &r)
			answers[acp.IDKey(m.ID)] = r.Content
		}
		a.send(endTurnLine("4"), endTurnLine("3"))
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	q1, q2 := acp.IDKey(json.RawMessage(`"q1"`)), acp.IDKey(json.RawMessage(`"q2"`))
	if want := map[string]string{q1: "for session 2", q2: "for session 1"}; !maps.Equal(answers, want) {
		t.Errorf("answers by live request id %v, want %v", answers, want)
	}
}

// A scriptedAgent plays the live agent of a test from a script: it
// waits for the lines Run writes and sends its own.
type scriptedAgent struct {
	sent <-chan acp.Message
	live chan<- []byte
	done <-chan struct{} // closed once Run has returned
}

// await reads what Run wrote until a line of which want is true, and
// returns it.
func (a *scriptedAgent) await(want func(acp.Message) bool) acp.Message {
	for m := range a.sent {
		if want(m) {
			return m
		}
	}
	return acp.Message{}
}

// method waits for the next editor line of a method.
func (a *scriptedAgent) method(name string) {
	a.await(func(m acp.Message) bool { return m.Method == name })
}

// answer waits for the answer to the agent's request of id.
func (a *scriptedAgent) answer(id string) {
	a.await(func(m acp.Message) bool {
		return m.Kind == acp.Response && acp.IDKey(m.ID) == acp.IDKey(json.RawMessage(id))
	})
}

func (a *scriptedAgent) send(lines ...string) {
	for _, l := range lines {
		select {
		case a.live <- []byte(l):
		case <-a.done:
			return
		}
	}
}

// runScripted replays recorded against script.
func runScripted(t *testing.T, recorded []lane.Line, script func(a *scriptedAgent)) (driver.Result, error) {
	t.Helper()
	return runScriptedWith(t, driver.Options{Recorded: recorded, Timeout: 10 * time.Second}, script)
}

// runScriptedWith replays opts.Recorded with opts against script.
func runScriptedWith(t *testing.T, opts driver.Options, script func(a *scriptedAgent)) (driver.Result, error) {
	t.Helper()
	d, err := driver.NewFrom(lane.Slice(opts.Recorded), opts)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	sent := make(chan acp.Message, 64)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			sent <- acp.Parse([]byte(sc.Text()))
		}
		close(sent)
	}()
	live, done := make(chan []byte), make(chan struct{})
	go script(&scriptedAgent{sent: sent, live: live, done: done})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	res, err := d.Run(ctx, pw, live)
	close(done)
	pw.Close()
	return res, err
}

// Lines of the two-session recordings below.
func permissionLine(id, session string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"session/request_permission","params":{"sessionId":"` + session + `","options":[{"optionId":"y","kind":"allow_once"}]}}`
}

func promptLine(id, session string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"session/prompt","params":{"sessionId":"` + session + `","prompt":[]}}`
}

func toolCallLine(session string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + session + `","update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"Read"}}}`
}

func endTurnLine(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"stopReason":"end_turn"}}`
}

const allowLine = `{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"y"}}}`

// twoSessions are the lines that open sessions sess_rec1aaaa and
// sess_rec2bbbb; openTwo plays them live as sess_live1xxxx and
// sess_live2yyyy.
func twoSessions() []lane.Line {
	f := func(l lane.Lane, s string) lane.Line { return lane.Line{Lane: l, Data: []byte(s)} }
	return []lane.Line{
		f(lane.Editor, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`),
		f(lane.Agent, `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"sess_rec1aaaa"}}`),
		f(lane.Editor, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`),
		f(lane.Agent, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"sess_rec2bbbb"}}`),
	}
}

func openTwo(a *scriptedAgent) {
	a.method("session/new")
	a.send(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"sess_live1xxxx"}}`)
	a.method("session/new")
	a.send(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"sess_live2yyyy"}}`)
}

// TestReplaySessionsRaceTurns: two sessions in flight each ask for
// permission within their turn. Live, session 1 finishes its turn before
// session 2 asks: that is a race between sessions, not a skipped request,
// so Run waits for session 2's request. A session that answers its own
// turn without its recorded request did skip it: a *MissingError.
func TestReplaySessionsRaceTurns(t *testing.T) {
	e, a := lane.Editor, lane.Agent
	f := func(l lane.Lane, s string) lane.Line { return lane.Line{Lane: l, Data: []byte(s)} }
	recorded := append(twoSessions(),
		f(e, promptLine("3", "sess_rec1aaaa")),
		f(e, promptLine("4", "sess_rec2bbbb")),
		f(a, permissionLine("90", "sess_rec1aaaa")),
		f(a, permissionLine("91", "sess_rec2bbbb")),
		f(e, fmt.Sprintf(allowLine, "90")),
		f(e, fmt.Sprintf(allowLine, "91")),
		f(a, endTurnLine("3")),
		f(a, endTurnLine("4")),
		f(e, promptLine("5", "sess_rec1aaaa")),
		f(a, endTurnLine("5")),
	)
	for _, tc := range []struct {
		name string
		skip bool // session 2 ends its turn without asking
	}{
		{name: "session 1 ends its turn first"},
		{name: "session 2 skips its request", skip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runScripted(t, recorded, func(a *scriptedAgent) {
				openTwo(a)
				a.method("session/prompt")
				a.method("session/prompt")
				// Session 1's whole turn comes before anything of session 2's.
				a.send(permissionLine(`"p1"`, "sess_live1xxxx"))
				a.answer(`"p1"`)
				a.send(endTurnLine("3"))
				if !tc.skip {
					a.send(permissionLine(`"p2"`, "sess_live2yyyy"))
					a.answer(`"p2"`)
				}
				a.send(endTurnLine("4"))
				a.method("session/prompt")
				a.send(endTurnLine("5"))
			})
			var missing *driver.MissingError
			switch {
			case !tc.skip && err != nil:
				t.Fatalf("Run: %v", err)
			case tc.skip && !errors.As(err, &missing):
				t.Fatalf("Run error = %v, want a *MissingError", err)
			case tc.skip:
				want := driver.MissingError{Method: "session/request_permission", N: 1, Live: 0}
				if *missing != want {
					t.Errorf("MissingError = %+v, want %+v", *missing, want)
				}
			}
		})
	}
}

// TestReplaySessionsRaceNotifications: a prompt of session 1 recorded
// while session 2's turn runs waits for nothing of session 2's. In the
// recording session 1's tool call came after session 2's prompt; live it
// comes before, while that prompt waits for session 2's previous turn to
// end. Counted across sessions, session 1's next prompt would wait for a
// second tool call since session 2's prompt, which never comes: session
// 2's permission answer, recorded after that prompt, is sent after it.
func TestReplaySessionsRaceNotifications(t *testing.T) {
	e, a := lane.Editor, lane.Agent
	f := func(l lane.Lane, s string) lane.Line { return lane.Line{Lane: l, Data: []byte(s)} }
	recorded := append(twoSessions(),
		f(e, promptLine("3", "sess_rec1aaaa")),
		f(e, promptLine("4", "sess_rec2bbbb")),
		f(a, endTurnLine("3")),
		f(e, promptLine("5", "sess_rec1aaaa")),
		f(a, endTurnLine("4")),
		f(e, promptLine("6", "sess_rec2bbbb")),
		f(a, toolCallLine("sess_rec1aaaa")),
		f(a, permissionLine("90", "sess_rec1aaaa")),
		f(e, fmt.Sprintf(allowLine, "90")),
		f(a, toolCallLine("sess_rec2bbbb")),
		f(a, permissionLine("91", "sess_rec2bbbb")),
		f(a, endTurnLine("5")),
		f(e, promptLine("7", "sess_rec1aaaa")),
		f(e, fmt.Sprintf(allowLine, "91")),
		f(a, endTurnLine("6")),
		f(a, endTurnLine("7")),
	)
	res, err := runScripted(t, recorded, func(a *scriptedAgent) {
		openTwo(a)
		a.method("session/prompt")
		a.method("session/prompt")
		a.send(endTurnLine("3"))
		a.method("session/prompt") // id 5, session 1
		// Session 1's second turn starts before session 2's first ends.
		a.send(toolCallLine("sess_live1xxxx"), permissionLine(`"p1"`, "sess_live1xxxx"))
		a.send(endTurnLine("4"))
		a.method("session/prompt") // id 6, session 2
		a.answer(`"p1"`)
		a.send(endTurnLine("5"), toolCallLine("sess_live2yyyy"), permissionLine(`"p2"`, "sess_live2yyyy"))
		a.method("session/prompt") // id 7, session 1
		a.answer(`"p2"`)
		a.send(endTurnLine("6"))
		a.send(endTurnLine("7"))
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := len(res.Sent), 9; got != want {
		t.Errorf("Run sent %d lines, want %d: %q", got, want, res.Sent)
	}
}

// TestReplayCancelCountsItsSession: a session/cancel recorded after a
// chunk of its session's waits for that chunk, however much another
// session in flight streams first.
func TestReplayCancelCountsItsSession(t *testing.T) {
	e, a := lane.Editor, lane.Agent
	f := func(l lane.Lane, s string) lane.Line { return lane.Line{Lane: l, Data: []byte(s)} }
	chunk := func(session, text string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + session + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`
	}
	recorded := append(twoSessions(),
		f(e, promptLine("3", "sess_rec1aaaa")),
		f(e, promptLine("4", "sess_rec2bbbb")),
		f(a, permissionLine("90", "sess_rec2bbbb")),
		f(e, fmt.Sprintf(allowLine, "90")),
		f(a, chunk("sess_rec1aaaa", "one")),
		f(e, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess_rec1aaaa"}}`),
		f(a, `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}`),
		f(a, chunk("sess_rec2bbbb", "a long answer of session two")),
		f(a, endTurnLine("4")),
	)
	const cancelFrame = 9
	res, err := runScripted(t, recorded, func(a *scriptedAgent) {
		openTwo(a)
		a.method("session/prompt")
		a.method("session/prompt")
		a.send(permissionLine(`"p2"`, "sess_live2yyyy"))
		a.answer(`"p2"`)
		// Session 2 streams first, more than session 1 had streamed
		// when the editor cancelled it.
		a.send(chunk("sess_live2yyyy", "a long answer of session two"), endTurnLine("4"))
		a.send(chunk("sess_live1xxxx", "one"))
		a.method("session/cancel")
		a.send(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}`)
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	const s1Chunk = 5 // in Result.Live
	chunkAt, cancelAt := -1, -1
	for i, st := range res.Timeline {
		switch {
		case st.Lane == lane.Agent && st.Index == s1Chunk:
			chunkAt = i
		case st.Lane == lane.Editor && st.Index == cancelFrame:
			cancelAt = i
		}
	}
	if chunkAt < 0 || cancelAt < chunkAt {
		t.Errorf("session/cancel at %d of the timeline, session 1's chunk at %d; want the cancel after the chunk: %v", cancelAt, chunkAt, res.Timeline)
	}
}

// TestReplayRequestRacesMidTurnAnswer: an agent request recorded before
// the agent answered a session/set_mode sent mid-turn may come after that
// answer live; only the turn's end says the request was skipped.
func TestReplayRequestRacesMidTurnAnswer(t *testing.T) {
	e, a := lane.Editor, lane.Agent
	f := func(l lane.Lane, s string) lane.Line { return lane.Line{Lane: l, Data: []byte(s)} }
	const setMode = `{"jsonrpc":"2.0","id":4,"method":"session/set_mode","params":{"sessionId":"sess_rec1aaaa","modeId":"plan"}}`
	recorded := append(twoSessions()[:2],
		f(e, promptLine("3", "sess_rec1aaaa")),
		f(e, setMode),
		f(a, permissionLine("90", "sess_rec1aaaa")),
		f(a, `{"jsonrpc":"2.0","id":4,"result":{}}`),
		f(e, fmt.Sprintf(allowLine, "90")),
		f(a, endTurnLine("3")),
	)
	_, err := runScripted(t, recorded, func(a *scriptedAgent) {
		a.method("session/new")
		a.send(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"sess_live1xxxx"}}`)
		a.method("session/prompt")
		a.method("session/set_mode")
		a.send(`{"jsonrpc":"2.0","id":4,"result":{}}`, permissionLine(`"p1"`, "sess_live1xxxx"))
		a.answer(`"p1"`)
		a.send(endTurnLine("3"))
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
}

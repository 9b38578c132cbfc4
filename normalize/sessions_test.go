package normalize

import (
	"fmt"
	"strings"
	"testing"

	"github.com/acptap/acptap/lane"
)

// A two-session conversation as a Zed-like editor has it: string ids,
// both session/new requests sent at once, both sessions' turns in flight
// together.
type zedRun struct {
	s1, s2       string // the sessions' ids, as the agent minted them
	c1, c2       string // a tool call's id in each
	newFirst     int    // which session/new the agent answers first: 1 or 2
	agentIDs     [2]int // the ids of the agent's permission requests, in each session
	interleaving int    // 0: session 1's turn ends first; 1: session 2's
}

func editor(s string) lane.Line { return lane.Line{Lane: lane.Editor, Data: []byte(s)} }
func agent(s string) lane.Line  { return lane.Line{Lane: lane.Agent, Data: []byte(s)} }

func editorRequest(id, method, params string) lane.Line {
	return editor(`{"jsonrpc":"2.0","id":"` + id + `","method":"` + method + `","params":` + params + `}`)
}

func agentAnswer(id, result string) lane.Line {
	return agent(`{"jsonrpc":"2.0","id":"` + id + `","result":` + result + `}`)
}

func (r zedRun) lines() []lane.Line {
	news := [2][]lane.Line{
		{agentAnswer("b7e5c0de-0000-4000-8000-000000000001", `{"sessionId":"`+r.s1+`"}`)},
		{agentAnswer("b7e5c0de-0000-4000-8000-000000000002", `{"sessionId":"`+r.s2+`"}`)},
	}
	lines := []lane.Line{
		editorRequest("b7e5c0de-0000-4000-8000-000000000000", "initialize", `{"protocolVersion":1}`),
		agentAnswer("b7e5c0de-0000-4000-8000-000000000000", `{"protocolVersion":1}`),
		editorRequest("b7e5c0de-0000-4000-8000-000000000001", "session/new", `{"cwd":"/w","mcpServers":[]}`),
		editorRequest("b7e5c0de-0000-4000-8000-000000000002", "session/new", `{"cwd":"/w","mcpServers":[]}`),
	}
	if r.newFirst == 2 {
		news[0], news[1] = news[1], news[0]
	}
	lines = append(lines, news[0]...)
	lines = append(lines, news[1]...)
	lines = append(lines,
		editorRequest("p1", "session/prompt", `{"sessionId":"`+r.s1+`","prompt":[{"type":"text","text":"one"}]}`),
		editorRequest("p2", "session/prompt", `{"sessionId":"`+r.s2+`","prompt":[{"type":"text","text":"two"}]}`),
	)
	turn := func(k int, s, call, text string) []lane.Line {
		return []lane.Line{
			agent(toolCall(s, call, "Read a.go")),
			agent(permission(r.agentIDs[k], s, call)),
			editor(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`, r.agentIDs[k])),
			agent(toolUpdate(s, call, "completed")),
			agent(msgChunk(s, text)),
		}
	}
	t1, t2 := turn(0, r.s1, r.c1, "From one."), turn(1, r.s2, r.c2, "From two.")
	end1 := agentAnswer("p1", `{"stopReason":"end_turn"}`)
	end2 := agentAnswer("p2", `{"stopReason":"end_turn"}`)
	if r.interleaving == 0 {
		// Frame by frame, session 1 a step ahead, and it ends first.
		for i := range t1 {
			lines = append(lines, t1[i], t2[i])
		}
		return append(lines, end1, end2)
	}
	lines = append(lines, t2...)
	lines = append(lines, end2)
	lines = append(lines, t1...)
	return append(lines, end1)
}

// TestSessionsInterleave checks that two sessions whose turns interleave
// otherwise, whose session/new answers come in another order and whose
// ids are minted otherwise, compare equal, each session's turns on their
// own; and that a change in the second session's turn is reported in that
// session.
func TestSessionsInterleave(t *testing.T) {
	a := zedRun{s1: "ses_a1", s2: "ses_a2", c1: "call_a1", c2: "call_a2", newFirst: 1, agentIDs: [2]int{0, 1}}
	b := zedRun{s1: "ses_b1", s2: "ses_b2", c1: "call_b1", c2: "call_b2", newFirst: 2, agentIDs: [2]int{1, 0}, interleaving: 1}
	for _, omit := range []bool{false, true} {
		opts := Options{OmitEditor: omit}
		want := New(opts).Transcript(a.lines())
		got := New(opts).Transcript(b.lines())
		if c := Compare(want, got); c.Diff != nil {
			t.Fatalf("OmitEditor %v: two runs that interleave their sessions otherwise differ: %+v\nwant %s\n got %s", omit, c.Diff, joinLines(c.Want), joinLines(c.Got))
		}
		var sessions []string
		for _, turn := range want.Turns {
			sessions = append(sessions, fmt.Sprintf("%q answered %v", turn.Session, turn.Answered))
		}
		if got, want := strings.Join(sessions, ", "), `"" answered true, "" answered false, "<sessionId:2>" answered true, "<sessionId:2>" answered false`; got != want {
			t.Errorf("OmitEditor %v: turns %s, want %s", omit, got, want)
		}
		values := string(joinLines(want.Values()))
		if strings.Contains(values, `"method":"session/prompt"`) == omit {
			t.Errorf("OmitEditor %v: the editor's session/prompt among the values is %v", omit, !omit)
		}
	}

	changed := b
	changed.c2 = "call_b2_other"
	lines := changed.lines()
	for i, l := range lines {
		lines[i].Data = []byte(strings.Replace(string(l.Data), "From two.", "From 2.", 1))
	}
	d := Compare(New(Options{}).Transcript(a.lines()), New(Options{}).Transcript(lines)).Diff
	if d == nil {
		t.Fatal("a changed message of session 2: no difference")
	}
	if d.Turn != 1 || d.Session != "<sessionId:2>" || d.Stream != "agent message" || d.Field() != "content.text" {
		t.Errorf("difference in turn %d of %q, %s, %s; want turn 1 of <sessionId:2>, agent message, content.text", d.Turn, d.Session, d.Stream, d.Field())
	}
}

// TestSessionLoadHistory checks that the history an agent sends before
// its answer to session/load is a turn of its own, so that a missing
// history notification is reported there and not as part of the next
// prompt's turn.
func TestSessionLoadHistory(t *testing.T) {
	run := func(history ...string) []lane.Line {
		lines := []lane.Line{
			editorRequest("1", "session/load", `{"sessionId":"ses_old","cwd":"/w","mcpServers":[]}`),
		}
		for _, h := range history {
			lines = append(lines, agent(sessionUpdate("ses_old", `{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"`+h+`"}}`)))
		}
		return append(lines,
			agentAnswer("1", `{}`),
			editorRequest("2", "session/prompt", `{"sessionId":"ses_old","prompt":[{"type":"text","text":"again"}]}`),
			agent(msgChunk("ses_old", "Again.")),
			agentAnswer("2", `{"stopReason":"end_turn"}`),
		)
	}
	want := New(Options{OmitEditor: true}).Transcript(run("first question", "second question"))
	if n := len(want.Turns); n != 3 || !want.Turns[0].Answered || !want.Turns[1].Answered {
		t.Fatalf("a session/load and a prompt make %d turns, want 3, the first two answered: %+v", n, want.Turns)
	}
	d := Compare(want, New(Options{OmitEditor: true}).Transcript(run("first question"))).Diff
	if d == nil {
		t.Fatal("a missing history notification: no difference")
	}
	if d.Turn != 1 || d.Stream != "user message" {
		t.Errorf("difference in turn %d, %s; want turn 1 (the history), user message", d.Turn, d.Stream)
	}
}

// TestSessionAnnouncedBeforeAnswer checks that a notification of a
// session that comes before the answer to the session/new that made it
// (an agent's available_commands_update racing its answer) counts as that
// session's: one session, whichever comes first; two sessions whose
// notifications race their answers keep the order of their requests.
func TestSessionAnnouncedBeforeAnswer(t *testing.T) {
	note := func(s string) lane.Line { return agent(commands(s, "review")) }
	run := func(early bool, s1, s2 string) []lane.Line {
		lines := []lane.Line{
			editorRequest("n1", "session/new", `{"cwd":"/w","mcpServers":[]}`),
			editorRequest("n2", "session/new", `{"cwd":"/w","mcpServers":[]}`),
		}
		if early {
			// The second session's first: its answer comes last.
			lines = append(lines, note(s2), note(s1), agentAnswer("n1", `{"sessionId":"`+s1+`"}`), agentAnswer("n2", `{"sessionId":"`+s2+`"}`))
		} else {
			lines = append(lines, agentAnswer("n1", `{"sessionId":"`+s1+`"}`), note(s1), agentAnswer("n2", `{"sessionId":"`+s2+`"}`), note(s2))
		}
		return append(lines,
			editorRequest("p1", "session/prompt", `{"sessionId":"`+s2+`","prompt":[]}`),
			agent(msgChunk(s2, "Two.")),
			agentAnswer("p1", `{"stopReason":"end_turn"}`),
		)
	}
	want := New(Options{OmitEditor: true}).Transcript(run(false, "ses_1", "ses_2"))
	got := New(Options{OmitEditor: true}).Transcript(run(true, "ses_x", "ses_y"))
	if c := Compare(want, got); c.Diff != nil {
		t.Fatalf("notifications before their session/new answers: %+v\nwant %s\n got %s", c.Diff, joinLines(c.Want), joinLines(c.Got))
	}
	if n := len(want.Turns); n < 2 || want.Turns[n-1].Session != "<sessionId:2>" {
		t.Errorf("the prompted session is not the second: %+v", want.Turns)
	}
	one := func(early bool) *Transcript {
		lines := []lane.Line{editorRequest("n1", "session/new", `{"cwd":"/w","mcpServers":[]}`)}
		if early {
			lines = append(lines, note("ses_9"), agentAnswer("n1", `{"sessionId":"ses_9"}`))
		} else {
			lines = append(lines, agentAnswer("n1", `{"sessionId":"ses_9"}`), note("ses_9"))
		}
		return New(Options{OmitEditor: true}).Transcript(lines)
	}
	for _, early := range []bool{false, true} {
		if tr := one(early); len(tr.Turns) != 1 || tr.Turns[0].Session != "" {
			t.Errorf("one session announced early %v: %d turns, the first of session %q; want one of the only session", early, len(tr.Turns), tr.Turns[0].Session)
		}
	}
}

package timeline

import (
	"encoding/json"
	"slices"
	"strings"
)

// finish puts the builder's rows into p with their causal structure:
// requests paired with their responses, prompt turns, tool calls with
// everything that belongs to them, and runs of message chunks.
func (b *builder) finish(p *Page) {
	p.Events = b.events
	if p.Events == nil {
		p.Events = []Event{}
	}
	for _, e := range p.Events {
		p.Sessions = max(p.Sessions, e.Session)
	}
	l := &linker{page: p, tools: map[toolKey]int{}, terminals: map[string]int{}}
	l.pairs()
	l.turns()
	l.toolCalls()
	l.exchanges()
	l.groups()
}

// linker finds the causal links of a page's events.
type linker struct {
	page      *Page
	params    []frameParams   // the decoded params of each event, where they matter
	tools     map[toolKey]int // index in page.Tools by session and toolCallId
	terminals map[string]int  // index in page.Tools by terminalId
}

type toolKey struct{ session, id string }

// frameParams is what linking reads of a line.
type frameParams struct {
	Session string `json:"sessionId"`
	// TerminalID is a terminal/* request's.
	TerminalID string `json:"terminalId"`
	Update     struct {
		ToolCallID string          `json:"toolCallId"`
		Title      string          `json:"title"`
		Status     string          `json:"status"`
		Content    json.RawMessage `json:"content"`
	} `json:"update"`
	ToolCall struct {
		ToolCallID string `json:"toolCallId"`
	} `json:"toolCall"`
}

// params decodes the params of event i (zero for a line without).
func (l *linker) param(i int) frameParams {
	if l.params == nil {
		l.params = make([]frameParams, len(l.page.Events))
		for j, ev := range l.page.Events {
			if ev.Kind != "request" && ev.Kind != "notification" {
				continue
			}
			var env struct {
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal([]byte(ev.Raw), &env) == nil {
				_ = json.Unmarshal(env.Params, &l.params[j]) // params of another shape link nothing
			}
		}
	}
	return l.params[i]
}

// pairs links each request with its response: the editor's requests are
// answered on the agent lane and the agent's on the editor lane, by id.
func (l *linker) pairs() {
	open := map[string]int{} // lane of the request + id → index
	for i := range l.page.Events {
		ev := &l.page.Events[i]
		switch ev.Kind {
		case "request":
			open[ev.Lane+" "+ev.ID] = i
		case "response", "error":
			other := "editor"
			if ev.Lane == "editor" {
				other = "agent"
			}
			if j, ok := open[other+" "+ev.ID]; ok && ev.ID != "" {
				delete(open, other+" "+ev.ID)
				ev.Pair = j + 1
				l.page.Events[j].Pair = i + 1
			}
		}
	}
}

// turns cuts the events into session/prompt turns: from the editor's
// prompt to the agent's answer, everything in between, of every lane,
// belongs to the turn.
func (l *linker) turns() {
	p := l.page
	for i := range p.Events {
		ev := &p.Events[i]
		if ev.Lane != "editor" || ev.Kind != "request" || ev.Method != "session/prompt" {
			continue
		}
		t := Turn{Prompt: i, Answer: -1, Text: ev.Summary}
		if ev.Pair > 0 {
			t.Answer = ev.Pair - 1
			t.Stop = strings.TrimPrefix(p.Events[t.Answer].Summary, "stopReason ")
			if p.Events[t.Answer].Kind == "error" {
				t.Stop = "error " + p.Events[t.Answer].Summary
			}
		}
		p.Turns = append(p.Turns, t)
	}
	for n := range p.Turns {
		t := &p.Turns[n]
		end := t.Answer
		if end < 0 {
			end = len(p.Events) - 1
			if n+1 < len(p.Turns) {
				end = p.Turns[n+1].Prompt - 1
			}
		}
		for i := t.Prompt; i <= end; i++ {
			if p.Events[i].Turn == 0 {
				p.Events[i].Turn = n + 1
				t.Events++
				if p.Events[i].Kind == "exchange" {
					t.LLM = append(t.LLM, i)
				}
			}
		}
	}
}

// toolCalls collects each tool call's updates, its permission request,
// and the fs/* and terminal/* requests made while it ran, each with its
// response.
func (l *linker) toolCalls() {
	p := l.page
	var running []int // tools not yet completed or failed, in order of start
	for i := range p.Events {
		ev := &p.Events[i]
		if ev.Lane != "agent" || (ev.Kind != "request" && ev.Kind != "notification") {
			continue
		}
		fp := l.param(i)
		switch {
		case ev.Update == "tool_call" || ev.Update == "tool_call_update":
			if fp.Update.ToolCallID == "" {
				continue
			}
			t := l.tool(fp.Session, fp.Update.ToolCallID)
			if fp.Update.Title != "" {
				p.Tools[t].Title = fp.Update.Title
			}
			if fp.Update.Status != "" {
				p.Tools[t].Status = fp.Update.Status
			}
			l.join(i, t)
			running = slices.DeleteFunc(running, func(x int) bool { return x == t })
			if s := p.Tools[t].Status; s != "completed" && s != "failed" {
				running = append(running, t)
			}
		case ev.Method == "session/request_permission" && fp.ToolCall.ToolCallID != "":
			l.join(i, l.tool(fp.Session, fp.ToolCall.ToolCallID))
		case strings.HasPrefix(ev.Method, "fs/") || strings.HasPrefix(ev.Method, "terminal/"):
			t, ok := l.terminals[fp.TerminalID]
			if !ok || fp.TerminalID == "" {
				// The call ACP does not tie to a tool call belongs to the
				// one of its session that started last and is still
				// running.
				t = -1
				for _, r := range slices.Backward(running) {
					if p.Tools[r].Session == fp.Session {
						t = r
						break
					}
				}
			}
			if t < 0 {
				continue
			}
			l.join(i, t)
			if ev.Method == "terminal/create" && ev.Pair > 0 {
				var res struct {
					Result struct {
						TerminalID string `json:"terminalId"`
					} `json:"result"`
				}
				if json.Unmarshal([]byte(p.Events[ev.Pair-1].Raw), &res) == nil && res.Result.TerminalID != "" {
					l.terminals[res.Result.TerminalID] = t
				}
			}
		}
	}
}

// tool returns the index of a tool call, adding it if new.
func (l *linker) tool(session, id string) int {
	k := toolKey{session, id}
	if t, ok := l.tools[k]; ok {
		return t
	}
	l.page.Tools = append(l.page.Tools, Tool{ID: id, Session: session, Result: -1, Cause: -1})
	l.tools[k] = len(l.page.Tools) - 1
	return l.tools[k]
}

// join makes event i, and the response it got, part of tool t.
func (l *linker) join(i, t int) {
	p := l.page
	add := func(i int) {
		if !slices.Contains(p.Events[i].Tools, t) {
			p.Events[i].Tools = append(p.Events[i].Tools, t)
			p.Tools[t].Events = append(p.Tools[t].Events, i)
		}
	}
	add(i)
	if pair := p.Events[i].Pair; pair > 0 {
		add(pair - 1)
	}
}

// exchanges ties each LLM exchange to the tool calls it asked for (by
// the ids of the calls in its response, which agents reuse as
// toolCallIds) and to the tool call whose result it carries: the last
// started before it whose id its request names, else the last one of its
// turn that finished before it.
func (l *linker) exchanges() {
	p := l.page
	first := make([]int, len(p.Tools)) // index of each tool's first event
	for t, tool := range p.Tools {
		first[t] = tool.Events[0]
		slices.Sort(p.Tools[t].Events)
	}
	byID := map[string][]int{}
	for t, tool := range p.Tools {
		byID[tool.ID] = append(byID[tool.ID], t)
	}
	prevLLM := -1
	for i := range p.Events {
		ev := &p.Events[i]
		if ev.Exchange == nil || ev.Exchange.Class != "llm" {
			continue
		}
		if m := ev.Exchange.Message; m != nil {
			for _, tc := range m.ToolCalls {
				for _, t := range byID[tc.ID] {
					if first[t] > i && p.Tools[t].Cause < 0 {
						p.Tools[t].Cause = i
						l.add(i, t)
					}
				}
			}
		}
		// Tools are in the order they started: the last one before the
		// exchange whose id the request names is found first. Only the
		// turn's tools are looked for, since a request carries the whole
		// conversation and a long session's bodies are long.
		body := string(ev.Exchange.RequestBody)
		carried := -1
		for t := len(p.Tools) - 1; t >= 0 && carried < 0; t-- {
			if first[t] >= i {
				continue
			}
			if p.Events[first[t]].Turn != ev.Turn {
				break
			}
			if strings.Contains(body, p.Tools[t].ID) {
				carried = t
			}
		}
		if carried < 0 && ev.Turn > 0 {
			for t := range p.Tools {
				last := p.Tools[t].Events[len(p.Tools[t].Events)-1]
				if p.Events[first[t]].Turn == ev.Turn && last < i && last > prevLLM && (carried < 0 || last > p.Tools[carried].Events[len(p.Tools[carried].Events)-1]) {
					carried = t
				}
			}
		}
		if carried >= 0 && p.Tools[carried].Result < 0 {
			p.Tools[carried].Result = i
			l.add(i, carried)
		}
		prevLLM = i
	}
}

// add makes event i part of tool t, keeping the tool's events in order.
func (l *linker) add(i, t int) {
	p := l.page
	if slices.Contains(p.Events[i].Tools, t) {
		return
	}
	p.Events[i].Tools = append(p.Events[i].Tools, t)
	at, _ := slices.BinarySearch(p.Tools[t].Events, i)
	p.Tools[t].Events = slices.Insert(p.Tools[t].Events, at, i)
}

// groups joins the text chunks of one message: chunks of one kind and
// session that follow each other on the agent lane (whatever the other
// lanes do in between).
func (l *linker) groups() {
	p := l.page
	var run []int
	var runKind, runSession, text string
	flush := func() {
		if len(run) > 1 {
			p.Groups = append(p.Groups, Group{Update: runKind, Text: text, Events: run})
			for _, i := range run {
				p.Events[i].Group = len(p.Groups)
			}
		}
		run, text = nil, ""
	}
	for i := range p.Events {
		ev := &p.Events[i]
		if ev.Lane != "agent" {
			continue
		}
		chunk, ok := chunkText(l, i)
		if !ok {
			flush()
			continue
		}
		session := l.param(i).Session
		if len(run) > 0 && (ev.Update != runKind || session != runSession) {
			flush()
		}
		run = append(run, i)
		runKind, runSession = ev.Update, session
		text += chunk
	}
	flush()
}

// chunkText returns the text of a message chunk with text content.
func chunkText(l *linker, i int) (string, bool) {
	switch l.page.Events[i].Update {
	case "agent_message_chunk", "agent_thought_chunk", "user_message_chunk":
	default:
		return "", false
	}
	var c struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(l.param(i).Update.Content, &c) != nil || c.Type != "text" || c.Text == nil {
		return "", false
	}
	return *c.Text, true
}

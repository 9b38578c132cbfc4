package timeline

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/mcpwire"
	"github.com/acptap/acptap/internal/wire"
	"github.com/acptap/acptap/lane"
	"github.com/acptap/acptap/store"
)

// Recording returns the page of a stored recording: every event of every
// lane in recorded order, with the recording's turns, tool calls and
// joined messages. A line longer than the store's frame limit, recorded
// in pieces, is one row.
func Recording(st *store.Store, name string) (*Page, error) {
	rec, err := st.Get(name)
	if err != nil {
		return nil, err
	}
	b := newBuilder()
	b.servers = rec.MCPServers
	if err := st.Lines(name, b.add); err != nil {
		return nil, err
	}
	return b.recording(rec), nil
}

// recording is the page of rec, of the events added.
func (b *builder) recording(rec store.Recording) *Page {
	p := &Page{Kind: "recording", Title: "acptap recording " + rec.Name, Info: info(rec), Timed: true, Start: start(rec)}
	b.finish(p)
	return p
}

// start is when r started, as Page.Start says it.
func start(r store.Recording) string {
	return r.Created.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// info is the header of a recording's page.
func info(r store.Recording) []string {
	out := []string{
		"agent: " + strings.Join(r.Argv, " "),
		fmt.Sprintf("recorded %s in %s: %d frames, %d LLM exchanges, %s", r.Created.UTC().Format("2006-01-02 15:04:05 UTC"), r.Cwd, r.Frames, r.Exchanges, r.Duration.Round(time.Millisecond)),
	}
	switch {
	case !r.Done:
		out = append(out, "incomplete (still recording, or acptap was killed)")
	case r.Error != "" && r.Frames == 0:
		out = append(out, "failed: "+r.Error)
	case r.Signal != "":
		out = append(out, fmt.Sprintf("exit %d (%s)", r.ExitCode, r.Signal))
	default:
		out = append(out, fmt.Sprintf("exit %d", r.ExitCode))
	}
	return out
}

// builder turns store events into rows.
type builder struct {
	events   []Event
	number   int               // complete LLM exchanges so far
	sessions acp.Sessions      // the session of each row
	servers  []store.MCPServer // the recording's MCP servers, which name their lanes' rows
}

func newBuilder() *builder {
	return &builder{}
}

// add is a store.Lines callback.
func (b *builder) add(e store.Event) error {
	if e.Lane == store.LaneLLM {
		ev := b.exchangeEvent(e)
		_, ev.Session = b.sessions.Prompting()
		b.events = append(b.events, ev)
		return nil
	}
	ev := lineEvent(e.Seq, e.Offset, e.Lane, e.Data)
	if e.Lane == store.LaneEditor || e.Lane == store.LaneAgent {
		_, ev.Session = b.sessions.Of(e.Lane == store.LaneEditor, acp.Parse(e.Data))
	}
	if i, dir, ok := e.Lane.MCP(); ok {
		_, ev.Session = b.sessions.Prompting()
		ev.Server, ev.Dir = b.serverName(i), dir.String()
		arrow := " → "
		switch dir {
		case lane.FromServer:
			arrow = " ← "
		case lane.ServerStderr:
			ev.Kind, arrow = "line", " ! "
		}
		ev.Summary = ev.Server + arrow + ev.Summary
	}
	b.events = append(b.events, ev)
	return nil
}

// serverName names MCP server i of the recording, "mcp#I" if it has no
// such server.
func (b *builder) serverName(i int) string {
	if i >= 0 && i < len(b.servers) {
		return b.servers[i].Name
	}
	return fmt.Sprintf("mcp#%d", i)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// lineEvent is the row of one stdio line.
func lineEvent(seq uint64, at time.Duration, lane store.Lane, data []byte) Event {
	ev := Event{Seq: seq, T: ms(at), Lane: lane.String()}
	if utf8.Valid(data) {
		ev.Raw = string(data)
	} else {
		ev.Raw, ev.B64 = base64.StdEncoding.EncodeToString(data), true
	}
	if lane == store.LaneStderr {
		ev.Kind = "line"
		ev.Summary = oneLine(string(data), 160)
		return ev
	}
	m := acp.Parse(data)
	ev.Kind = m.Kind.String()
	ev.Method = m.Method
	ev.Update = m.UpdateKind
	if m.ID != nil {
		ev.ID = acp.IDKey(m.ID)
	}
	switch m.Kind {
	case acp.Request, acp.Notification:
		ev.Summary = paramsSummary(m.Params)
		ev.Err = m.UpdateKind == "tool_call_update" && toolStatus(m.Params) == "failed"
	case acp.Response:
		ev.Summary = resultSummary(m.Result)
	case acp.Error:
		ev.Summary = fmt.Sprintf("%d %s", m.ErrorCode, oneLine(m.ErrorMessage, 160))
		ev.Err = true
	default:
		ev.Summary = oneLine(string(data), 160)
	}
	return ev
}

// exchangeEvent is the row of one LLM exchange; an unreadable one is a
// row that says so.
func (b *builder) exchangeEvent(e store.Event) Event {
	ev := Event{Seq: e.Seq, T: ms(e.Offset), Lane: e.Lane.String(), Kind: "exchange"}
	incomplete := e.Flags&store.FlagIncomplete != 0
	if !incomplete {
		b.number++
	}
	x, err := exchange.Unmarshal(e.Data)
	if err != nil {
		ev.Summary, ev.Err = "unreadable exchange: "+err.Error(), true
		return ev
	}
	ex := newExchange(x)
	ex.Incomplete = incomplete
	if !incomplete {
		ex.Number = b.number
	}
	ev.Exchange = ex
	ev.Method = x.Method
	ev.Summary, ev.Err = exchangeSummary(ex)
	if x.Route == exchange.RouteMCP {
		// An HTTP MCP server's: a row of the MCP column, as a stdio
		// server's lines are.
		ev.Lane, ev.Server = "mcp", b.serverName(x.MCPServer-1)
		ev.Summary = ev.Server + " ↔ " + mcpwire.Summary(x)
		if x.Status != 0 {
			ev.Summary += fmt.Sprintf(" (%s %d)", x.Method, x.Status)
		}
	}
	return ev
}

// newExchange is the page's form of a recorded exchange.
func newExchange(x *exchange.Exchange) *Exchange {
	ex := &Exchange{
		Class: wire.ClassOfExchange(x).String(), Method: x.Method, URL: x.URL, Proto: x.Proto, Status: x.Status,
		RequestHeaders: x.RequestHeaders, RequestBody: x.RequestBody, ResponseHeaders: x.ResponseHeaders,
		TTFB: ms(x.TTFB), Duration: ms(x.Duration), Error: x.Error,
	}
	rf := wire.RequestFormat(x.Method, x.URL)
	ex.Model, ex.Stream = wire.RequestInfo(rf, x.URL, x.RequestBody)
	for _, c := range x.Chunks {
		ex.Chunks = append(ex.Chunks, Chunk{At: ms(c.At), Data: c.Data})
	}
	f, m := wire.Answer(x)
	if f != wire.Unknown {
		ex.Format = f.String()
	}
	ex.Message = m
	return ex
}

// exchangeSummary is an exchange's one line, and whether it failed: its
// method and route (the URL's path: the host is the same for every
// exchange of an API, and the row has little room), its status, and what
// the answer says as acptap show prints it (wire.Message.Said), the text
// or the tool calls first, since they are what a row is read for.
func exchangeSummary(ex *Exchange) (string, bool) {
	var b strings.Builder
	if ex.Class == wire.ClassHTTP.String() {
		b.WriteString("http ")
	}
	fmt.Fprintf(&b, "%s %s", ex.Method, route(ex.URL))
	failed := ex.Error != "" || ex.Status >= 400 || ex.Incomplete
	switch {
	case ex.Incomplete:
		b.WriteString(" (in flight when the recording stopped)")
	case ex.Status != 0:
		fmt.Fprintf(&b, " → %d", ex.Status)
	}
	if m := ex.Message; m != nil {
		failed = failed || len(m.Errors) > 0
		said := m.Said(100)
		// The reasoning comes first in show's lines; on a row it would
		// hide the answer, which the detail shows with the reasoning.
		if len(said) > 1 && said[0].Label == "reasoning" {
			said = append(said[1:], said[0])
		}
		for _, s := range said {
			b.WriteString("  " + s.Label + ": " + oneLine(s.Value, 200))
		}
		for _, e := range m.Errors {
			b.WriteString("  stream error: " + oneLine(e, 100))
		}
	}
	if ex.Error != "" {
		b.WriteString("  error: " + oneLine(ex.Error, 100))
	}
	return b.String(), failed
}

// route is a URL's path and query, the whole URL if it has none.
func route(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return rawURL
	}
	return u.RequestURI()
}

// paramsSummary picks the telling detail of a request's or notification's
// params: the prompt, the message text, the tool call's title, the path,
// the command.
func paramsSummary(params json.RawMessage) string {
	d, ok := acp.ParamsDetails(params)
	if !ok {
		return ""
	}
	parts := []string{}
	switch {
	case d.HasPrompt:
		parts = append(parts, d.Prompt)
	case d.Path != "":
		parts = append(parts, d.Path)
	case d.Command != "":
		parts = append(parts, d.Command)
	case d.ToolCallTitle != "":
		parts = append(parts, d.ToolCallTitle)
	case d.Title != "":
		parts = append(parts, d.Title)
	case d.Text != "":
		parts = append(parts, d.Text)
	}
	if d.Status != "" {
		parts = append(parts, "("+d.Status+")")
	}
	return oneLine(strings.Join(parts, " "), 160)
}

// resultSummary picks the telling detail of a response.
func resultSummary(result json.RawMessage) string {
	r, ok := acp.ParseResultDetails(result)
	switch {
	case !ok:
		return ""
	case r.SessionID != "":
		return "sessionId " + r.SessionID
	case r.StopReason != "":
		return "stopReason " + r.StopReason
	case r.TerminalID != "":
		return "terminalId " + r.TerminalID
	case r.Outcome != "":
		return strings.TrimSpace(r.Outcome + " " + r.OptionID)
	case r.Content != nil:
		return oneLine(*r.Content, 160)
	}
	return ""
}

func toolStatus(params json.RawMessage) string {
	var p struct {
		Update struct {
			Status string `json:"status"`
		} `json:"update"`
	}
	_ = json.Unmarshal(params, &p) // a params of another shape has no status
	return p.Update.Status
}

// oneLine is s on one line, cut to max runes.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return string([]rune(s)[:max-1]) + "…"
}

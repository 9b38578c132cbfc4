package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/internal/bytesize"
	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/mcpwire"
	"github.com/acptap/acptap/lane"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/record"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/store"
)

type showOptions struct {
	IO        *IO
	StorePath string
	Name      string
	JSON      bool
	Color     bool
	Follow    bool
	HTML      bool   // write the recording's page (package timeline)
	Output    string // write the page to this file instead of stdout
	Open      bool   // open the page in the browser
	// Session, if not "", shows only the events of one ACP session: its
	// number, as the session column shows it, or its sessionId.
	Session string
}

func showCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "list recordings, or print one recording's timeline",
		ArgsUsage: "[NAME]",
		Flags: []cli.Flag{
			storeFlag(storeReadUsage),
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per line per event (per recording without NAME)"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "print a recording being recorded as it grows, until it ends; with --html, serve its page on 127.0.0.1, growing with it, and print its URL"},
			&cli.BoolFlag{Name: "html", Usage: "write the recording as one self-contained HTML page"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "with --html, write the page to `FILE` (without it: to stdout, or on a terminal to a new file of the temp directory, whose path is printed)"},
			&cli.BoolFlag{Name: "open", Usage: "with --html, open the page in the browser (xdg-open, or open on macOS)"},
			&cli.StringFlag{Name: "session", Usage: "show only the events of one ACP session: its `N` as the session column shows it (s2 is 2), or its sessionId"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usageErrorf("too many arguments %q; usage: acptap show [--json] [--follow] [NAME]", c.Args().Slice())
			}
			if c.Bool("follow") && c.NArg() == 0 {
				return usageErrorf("--follow needs the NAME of a recording; usage: acptap show --follow [--json] NAME")
			}
			return runShow(&showOptions{
				IO:        stdio,
				StorePath: c.String("store"),
				Name:      c.Args().First(),
				JSON:      c.Bool("json"),
				Follow:    c.Bool("follow"),
				Color:     colorFor(stdio.Out),
				HTML:      c.Bool("html"),
				Output:    c.String("output"),
				Open:      c.Bool("open"),
				Session:   c.String("session"),
			})
		},
	}
}

func runShow(opts *showOptions) error {
	if err := checkHTMLFlags(opts); err != nil {
		return err
	}
	switch {
	case opts.Session != "" && opts.HTML:
		return usageErrorf("--session does not combine with --html, whose page has a session filter of its own")
	case opts.Session != "" && opts.Name == "":
		return usageErrorf("--session needs the NAME of a recording; usage: acptap show --session N NAME")
	}
	var names []string // of a directory, the recordings to load: every one without a name
	if opts.Name != "" {
		names = []string{opts.Name}
	}
	src, err := openSource(opts.StorePath, names)
	if err != nil {
		return err
	}
	defer src.Close()
	st := src.st
	out := bufio.NewWriterSize(opts.IO.Out, 64<<10)
	defer out.Flush()
	if opts.Name == "" {
		recs, err := st.List()
		if err != nil {
			return usageErrorf("%w", err)
		}
		if opts.JSON {
			return listJSON(out, recs)
		}
		return listTable(out, recs)
	}
	rec, err := st.Get(opts.Name)
	if err != nil {
		return recordingError(err, opts.StorePath)
	}
	switch {
	case opts.HTML && opts.Follow:
		return showLive(st, rec, opts)
	case opts.HTML:
		return showHTML(st, opts)
	}
	sessions := &sessionColumn{only: strings.TrimPrefix(opts.Session, "s")}
	servers := &mcpNames{st: st, rec: rec}
	var emit func(store.Event) error
	if opts.JSON {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		emit = func(e store.Event) error {
			id, _, ok := sessions.of(e)
			if !ok {
				return nil
			}
			if e.Lane == store.LaneLLM {
				line := llmEventJSONLine(e, servers)
				line.Session = id
				return enc.Encode(line)
			}
			line := eventJSON(e)
			line.Session = id
			if i, dir, ok := e.Lane.MCP(); ok {
				line.Server, line.Dir = servers.name(i), dir.String()
			}
			return enc.Encode(line)
		}
	} else {
		if !opts.Follow {
			// A stdio MCP server's call is shown with its answer, which
			// comes later in the recording.
			if servers.answers, err = mcpAnswers(st, rec); err != nil {
				return recordingError(err, opts.StorePath)
			}
		}
		writeHeader(out, rec)
		if n, err := record.LoopbackNotice(st, rec); err == nil && n != "" {
			fmt.Fprintf(out, "  %s\n", n)
		}
		rules, err := replay.StoredRules(st, opts.Name)
		switch {
		case errors.Is(err, replay.ErrStoredRules):
			fmt.Fprintf(out, "  calibrated rules unreadable: %v; run acptap calibrate %s again\n", err, opts.Name)
		case err != nil:
			return recordingError(err, opts.StorePath)
		}
		writeRules(out, rules)
		emit = func(e store.Event) error {
			_, n, ok := sessions.of(e)
			if !ok {
				return nil
			}
			_, err := io.WriteString(out, timelineLine(e, n, servers, opts.Color))
			return err
		}
	}
	if opts.Follow {
		err = follow(st, rec, emit, out.Flush)
		if err == nil && !opts.JSON && !rec.Done {
			if rec, err = st.Get(opts.Name); err == nil {
				fmt.Fprintf(out, "recording %s ended: %d frames, %d LLM exchanges, %s, %s\n",
					rec.Name, rec.Frames, rec.Exchanges, rec.Duration.Round(time.Millisecond), status(rec))
			}
		}
	} else {
		err = st.Events(opts.Name, emit)
	}
	if err != nil {
		return recordingError(err, opts.StorePath)
	}
	return sessions.check(opts.Name, opts.Session)
}

// recordingJSON is one line of `show --json` without a name.
type recordingJSON struct {
	Name       string    `json:"name"`
	Created    time.Time `json:"created"`
	Argv       []string  `json:"argv"`
	Cwd        string    `json:"cwd"`
	Frames     int       `json:"frames"`
	Exchanges  int       `json:"exchanges"`
	DurationMs int64     `json:"duration_ms"`
	Done       bool      `json:"done"`
	State      string    `json:"state"` // recording, interrupted, done, damaged, or salvaged (check --salvage copied it, and how it ended is not known)
	ExitCode   int       `json:"exit_code"`
	Signal     string    `json:"signal,omitempty"`
	Error      string    `json:"error,omitempty"`
	Version    string    `json:"version"`
	Format     int       `json:"format"`
	Snapshot   bool      `json:"snapshot,omitempty"` // the workspace was snapshotted for replay
	Updated    time.Time `json:"updated,omitzero"`   // when replay --update last rewrote the expected agent stream
	Damage     string    `json:"damage,omitempty"`   // what does not read, of a damaged recording (state damaged)
	Salvaged   string    `json:"salvaged,omitempty"` // what was lost, of a recording acptap check --salvage copied in part
	// Loopback is what record saw of the agent's connections to loopback
	// ports around the tap: other programs' (ports, each with the
	// variable naming it) and its own servers' (own).
	Loopback *store.Loopback `json:"loopback,omitempty"`
	// TerminalLogins are the terminal logins the agent advertised.
	TerminalLogins []store.TerminalLogin `json:"terminal_logins,omitempty"`
	// MCPServers are the stdio MCP servers whose lines are recorded.
	MCPServers []store.MCPServer `json:"mcp_servers,omitempty"`
}

func listJSON(w io.Writer, recs []store.Recording) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, r := range recs {
		if err := enc.Encode(recordingJSON{
			Name: r.Name, Created: r.Created, Argv: r.Argv, Cwd: r.Cwd,
			Frames: r.Frames, Exchanges: r.Exchanges, DurationMs: r.Duration.Milliseconds(),
			Done: r.Done, State: state(r), ExitCode: r.ExitCode, Signal: r.Signal, Error: r.Error,
			Version: r.Version, Format: r.Format, Snapshot: r.Snapshot, Updated: r.Updated,
			Damage: damageOf(r), Salvaged: r.Salvaged, Loopback: r.Loopback, TerminalLogins: r.TerminalLogins, MCPServers: r.MCPServers,
		}); err != nil {
			return err
		}
	}
	return nil
}

func listTable(w io.Writer, recs []store.Recording) error {
	if len(recs) == 0 {
		_, err := fmt.Fprintln(w, "no recordings; make one with: acptap record --name NAME -- AGENT [ARGS...]")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCREATED\tAGENT\tFRAMES\tLLM\tDURATION\tSTATUS")
	for _, r := range recs {
		if r.Damage != nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t%s\n", shownName(r.Name), shownText(status(r)))
			continue
		}
		if metaLost(r) {
			fmt.Fprintf(tw, "%s\t-\t-\t%d\t%d\t-\t%s\n", shownName(r.Name), r.Frames, r.Exchanges, status(r))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", shownName(r.Name), r.Created.Local().Format("2006-01-02 15:04:05"),
			truncate(shownText(strings.Join(r.Argv, " ")), 48), r.Frames, r.Exchanges, r.Duration.Round(time.Millisecond), shownText(status(r)))
	}
	return tw.Flush()
}

// metaLost reports whether r was salvaged (acptap check --salvage)
// without its metadata: its name and events are known, but not when it
// was made, of what agent, nor how it ended. Every recording made has a
// created time; such a one has none.
func metaLost(r store.Recording) bool {
	return r.Salvaged != "" && r.Created.IsZero()
}

// state says whether a recording is being recorded, was interrupted (its
// recorder died) or is done; of a salvaged one whose end is not known,
// that it was salvaged.
func state(r store.Recording) string {
	switch {
	case r.Damage != nil:
		return "damaged"
	case r.Salvaged != "" && !r.Done:
		return "salvaged"
	case r.Done:
		return "done"
	case r.Live:
		return "recording"
	}
	return "interrupted"
}

// damageOf says what of a damaged recording does not read; "" if it is not
// damaged.
func damageOf(r store.Recording) string {
	var de *store.DamagedError
	switch {
	case r.Damage == nil:
		return ""
	case errors.As(r.Damage, &de) && de.Where != "":
		return de.Where + ": " + de.Err.Error()
	case errors.As(r.Damage, &de):
		return de.Err.Error()
	}
	return r.Damage.Error()
}

// status says how a recording ended, or that it has not.
func status(r store.Recording) string {
	switch {
	case r.Damage != nil:
		return "damaged: " + damageOf(r) + "; run acptap check"
	case metaLost(r):
		return "salvaged (its metadata was lost: when and how it ended are not known)"
	case r.Salvaged != "" && !r.Done:
		// Not done in a damaged store: whether its recorder was killed
		// or the damage took the end, it cannot be told.
		return "salvaged (how it ended is not known)"
	case r.Salvaged != "":
		r.Salvaged = ""
		return status(r) + " (salvaged in part)"
	case !r.Done && r.Live:
		return "recording"
	case !r.Done:
		return "interrupted (incomplete: its acptap record was killed)"
	case r.Error != "" && r.Frames == 0:
		return "failed: " + r.Error
	case r.Signal != "":
		return fmt.Sprintf("exit %d (%s)", r.ExitCode, r.Signal)
	}
	return fmt.Sprintf("exit %d", r.ExitCode)
}

// shownName is a recording's name as show prints it: as it is, or
// quoted (and cut) if it is not a name acptap gives, such as one with
// escape codes or a newline that a hostile store holds, which would
// otherwise reach the terminal raw.
func shownName(name string) string {
	if store.ValidName(name) == nil {
		return name
	}
	return store.QuoteName(name)
}

// shownText is text of a recording's metadata (its agent command, its
// directory, its error) as show prints it on one line: quoted if it
// holds a control character or bytes that are not UTF-8.
func shownText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	return strconv.Quote(s)
}

func writeHeader(w io.Writer, r store.Recording) {
	if metaLost(r) {
		fmt.Fprintf(w, "recording %s: agent not known\n", shownName(r.Name))
		fmt.Fprintf(w, "  %d frames, %d LLM exchanges, %s\n", r.Frames, r.Exchanges, status(r))
	} else {
		fmt.Fprintf(w, "recording %s: %s\n", shownName(r.Name), shownText(strings.Join(r.Argv, " ")))
		fmt.Fprintf(w, "  created %s in %s, %d frames, %d LLM exchanges, %s, %s\n",
			r.Created.Local().Format("2006-01-02 15:04:05"), shownText(r.Cwd), r.Frames, r.Exchanges, r.Duration.Round(time.Millisecond), shownText(status(r)))
	}
	if r.Snapshot {
		fmt.Fprintf(w, "  workspace snapshot kept for replay\n")
	}
	if r.Scenario != "" {
		fmt.Fprintf(w, "  driven by the scenario %s (kept with the recording; acptap rerecord runs it again)\n", shownText(r.Scenario))
	}
	if r.Salvaged != "" {
		fmt.Fprintf(w, "  %s\n", r.Salvaged)
	}
	if r.ProxyEnv && !r.LoopbackDirect {
		fmt.Fprintf(w, "  loopback went through the tap too (record --proxy-loopback, or an acptap without it); replay does the same\n")
	}
	if !r.Updated.IsZero() {
		fmt.Fprintf(w, "  expected agent stream updated by acptap replay --update on %s\n", r.Updated.Local().Format("2006-01-02 15:04:05"))
	}
	for _, s := range r.MCPServers {
		switch {
		case s.NotRecorded != "":
			fmt.Fprintf(w, "  MCP server %s: not recorded (%s); the agent reached it itself\n", shownText(s.Name), shownText(s.NotRecorded))
		case s.Type != "":
			fmt.Fprintf(w, "  MCP server %s: %s %s, its exchanges recorded (class mcp)\n", shownText(s.Name), s.Type, shownText(s.URL))
		default:
			fmt.Fprintf(w, "  MCP server %s: %s, its stdio recorded (lane mcp)\n", shownText(s.Name), shownText(strings.Join(s.Argv, " ")))
		}
	}
	for _, l := range r.TerminalLogins {
		fmt.Fprintf(w, "  terminal login %s: the agent's command with %s, run by acptap record without recording\n", shownText(l.ID), shownText(strings.Join(l.Args, " ")))
	}
}

// writeRules lists the rules acptap calibrate stored with a recording,
// each with where it was learned; nothing for a recording never
// calibrated.
func writeRules(w io.Writer, rules []normalize.Rule) {
	switch {
	case rules == nil:
		return
	case len(rules) == 0:
		fmt.Fprintf(w, "  calibrated: nothing varies; no rules\n")
		return
	}
	fmt.Fprintf(w, "  calibrated: %d rules, applied by replay\n", len(rules))
	for _, r := range rules {
		if c := r.Comment(); c != "" {
			fmt.Fprintf(w, "    %s\n", strings.TrimPrefix(c, "calibrate: "))
		}
		fmt.Fprintf(w, "      %s\n", r.WithComment(""))
	}
}

// eventJSON is one line of `show --json NAME`: the fields are a contract
// (docs/inspecting.md), kept as they are.
type eventJSONLine struct {
	Seq       uint64          `json:"seq"`
	TMs       int64           `json:"t_ms"`
	Lane      string          `json:"lane"`
	Raw       *string         `json:"raw,omitempty"`
	RawB64    string          `json:"raw_b64,omitempty"`
	Newline   *bool           `json:"newline,omitempty"`   // present (false) only for a last line without '\n'
	Continued bool            `json:"continued,omitempty"` // the next frame of this lane continues the line
	Kind      string          `json:"kind,omitempty"`      // ACP envelope: request, notification, response, error, junk
	Method    string          `json:"method,omitempty"`
	ID        json.RawMessage `json:"id,omitempty"`
	Update    string          `json:"update,omitempty"`  // sessionUpdate of session/update
	Session   string          `json:"session,omitempty"` // the sessionId of the ACP session the frame belongs to
	Server    string          `json:"server,omitempty"`  // of an MCP server's line (lane mcp): the server's name
	Dir       string          `json:"dir,omitempty"`     // and its stream: in (to the server), out (from it), stderr
}

func eventJSON(e store.Event) eventJSONLine {
	line := eventJSONLine{Seq: e.Seq, TMs: e.Offset.Milliseconds(), Lane: e.Lane.String()}
	if utf8.Valid(e.Data) {
		s := string(e.Data)
		line.Raw = &s
	} else {
		line.RawB64 = base64.StdEncoding.EncodeToString(e.Data)
	}
	if e.Flags&store.FlagNoNewline != 0 {
		f := false
		line.Newline = &f
	}
	line.Continued = e.Flags&store.FlagContinued != 0
	_, dir, mcp := e.Lane.MCP()
	if e.Lane == store.LaneEditor || e.Lane == store.LaneAgent || mcp && dir != lane.ServerStderr {
		m := acp.Parse(e.Data)
		line.Kind = m.Kind.String()
		line.Method = m.Method
		line.ID = m.ID
		line.Update = m.UpdateKind
	}
	return line
}

// sessionColumn follows the ACP sessions of a recording's events, for
// the session column and --session.
type sessionColumn struct {
	sessions acp.Sessions
	only     string // the session to show, by number or id; "" for all
	shown    bool   // an event of only was shown
}

// of returns the session of an event, its id and number (those of the
// session whose prompt turn is in flight, for an LLM exchange or an MCP
// server's line, if only one is), and whether --session shows it.
func (c *sessionColumn) of(e store.Event) (id string, number int, show bool) {
	switch e.Lane {
	case store.LaneEditor, store.LaneAgent:
		id, number = c.sessions.Of(e.Lane == store.LaneEditor, acp.Parse(e.Data))
	case store.LaneLLM:
		id, number = c.sessions.Prompting()
	default:
		if _, _, mcp := e.Lane.MCP(); mcp {
			// An MCP call, as an LLM call, belongs to the turn in flight.
			id, number = c.sessions.Prompting()
		}
	}
	show = c.only == "" || c.only == id || c.only == strconv.Itoa(number)
	c.shown = c.shown || show
	return id, number, show
}

// check fails, once every event is read, if --session named no session
// of the recording.
func (c *sessionColumn) check(name, flag string) error {
	if c.only == "" || c.shown {
		return nil
	}
	n := c.sessions.Count()
	if n == 0 {
		return usageErrorf("--session %s: recording %s names no ACP session; show it without --session", flag, name)
	}
	return usageErrorf("--session %s: recording %s has no such session; it has %d: give a number from 1 to %d (as the session column shows them, s1 is 1) or a sessionId", flag, name, n, n)
}

// timelineLine renders one event as a line of the human timeline: the
// session column says the number of the event's ACP session (s2), blank
// for none.
func timelineLine(e store.Event, session int, servers *mcpNames, color bool) string {
	paint := painter(color).paint
	var laneColor string
	switch e.Lane {
	case store.LaneEditor:
		laneColor = colorCyan
	case store.LaneAgent:
		laneColor = colorGreen
	case store.LaneStderr:
		laneColor = colorYellow
	case store.LaneLLM:
		laneColor = colorCyan
	}
	var desc string
	laneName := e.Lane.String()
	server, dir, mcp := e.Lane.MCP()
	switch {
	case e.Lane == store.LaneEditor, e.Lane == store.LaneAgent:
		desc = describeACP(e.Data, paint) + mcpOverACPHint(e.Data)
	case e.Lane == store.LaneLLM:
		if x, err := decodeExchange(e); err == nil && x.Route == exchange.RouteMCP {
			// An HTTP MCP server's: a line of the server's, as a stdio
			// one's lines are.
			laneName, laneColor = "mcp", colorCyan
			desc = describeMCPExchange(e, x, servers, paint)
			break
		}
		desc = describeExchange(e, paint)
	case mcp && dir == lane.ServerStderr:
		desc = servers.name(server) + " ! " + quoteLine(e.Data, 100)
		laneColor = colorYellow
	case mcp:
		arrow := " → "
		if dir == lane.FromServer {
			arrow = " ← "
		}
		desc = servers.name(server) + arrow + describeACP(e.Data, paint) + mcpwire.Hint(e.Data)
		if dir == lane.ToServer {
			desc += servers.answer(server, e.Data)
		}
		laneColor = colorCyan
	default:
		desc = quoteLine(e.Data, 100)
	}
	var notes []string
	if len(e.Data) >= 4096 && e.Lane != store.LaneLLM {
		notes = append(notes, bytesize.Format(int64(len(e.Data))))
	}
	if e.Flags&store.FlagNoNewline != 0 {
		notes = append(notes, "no newline")
	}
	if e.Flags&store.FlagContinued != 0 {
		notes = append(notes, "continues")
	}
	if len(notes) > 0 {
		desc += " " + paint(colorDim, "["+strings.Join(notes, ", ")+"]")
	}
	label := ""
	if session > 0 {
		label = "s" + strconv.Itoa(session)
	}
	return fmt.Sprintf("%6d %10s  %s  %-3s  %s\n", e.Seq, fmtOffset(e.Offset), paint(laneColor, fmt.Sprintf("%-6s", laneName)), label, desc)
}

func describeACP(line []byte, paint func(string, string) string) string {
	m := acp.Parse(line)
	switch m.Kind {
	case acp.Request:
		return fmt.Sprintf("request  %s id=%s%s", m.Method, m.ID, paramsHint(m))
	case acp.Notification:
		s := "notify   " + m.Method
		if m.UpdateKind != "" {
			s += " " + m.UpdateKind
		}
		return s + paramsHint(m)
	case acp.Response:
		return fmt.Sprintf("result   id=%s%s", m.ID, resultHint(m.Result))
	case acp.Error:
		return paint(colorRed, fmt.Sprintf("error    id=%s %d %s", m.ID, m.ErrorCode, truncate(m.ErrorMessage, 80)))
	}
	return paint(colorRed, "junk     "+quoteLine(line, 80))
}

// paramsHint picks the most telling detail of a request or notification:
// the text of message chunks, the title of tool calls, the path of fs calls.
func paramsHint(m acp.Message) string {
	d, ok := acp.ParamsDetails(m.Params)
	if !ok {
		return ""
	}
	switch {
	case d.HasPrompt:
		return " " + strconv.Quote(truncate(d.Prompt, 60))
	case d.Path != "":
		return " " + d.Path
	case d.ToolCallTitle != "":
		return " " + strconv.Quote(truncate(d.ToolCallTitle, 60))
	case d.Title != "":
		return " " + strconv.Quote(truncate(d.Title, 60))
	case d.Text != "":
		return " " + strconv.Quote(truncate(d.Text, 60))
	case d.Status != "":
		return " " + d.Status
	}
	return ""
}

func resultHint(result json.RawMessage) string {
	r, ok := acp.ParseResultDetails(result)
	switch {
	case !ok:
		return ""
	case r.SessionID != "":
		return " sessionId=" + r.SessionID
	case r.StopReason != "":
		return " stopReason=" + r.StopReason
	case r.Outcome != "":
		return " " + strings.TrimSpace(r.Outcome+" "+r.OptionID)
	}
	return ""
}

func fmtOffset(d time.Duration) string {
	return fmt.Sprintf("+%.3fs", d.Seconds())
}

// quoteLine shows a line as a Go-quoted string, cut to max runes, so that
// control bytes and invalid UTF-8 stay visible and on one line.
func quoteLine(b []byte, max int) string {
	if len(b) > 4*max {
		b = b[:4*max]
	}
	s := strconv.Quote(string(b))
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return s
}

func truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return string([]rune(s)[:max-1]) + "…"
}

// mcpNames names a recording's MCP servers for its lines, reading the
// recording's metadata again for a server it does not know yet: a
// recording being made (show --follow) registers them as the agent
// starts them.
type mcpNames struct {
	st  *store.Store
	rec store.Recording
	// answers are what the stdio servers answered each request, by
	// answerKey: mcpwire.Hint of the answer, or its error; nil when not
	// known (show --follow).
	answers map[string]string
}

// answerKey is the key of request id of server i in mcpNames.answers.
func answerKey(i int, id json.RawMessage) string { return strconv.Itoa(i) + " " + string(id) }

// answer is the answer of a request line of server i, " → ..." to put
// after it, "" if it has none (a notification, a request never
// answered) or it is not known.
func (m *mcpNames) answer(i int, line []byte) string {
	msg := acp.Parse(line)
	if msg.Kind != acp.Request || m.answers == nil {
		return ""
	}
	return m.answers[answerKey(i, msg.ID)]
}

// mcpAnswers reads what rec's stdio MCP servers answered each request,
// for mcpNames.answers; nil if it has none.
func mcpAnswers(st *store.Store, rec store.Recording) (map[string]string, error) {
	if !slices.ContainsFunc(rec.MCPServers, func(s store.MCPServer) bool { return s.Type == "" }) {
		return nil, nil
	}
	answers := map[string]string{}
	err := st.Events(rec.Name, func(e store.Event) error {
		i, dir, ok := e.Lane.MCP()
		if !ok || dir != lane.FromServer {
			return nil
		}
		switch m := acp.Parse(e.Data); m.Kind {
		case acp.Response:
			if h := mcpwire.Hint(e.Data); h != "" {
				answers[answerKey(i, m.ID)] = h
			}
		case acp.Error:
			answers[answerKey(i, m.ID)] = fmt.Sprintf(" → error %d %s", m.ErrorCode, truncate(m.ErrorMessage, 60))
		}
		return nil
	})
	return answers, err
}

// name returns the name of server i, or "mcp#I" if the metadata has none.
func (m *mcpNames) name(i int) string {
	if i >= len(m.rec.MCPServers) {
		if rec, err := m.st.Get(m.rec.Name); err == nil {
			m.rec = rec
		}
	}
	if i < len(m.rec.MCPServers) && m.rec.MCPServers[i].Name != "" {
		return shownText(m.rec.MCPServers[i].Name)
	}
	return fmt.Sprintf("mcp#%d", i)
}

// mcpOverACPHint is what a frame of an MCP server the editor hosts on
// the ACP connection (RFD "MCP-over-ACP") tells, as an MCP server's line
// would: the server an mcp/connect names and the connection its answer
// gives; an mcp/message's connection and inner method, and a tools/call's
// tool and arguments (the inner message is flattened into the params);
// for its answer, a tool result's text (the inner result is the result).
func mcpOverACPHint(line []byte) string {
	if !bytes.Contains(line, []byte(`"mcp/`)) && !bytes.Contains(line, []byte(`"content"`)) && !bytes.Contains(line, []byte(`"connectionId"`)) {
		return ""
	}
	m := acp.Parse(line)
	var p struct {
		AcpID        string `json:"acpId"`
		ConnectionID string `json:"connectionId"`
		Method       string `json:"method"`
	}
	switch {
	case m.Kind == acp.Response:
		if json.Unmarshal(m.Result, &p) == nil && p.ConnectionID != "" {
			return " connectionId=" + shownText(p.ConnectionID)
		}
		return mcpwire.Hint(line)
	case m.Kind != acp.Request && m.Kind != acp.Notification || json.Unmarshal(m.Params, &p) != nil:
		return ""
	case m.Method == "mcp/connect" && p.AcpID != "":
		return " acpId=" + shownText(p.AcpID)
	case m.Method == "mcp/message" && p.Method != "":
		return " " + shownText(p.ConnectionID) + " " + shownText(p.Method) + mcpwire.Hint(m.Params)
	case m.Method == "mcp/disconnect":
		return " " + shownText(p.ConnectionID)
	}
	return ""
}

// Package timeline renders a recording, a replay or a comparison of two runs as one self-contained HTML page.
package timeline

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"unicode/utf8"

	"github.com/acptap/acptap/internal/wire"
)

// Page is what a page shows, embedded in it as JSON: the page's script
// renders everything from it. Its fields are the contract between the
// Go side and the script, and what the golden tests compare.
type Page struct {
	// Kind is "recording", "replay" or "diff".
	Kind  string `json:"kind"`
	Title string `json:"title"`
	// Info is the header's lines: the agent command, where and when it
	// ran, its exit.
	Info []string `json:"info,omitempty"`
	// Status is PASS, FAIL or UPDATED for a replay, SAME or DIFFERENT for
	// a diff; "" for a recording.
	Status string `json:"status,omitempty"`
	// Problems are the divergences' one-line messages, the first one
	// first; Warnings the replay's warnings.
	Problems []string `json:"problems,omitempty"`
	Warnings []string `json:"warnings,omitempty"`

	// Events are the rows of the sequence view, in order. Nil on a diff
	// page, which shows Compare only.
	Events []Event `json:"events,omitempty"`
	// Timed says whether Events have times (a replay's rows have only
	// their order).
	Timed bool `json:"timed,omitempty"`
	// Acptap is the version of acptap that made the page, as acptap
	// --version prints it: an exported exchange (HAR) names it as its
	// creator's.
	Acptap string `json:"acptap,omitempty"`
	// Start is when the recording started (RFC 3339, UTC), which Events'
	// times count from: an exported exchange (HAR) says when it started.
	Start string `json:"start,omitempty"`
	// Sessions is how many ACP sessions Events have (their greatest
	// Event.Session).
	Sessions int `json:"sessions,omitempty"`
	// Turns, Tools and Groups are the causal structure of Events.
	Turns  []Turn  `json:"turns,omitempty"`
	Tools  []Tool  `json:"tools,omitempty"`
	Groups []Group `json:"groups,omitempty"`

	// Compare is the side-by-side comparison of a failed replay or of a
	// diff; nil otherwise.
	Compare *Compare `json:"compare,omitempty"`

	// Live is, on the page of a recording in progress that a server
	// serves (show --html --follow), how the page gets the page again as
	// it grows; nil on a page written to a file.
	Live *LiveState `json:"live,omitempty"`
}

// LiveState is where a live page asks for its updates, and which it has.
type LiveState struct {
	// URL, relative to the page, answers URL?after=VERSION, once the page
	// has a version after VERSION, with that Page as JSON; or with 204 No
	// Content when it has none for a while.
	URL     string `json:"url"`
	Version int    `json:"version"`
	// Done says that the recording ended: the page is complete and asks
	// for no more.
	Done bool `json:"done,omitempty"`
}

// Event is one row of the sequence view: a stdio line or an LLM
// exchange.
type Event struct {
	Seq uint64 `json:"seq"`
	// T is the time since the start in milliseconds (0 when the page is
	// not Timed).
	T    float64 `json:"t"`
	Lane string  `json:"lane"` // editor, agent, llm, stderr
	// Kind is the ACP kind (request, notification, response, error,
	// junk) of an editor or agent line, "exchange" for an LLM exchange
	// and "line" for a stderr line.
	Kind   string `json:"kind"`
	Method string `json:"method,omitempty"`
	Update string `json:"update,omitempty"` // the sessionUpdate of a session/update
	ID     string `json:"id,omitempty"`     // the JSON-RPC id, as spelled
	// Summary is the row's one line: a message's text, a tool call's
	// title, a path, a stop reason.
	Summary string `json:"summary,omitempty"`
	// Raw is the line; B64 says it is base64 (a line that is not UTF-8).
	Raw string `json:"raw,omitempty"`
	B64 bool   `json:"b64,omitempty"`
	// Err marks what "next error" stops at: error responses, failed tool
	// calls, exchanges that failed or answered an error status.
	Err bool `json:"err,omitempty"`
	// Turn is the prompt turn the event belongs to, from 1; 0 outside a
	// turn.
	Turn int `json:"turn,omitempty"`
	// Server and Dir are, for a line of an MCP server (Lane "mcp"), the
	// server's name and the line's stream: "in" (the agent's, to the
	// server), "out" (the server's) or "stderr".
	Server string `json:"server,omitempty"`
	Dir    string `json:"dir,omitempty"`
	// Session is the number of the ACP session the event belongs to, from
	// 1 in the order the sessions were first named (acp.Sessions): of a
	// line, the session it names or answers for; of an LLM exchange, the
	// session whose prompt turn was the one in flight, if only one was.
	// 0 for none.
	Session int `json:"session,omitempty"`
	// Pair is the index in Events, plus 1, of the request a response
	// answers or the response a request got; 0 if none.
	Pair int `json:"pair,omitempty"`
	// Tools are the indices in Page.Tools of the tool calls the event
	// belongs to: a tool call's updates, its permission request, its
	// fs/* and terminal/* requests, and the LLM exchanges that asked for
	// it or carry its result.
	Tools []int `json:"tools,omitempty"`
	// Group is the index in Page.Groups, plus 1, of the joined message
	// the event is a chunk of; 0 if none.
	Group int `json:"group,omitempty"`
	// Exchange is the LLM exchange of an llm event.
	Exchange *Exchange `json:"exchange,omitempty"`
	// Fault is, on a replay's page, the stdio fault replay --stdio-fault
	// broke the editor frame with on its way to the agent, its action as
	// spelled (dup, split:10); "" for none. A frame dropped, or closed
	// in place of (drop, close), was never written: its row stands where
	// the recording had it among the agent's lines.
	Fault string `json:"fault,omitempty"`
}

// Turn is one session/prompt turn: from the prompt to the agent's
// answer.
type Turn struct {
	Prompt int    `json:"prompt"`           // index in Events of the session/prompt request
	Answer int    `json:"answer"`           // index of its answer; -1 if it never came
	Text   string `json:"text,omitempty"`   // the prompt's text
	Stop   string `json:"stop,omitempty"`   // the answer's stopReason
	LLM    []int  `json:"llm,omitempty"`    // indices of the LLM exchanges of the turn
	Events int    `json:"events,omitempty"` // how many events the turn has
}

// Tool is one tool call of the agent, by its toolCallId.
type Tool struct {
	ID      string `json:"id"`
	Session string `json:"session,omitempty"`
	Title   string `json:"title,omitempty"`
	Status  string `json:"status,omitempty"` // the last status reported
	// Events are the indices in Events of everything that belongs to the
	// tool call (see Event.Tools), in order.
	Events []int `json:"events"`
	// Result is the index of the LLM exchange that carries the tool's
	// result back to the model; -1 if none was found.
	Result int `json:"result"`
	// Cause is the index of the LLM exchange that asked for the tool
	// call; -1 if none was found.
	Cause int `json:"cause"`
}

// Group is a run of message chunks of one message (agent_message_chunk,
// agent_thought_chunk, user_message_chunk), shown as one row.
type Group struct {
	Update string `json:"update"`
	Text   string `json:"text"`
	Events []int  `json:"events"` // indices in Events of the chunks
}

// Exchange is an LLM exchange as the page shows it.
type Exchange struct {
	Number int    `json:"number"` // as acptap show numbers them; 0 for one in flight
	Class  string `json:"class,omitempty"`
	Method string `json:"method"`
	URL    string `json:"url"`
	Proto  string `json:"proto,omitempty"` // as the tap received the request: HTTP/1.1, HTTP/2.0
	Status int    `json:"status"`
	Format string `json:"format,omitempty"`
	Model  string `json:"model,omitempty"`
	Stream bool   `json:"stream,omitempty"`
	// RequestHeaders are those the recording kept: secrets were masked
	// before it was stored.
	RequestHeaders  http.Header `json:"request_headers,omitempty"`
	RequestBody     Body        `json:"request_body"`
	ResponseHeaders http.Header `json:"response_headers,omitempty"`
	// Message is the response reassembled from its wire format.
	Message *wire.Message `json:"message,omitempty"`
	// Chunks are the response body in the pieces in which it arrived.
	Chunks     []Chunk `json:"chunks,omitempty"`
	TTFB       float64 `json:"ttfb_ms"`
	Duration   float64 `json:"duration_ms"`
	Error      string  `json:"error,omitempty"`
	Incomplete bool    `json:"incomplete,omitempty"`
	// Fault is, on a replay's page, the fault replay --fault injected in
	// place of, or into, the exchange's answer, as spelled (status:503);
	// "" for none.
	Fault string `json:"fault,omitempty"`
	// Live is, on a replay's page, the live request normalized next to
	// the recorded one (Recorded), when the replay kept them.
	Live     any `json:"live,omitempty"`
	Recorded any `json:"recorded,omitempty"`
}

// Chunk is one piece of a response body and when it arrived.
type Chunk struct {
	At   float64 `json:"at_ms"` // since the request started
	Data Body    `json:"data"`
}

// Body is bytes shown as text: a string when they are UTF-8, else
// {"b64": "..."}.
type Body []byte

// MarshalJSON implements json.Marshaler.
func (b Body) MarshalJSON() ([]byte, error) {
	if utf8.Valid(b) {
		return json.Marshal(string(b))
	}
	return json.Marshal(map[string]string{"b64": base64.StdEncoding.EncodeToString(b)})
}

// Compare is the side-by-side comparison of two normalized agent streams
// and of the LLM requests of two runs.
type Compare struct {
	// Left and Right name the two sides: "recorded" and "replayed", or the
	// two recordings' names.
	Left  string `json:"left"`
	Right string `json:"right"`
	// Rows align the two streams as their printed diff does: each has the
	// index of a value of Want, of Got, or of both.
	Rows []Row             `json:"rows"`
	Want []json.RawMessage `json:"want"`
	Got  []json.RawMessage `json:"got"`
	// First is the first divergence, marked and scrolled to; nil when the
	// streams are equal.
	First *Mark `json:"first,omitempty"`
	// Requests are the LLM requests of both sides, normalized, pair by
	// pair, with the places where they differ.
	Requests []RequestPair `json:"requests,omitempty"`
}

// Row is one line of the aligned comparison: A and B index Want and Got,
// -1 where that side has nothing.
type Row struct {
	A    int  `json:"a"`
	B    int  `json:"b"`
	Same bool `json:"same,omitempty"`
	// Paths are, for two values that differ, the JSON paths of their
	// differing members, the first one first.
	Paths []string `json:"paths,omitempty"`
}

// Mark is the first divergence in the comparison.
type Mark struct {
	Message string `json:"message"`
	// A and B are the indices in Want and Got of the values that differ,
	// -1 for a side that lacks it.
	A int `json:"a"`
	B int `json:"b"`
	// Path is the JSON path inside the value of the first differing
	// member, "$" for the whole value.
	Path string `json:"path"`
}

// RequestPair is one LLM request on both sides, normalized.
type RequestPair struct {
	Number int `json:"number"`
	Left   any `json:"left"`
	Right  any `json:"right"`
	// Paths are where the two differ, the first one first; none when
	// they are the same.
	Paths   []string `json:"paths,omitempty"`
	Message string   `json:"message,omitempty"`
}

package main

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/mcpwire"
	"github.com/acptap/acptap/internal/wire"
	"github.com/acptap/acptap/store"
)

// llmEventJSON is one LLM exchange in `show --json NAME`: the fields are a
// contract (docs/inspecting.md), kept as they are.
type llmEventJSON struct {
	Seq             uint64        `json:"seq"`
	TMs             int64         `json:"t_ms"`
	Lane            string        `json:"lane"`
	Route           string        `json:"route"`
	Class           string        `json:"class,omitempty"` // llm, http or mcp (wire.Class); absent for an unreadable exchange
	BaseURLVar      string        `json:"base_url_var,omitempty"`
	Server          string        `json:"server,omitempty"`  // the MCP server of an mcp exchange, by name
	Summary         string        `json:"summary,omitempty"` // what an mcp exchange did: its message and the answer
	Method          string        `json:"method"`
	URL             string        `json:"url"`
	Proto           string        `json:"proto,omitempty"`
	Status          int           `json:"status"`
	RequestHeaders  http.Header   `json:"request_headers"`
	RequestBody     *string       `json:"request_body,omitempty"`
	RequestBodyB64  string        `json:"request_body_b64,omitempty"`
	RequestEncoding string        `json:"request_encoding,omitempty"`
	ResponseHeaders http.Header   `json:"response_headers"`
	ResponseBody    *string       `json:"response_body,omitempty"`
	ResponseB64     string        `json:"response_body_b64,omitempty"`
	ResponseEnc     string        `json:"response_encoding,omitempty"`
	Chunks          int           `json:"chunks"`
	TTFBMs          float64       `json:"ttfb_ms"`
	DurationMs      float64       `json:"duration_ms"`
	Error           string        `json:"error,omitempty"`
	Incomplete      bool          `json:"incomplete,omitempty"` // the exchange was still in flight when the recording stopped
	Format          string        `json:"format"`
	Message         *wire.Message `json:"message,omitempty"` // the response reassembled: text, reasoning, tool calls, usage
	Session         string        `json:"session,omitempty"` // the sessionId of the ACP session whose prompt turn was the one in flight, if only one was
}

// decodeExchange reads an LLM event; a broken one is shown, not fatal.
func decodeExchange(e store.Event) (*exchange.Exchange, error) {
	if e.Kind != store.KindExchange {
		return nil, fmt.Errorf("event %d: not an exchange (kind %d)", e.Seq, e.Kind)
	}
	return exchange.Unmarshal(e.Data)
}

func llmEventJSONLine(e store.Event, servers *mcpNames) llmEventJSON {
	ex, err := decodeExchange(e)
	if err != nil {
		return llmEventJSON{Seq: e.Seq, TMs: e.Offset.Milliseconds(), Lane: e.Lane.String(), Error: err.Error()}
	}
	f, msg := wire.Answer(ex)
	line := llmEventJSON{
		Seq: e.Seq, TMs: e.Offset.Milliseconds(), Lane: e.Lane.String(),
		Route: ex.Route, Class: wire.ClassOfExchange(ex).String(), BaseURLVar: ex.BaseURLVar, Method: ex.Method, URL: ex.URL, Proto: ex.Proto,
		Status: ex.Status, RequestHeaders: ex.RequestHeaders, RequestEncoding: ex.RequestEncoding,
		ResponseHeaders: ex.ResponseHeaders, ResponseEnc: ex.ResponseEncoding, Chunks: len(ex.Chunks),
		TTFBMs: ms(ex.TTFB), DurationMs: ms(ex.Duration), Error: ex.Error,
		Incomplete: e.Flags&store.FlagIncomplete != 0, Format: f.String(), Message: msg,
	}
	if ex.Route == exchange.RouteMCP {
		line.Server, line.Summary = servers.name(ex.MCPServer-1), mcpwire.Summary(ex)
	}
	line.RequestBody, line.RequestBodyB64 = textOrB64(ex.RequestBody)
	line.ResponseBody, line.ResponseB64 = textOrB64(ex.Body())
	if line.RequestHeaders == nil {
		line.RequestHeaders = http.Header{}
	}
	if line.ResponseHeaders == nil {
		line.ResponseHeaders = http.Header{}
	}
	return line
}

func textOrB64(b []byte) (*string, string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	return nil, base64.StdEncoding.EncodeToString(b)
}

func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// describeMCPExchange renders an exchange with an HTTP MCP server, x of
// e, for the timeline, as one line of the server's: its name, what the
// agent sent and the server answered, and the HTTP exchange's method,
// status and times.
func describeMCPExchange(e store.Event, x *exchange.Exchange, servers *mcpNames, paint func(string, string) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s ↔ %s  ", servers.name(x.MCPServer-1), mcpwire.Summary(x))
	switch {
	case e.Flags&store.FlagIncomplete != 0:
		b.WriteString(paint(colorRed, x.Method+" (in flight when the recording stopped)"))
	case x.Status == 0:
		b.WriteString(paint(colorRed, x.Method+" no response"))
	default:
		status := strconv.Itoa(x.Status)
		if x.Status >= 400 {
			status = paint(colorRed, status)
		}
		fmt.Fprintf(&b, "%s %s  %s", x.Method, status, x.Duration.Round(time.Millisecond))
	}
	if x.Error != "" {
		b.WriteString(paint(colorRed, "  error: "+truncate(x.Error, 100)))
	}
	return b.String()
}

// describeExchange renders an LLM exchange for the timeline: a summary,
// then the reassembled answer on indented lines.
func describeExchange(e store.Event, paint func(string, string) string) string {
	ex, err := decodeExchange(e)
	if err != nil {
		return paint(colorRed, "unreadable exchange: "+err.Error())
	}
	f, msg := wire.Answer(ex)
	var b strings.Builder
	if wire.ClassOfExchange(ex) == wire.ClassHTTP {
		// Not the LLM: a replay answers it by method and URL.
		b.WriteString(paint(colorYellow, "http") + " ")
	}
	fmt.Fprintf(&b, "%s %s", ex.Method, ex.URL)
	switch {
	case e.Flags&store.FlagIncomplete != 0:
		b.WriteString(paint(colorRed, " (in flight when the recording stopped)"))
	case ex.Status != 0:
		status := strconv.Itoa(ex.Status)
		if ex.Status >= 400 {
			status = paint(colorRed, status)
		}
		fmt.Fprintf(&b, " → %s  ttfb %s  %s", status, ex.TTFB.Round(time.Millisecond), ex.Duration.Round(time.Millisecond))
	}
	if f != wire.Unknown {
		fmt.Fprintf(&b, "  %s", f)
	}
	if ex.Route == exchange.RouteBaseURL {
		fmt.Fprintf(&b, "  via %s", ex.BaseURLVar)
	}
	if ex.Error != "" {
		b.WriteString(paint(colorRed, "  error: "+truncate(ex.Error, 100)))
	}
	const indent = "\n                            "
	if msg != nil {
		for _, s := range msg.Said(100) {
			b.WriteString(indent + s.Label + ": " + s.Value)
		}
		if msg.StopReason != "" {
			fmt.Fprintf(&b, "%sstop: %s", indent, msg.StopReason)
		}
		if u := msg.Usage; u.TotalTokens > 0 {
			fmt.Fprintf(&b, "%stokens: in %d, out %d", indent, u.InputTokens, u.OutputTokens)
		}
		for _, m := range msg.Errors {
			b.WriteString(indent + paint(colorRed, "stream error: "+truncate(m, 100)))
		}
	} else if body := ex.Body(); len(body) > 0 && ex.Status >= 400 {
		b.WriteString(indent + "body: " + quoteLine(body, 100))
	}
	return b.String()
}

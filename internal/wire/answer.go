package wire

import (
	"strconv"
	"unicode/utf8"

	"github.com/acptap/acptap/internal/exchange"
)

// Answer reassembles the response of a recorded exchange in its wire
// format: the format (Unknown for a response in none), and the message,
// nil when there is no format, no response, or nothing in the body could
// be read. A body that reassembles with an error but yielded events, text
// or tool calls is kept: a stream cut short still says something.
func Answer(x *exchange.Exchange) (Format, *Message) {
	f := Detect(x.Method, x.URL, x.ResponseHeaders)
	if f == Unknown || x.Status == 0 {
		return f, nil
	}
	m, err := Reassemble(f, x.Body())
	if err != nil && m.Events == 0 && m.Text == "" && len(m.ToolCalls) == 0 {
		return f, nil
	}
	return f, &m
}

// A Said is one thing a reassembled answer says, as acptap show prints
// it under its exchange and the session page shows it on the exchange's
// row: Label is "reasoning", "text" or "tool"; Value is the reasoning or
// the text quoted, or a tool call's name and its arguments.
type Said struct {
	Label, Value string
}

// Said returns what m says, in order: its reasoning, its text, its tool
// calls; each value cut to max runes, the quoted ones before quoting.
func (m *Message) Said(max int) []Said {
	var out []Said
	if m.Reasoning != "" {
		out = append(out, Said{"reasoning", strconv.Quote(cut(m.Reasoning, max))})
	}
	if m.Text != "" {
		out = append(out, Said{"text", strconv.Quote(cut(m.Text, max))})
	}
	for _, tc := range m.ToolCalls {
		out = append(out, Said{"tool", tc.Name + cut(tc.Arguments, max)})
	}
	return out
}

// cut is s cut to max runes, the last one an ellipsis.
func cut(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return string([]rune(s)[:max-1]) + "…"
}

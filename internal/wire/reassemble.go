package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/acptap/acptap/internal/ndjson"
	"github.com/acptap/acptap/internal/sse"
)

// Reassemble rebuilds the message in a response body of format f: an event
// stream (SSE, or NDJSON for Ollama) or a plain JSON body, told apart by
// the body itself. It returns as much of the message as the body holds,
// with an error wrapping ErrMalformed for each event it could not read and
// ErrTruncated if the stream stops inside an event. Errors the API reports
// in the body are not errors of Reassemble; they are in Message.Errors.
func Reassemble(f Format, body []byte) (Message, error) {
	var d decoder
	switch f {
	case OpenAIChat:
		d = new(chatDecoder)
	case OpenAIResponses:
		d = newResponsesDecoder()
	case Anthropic:
		d = newAnthropicDecoder()
	case Gemini:
		d = new(geminiDecoder)
	case Ollama:
		d = new(ollamaDecoder)
	default:
		return Message{}, fmt.Errorf("wire: reassemble %v: %w", f, ErrUnknownFormat)
	}
	var (
		events int
		errs   []error
	)
	switch {
	case len(trimSpace(body)) == 0:
	case f == OpenAIResponses && isJSONSequence(body):
		// The messages of a WebSocket, one event each, back to back.
		events, errs = readJSONSequence(body, d)
	case isJSONDocument(f, body):
		var err error
		if events, err = d.document(body); err != nil {
			errs = append(errs, fmt.Errorf("%w: %v body: %w", ErrMalformed, f, err))
		}
	case f == Ollama:
		events, errs = readNDJSON(body, d)
	default:
		events, errs = readSSE(body, d)
	}
	m := d.message()
	m.Events = events
	return m, errors.Join(errs...)
}

// A decoder builds a Message from one format's events or JSON body.
type decoder interface {
	// event handles the payload of one stream event: the data of an SSE
	// event or an NDJSON line.
	event(data []byte) error
	// document handles a whole plain JSON body and returns the number of
	// events it counts as.
	document(body []byte) (int, error)
	message() Message
}

// isJSONDocument reports whether body is a plain JSON response rather than
// a stream. An event stream starts with a field name or a comment, never
// with '{' or '['. An NDJSON stream of one line is also a JSON document,
// which comes to the same.
func isJSONDocument(f Format, body []byte) bool {
	b := trimSpace(body)
	if f == Ollama {
		return json.Valid(b)
	}
	return b[0] == '{' || b[0] == '['
}

// isJSONSequence reports whether body is JSON objects back to back, more
// than one: the messages of a WebSocket, as an exchange's chunks join
// them.
func isJSONSequence(body []byte) bool {
	b := trimSpace(body)
	if len(b) == 0 || b[0] != '{' || json.Valid(b) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var first json.RawMessage
	return dec.Decode(&first) == nil && dec.More()
}

// readJSONSequence hands each object of a sequence to d as an event and
// returns their number.
func readJSONSequence(body []byte, d decoder) (int, []error) {
	var errs []error
	dec := json.NewDecoder(bytes.NewReader(body))
	n := 0
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			errs = append(errs, fmt.Errorf("%w: message %d: %w", ErrMalformed, n+1, err))
			break
		}
		n++
		if err := d.event(v); err != nil {
			errs = append(errs, fmt.Errorf("%w: message %d: %w", ErrMalformed, n, err))
		}
	}
	return n, errs
}

// readSSE hands the events of an event stream to d and returns their
// number.
func readSSE(body []byte, d decoder) (int, []error) {
	var errs []error
	r := sse.NewReader(bytes.NewReader(body))
	n := 0
	for {
		ev, err := r.Next()
		if err != nil {
			// A bytes.Reader fails only with io.EOF.
			break
		}
		n++
		if err := event(d, []byte(ev.Data)); err != nil {
			errs = append(errs, fmt.Errorf("%w: event %d: %w", ErrMalformed, n, err))
		}
	}
	if rest := r.Rest(); endsInEvent(rest) {
		errs = append(errs, fmt.Errorf("%w: %d bytes after event %d", ErrTruncated, len(rest), n))
	}
	if n == 0 && len(errs) == 0 && !eventStreamLines(body) {
		errs = append(errs, fmt.Errorf("%w: not an event stream", ErrMalformed))
	}
	return n, errs
}

// eventStreamLines reports whether every complete line of body is blank, a
// comment or a field the standard defines. An event stream can hold other
// lines, which readers ignore, but a body without events that has them,
// like an HTML error page, is not a stream cut short.
func eventStreamLines(body []byte) bool {
	body = bytes.TrimPrefix(body, []byte("\xEF\xBB\xBF"))
	for {
		i := bytes.IndexAny(body, "\r\n")
		if i < 0 {
			return true
		}
		line := body[:i]
		body = body[i+1:]
		if len(line) == 0 || line[0] == ':' {
			continue
		}
		name, _, _ := bytes.Cut(line, []byte(":"))
		switch string(name) {
		case "event", "data", "id", "retry":
		default:
			return false
		}
	}
}

// endsInEvent reports whether rest, the bytes after a stream's last event,
// hold an event cut short: one that a blank line would dispatch.
func endsInEvent(rest []byte) bool {
	var s sse.Scanner
	// The leading blank line is a no-op that keeps a BOM in rest from
	// counting as the stream's.
	s.Feed([]byte("\n"))
	s.Feed(rest)
	return len(s.Feed([]byte("\n\n"))) > 0 || s.Flush()
}

// readNDJSON hands the lines of an NDJSON stream to d and returns the
// number of lines that are not blank.
func readNDJSON(body []byte, d decoder) (int, []error) {
	var errs []error
	n := 0
	r := ndjson.NewReader(bytes.NewReader(body))
	for {
		l, err := r.Next()
		if err != nil {
			// A bytes.Reader fails only with io.EOF.
			break
		}
		if l.Err == nil && l.Value == nil {
			continue
		}
		n++
		if l.Err != nil {
			if !bytes.HasSuffix(l.Raw, []byte("\n")) {
				// The last line, cut short.
				errs = append(errs, fmt.Errorf("%w: %d bytes after line %d", ErrTruncated, len(l.Raw), n-1))
				continue
			}
			errs = append(errs, fmt.Errorf("%w: %w", ErrMalformed, l.Err))
			continue
		}
		if err := d.event(l.Value); err != nil {
			errs = append(errs, fmt.Errorf("%w: line %d: %w", ErrMalformed, n, err))
		}
	}
	return n, errs
}

// event hands the data of an SSE event to d, skipping empty data, which
// some servers send as a keep-alive.
func event(d decoder, data []byte) error {
	if len(trimSpace(data)) == 0 {
		return nil
	}
	return d.event(data)
}

// An assembler collects the parts of a Message as a decoder finds them.
type assembler struct {
	msg       Message
	text      parts
	reasoning parts
	calls     []*call
}

// setIDs records the response's id and model; the first ones seen win.
func (a *assembler) setIDs(id, model string) {
	if a.msg.ID == "" {
		a.msg.ID = id
	}
	if a.msg.Model == "" {
		a.msg.Model = model
	}
}

func (a *assembler) newCall(id, name string) *call {
	c := &call{id: id, name: name}
	a.calls = append(a.calls, c)
	return c
}

// addError records an error the API reported.
func (a *assembler) addError(e *apiError) {
	if e != nil {
		a.msg.Errors = append(a.msg.Errors, e.String())
	}
}

func (a *assembler) message() Message {
	m := a.msg
	m.Text = a.text.b.String()
	m.Reasoning = a.reasoning.b.String()
	for _, c := range a.calls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: c.id, Name: c.name, Arguments: c.args.String()})
	}
	m.Errors = append([]string(nil), m.Errors...)
	return m
}

// parts joins text that arrives in parts. Deltas of one part are joined
// as they are; separate parts, told apart by their keys, get a blank line
// between them.
type parts struct {
	b   strings.Builder
	key string
}

func (p *parts) add(key, s string) {
	if s == "" {
		return
	}
	if p.b.Len() > 0 && key != p.key {
		p.b.WriteString("\n\n")
	}
	p.key = key
	p.b.WriteString(s)
}

// A call is a tool call being assembled.
type call struct {
	id, name string
	args     strings.Builder
}

func (c *call) setArgs(s string) {
	c.args.Reset()
	c.args.WriteString(s)
}

// apiError is an error object as the APIs put it in bodies and events.
// Some servers send a bare string instead, which becomes the Message.
type apiError struct {
	Status  looseString `json:"status"` // Gemini: "RESOURCE_EXHAUSTED"
	Code    looseString `json:"code"`   // OpenAI: "rate_limit_exceeded"; Gemini: 429
	Type    looseString `json:"type"`   // OpenAI and Anthropic: "overloaded_error"
	Message looseString `json:"message"`
}

func (e *apiError) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &e.Message)
	}
	type plain apiError // without this method
	return json.Unmarshal(b, (*plain)(e))
}

// String returns "code: message", taking the most specific code the API
// gave.
func (e *apiError) String() string {
	code := firstNonEmpty(e.Status, e.Code, e.Type)
	switch {
	case code == "":
		return string(e.Message)
	case e.Message == "":
		return code
	}
	return code + ": " + string(e.Message)
}

func firstNonEmpty(ss ...looseString) string {
	for _, s := range ss {
		if s != "" {
			return string(s)
		}
	}
	return ""
}

// looseString is a JSON string that also takes a number or any other value
// as its JSON text, for fields whose type varies between servers, and
// takes null as "".
type looseString string

func (s *looseString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, (*string)(s))
	}
	if string(b) == "null" {
		*s = ""
		return nil
	}
	*s = looseString(b)
	return nil
}

// argsText returns tool call arguments as text: a JSON string's value, or
// the compacted JSON text of any other value, such as an object. A missing
// or null value gives "".
func argsText(raw json.RawMessage) string {
	raw = trimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// objectArgs is argsText for APIs whose arguments are a JSON object, where
// a missing object means no arguments.
func objectArgs(raw json.RawMessage) string {
	if s := argsText(raw); s != "" {
		return s
	}
	return "{}"
}

// trimSpace trims JSON whitespace.
func trimSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

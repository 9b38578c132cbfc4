// Package wire identifies the HTTP wire formats of LLM APIs and reassembles
// their response bodies, streamed or not, into messages.
package wire

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// A Format is the wire format of an LLM API. A format covers both the
// streamed and the plain JSON responses of its API.
type Format uint8

const (
	Unknown         Format = iota
	OpenAIChat             // OpenAI Chat Completions, /chat/completions
	OpenAIResponses        // OpenAI Responses, /responses
	Anthropic              // Anthropic Messages, /messages
	Gemini                 // Gemini generateContent and streamGenerateContent
	Ollama                 // Ollama /api/chat and /api/generate, streamed as NDJSON
)

var formatNames = [...]string{
	Unknown:         "unknown",
	OpenAIChat:      "openai-chat",
	OpenAIResponses: "openai-responses",
	Anthropic:       "anthropic",
	Gemini:          "gemini",
	Ollama:          "ollama",
}

// String returns the format's name, such as "openai-chat".
func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("format(%d)", uint8(f))
}

// Detect returns the format of an HTTP exchange from its request method and
// URL (a full URL or just a path), and its response headers, which may be
// nil. The format follows from the path: requests are POSTs to a path
// ending in /chat/completions, /responses, /messages, /api/chat,
// /api/generate, or a Gemini model method such as
// models/NAME:streamGenerateContent (Anthropic models on Vertex AI, at
// :streamRawPredict, are Anthropic). A response whose Content-Type is none
// of the ones these APIs send (event streams, NDJSON, JSON, or plain text
// from a server that did not set one) is not an API response, such as a
// gateway's HTML error page, and gets Unknown.
//
// Whether a response is streamed is not part of the format: Reassemble
// tells it from the body.
func Detect(method, rawURL string, respHeaders http.Header) Format {
	if !apiContentType(respHeaders.Get("Content-Type")) {
		return Unknown
	}
	return RequestFormat(method, rawURL)
}

// RequestFormat returns the format of a request from its method and URL
// alone, as Detect tells it before the response is known: a POST to one
// of the paths Detect names.
//
// A WebSocket (a GET of a ws:// or wss:// URL, as the tap records one)
// to a path ending in /responses is OpenAIResponses: the Responses API's
// WebSocket mode, whose server messages are the events its event stream
// carries, one a message.
func RequestFormat(method, rawURL string) Format {
	if method == http.MethodGet && IsWebSocket(rawURL) && strings.HasSuffix(urlPath(rawURL), "/responses") {
		return OpenAIResponses
	}
	if method != http.MethodPost {
		return Unknown
	}
	path := urlPath(rawURL)
	if _, verb, ok := modelMethod(path); ok {
		switch verb {
		case "streamGenerateContent", "generateContent":
			return Gemini
		case "streamRawPredict", "rawPredict":
			if strings.Contains(path, "/publishers/anthropic/") {
				return Anthropic
			}
		}
		return Unknown
	}
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return OpenAIChat
	case strings.HasSuffix(path, "/responses"):
		return OpenAIResponses
	case strings.HasSuffix(path, "/messages"):
		return Anthropic
	case strings.HasSuffix(path, "/api/chat"), strings.HasSuffix(path, "/api/generate"):
		return Ollama
	}
	return Unknown
}

// IsWebSocket reports whether rawURL is a WebSocket's: ws:// or wss://,
// as the tap records the URL of a WebSocket's exchanges.
func IsWebSocket(rawURL string) bool {
	scheme, _, ok := strings.Cut(rawURL, "://")
	return ok && (strings.EqualFold(scheme, "ws") || strings.EqualFold(scheme, "wss"))
}

// WebSocketTurnEnd reports whether msg, a text message of the server's on
// a WebSocket of format f, ends the response to the agent's last message:
// for the Responses API, response.completed, response.failed,
// response.incomplete or error. The tap ends the message's exchange
// there, rather than at the agent's next message.
func WebSocketTurnEnd(f Format, msg []byte) bool {
	if f != OpenAIResponses {
		return false
	}
	var m struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return false
	}
	switch m.Type {
	case "response.completed", "response.failed", "response.incomplete", "error":
		return true
	}
	return false
}

// apiContentType reports whether a response with Content-Type ct can be an
// LLM API's response.
func apiContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch mt {
	case "text/event-stream", "application/x-ndjson", "application/ndjson", "application/json", "text/plain":
		return true
	}
	return strings.HasSuffix(mt, "+json")
}

// urlPath returns the unescaped path of rawURL, with a leading slash and
// without a trailing one.
func urlPath(rawURL string) string {
	path := rawURL
	if u, err := url.Parse(rawURL); err == nil {
		path = u.Path
	} else if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	path = strings.TrimSuffix(path, "/")
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return path
}

// modelMethod splits the last segment of a Google-style path such as
// /v1beta/models/gemini-2.5-pro:streamGenerateContent into the model name
// and the method.
func modelMethod(path string) (model, method string, ok bool) {
	seg := path[strings.LastIndexByte(path, '/')+1:]
	return strings.Cut(seg, ":")
}

// RequestInfo returns the model a request body of format f asks for and
// whether it asks for a streamed response. Gemini, and Anthropic on Vertex
// AI, name the model and the streaming in the URL rather than the body.
// Ollama streams unless told not to; the others only when told to. For
// Unknown it reads the common "model" and "stream" fields. A body that is
// not JSON gives no model.
func RequestInfo(f Format, rawURL string, body []byte) (model string, stream bool) {
	var req struct {
		Model  any `json:"model"`
		Stream any `json:"stream"`
	}
	// A field of an unexpected type is left unset, and the error saying
	// so tells nothing more.
	_ = json.Unmarshal(body, &req)
	model, _ = req.Model.(string)
	stream, set := req.Stream.(bool)
	switch f {
	case Gemini:
		name, verb, _ := modelMethod(urlPath(rawURL))
		return name, verb == "streamGenerateContent"
	case Anthropic:
		if name, verb, ok := modelMethod(urlPath(rawURL)); ok {
			return name, verb == "streamRawPredict"
		}
	case Ollama:
		if !set {
			stream = true
		}
	}
	return model, stream
}

// A Message is an LLM response reassembled from its wire format.
type Message struct {
	Model string `json:"model,omitempty"`
	ID    string `json:"id,omitempty"`
	// Text is the visible answer, a refusal included.
	Text string `json:"text,omitempty"`
	// Reasoning is the model's reasoning text or its summary. Separate
	// parts, such as the summary parts of OpenAI Responses, are joined
	// with a blank line.
	Reasoning string     `json:"reasoning,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Usage     Usage      `json:"usage"`
	// StopReason is the API's own word for why the response ended, such
	// as "stop", "tool_calls", "end_turn" or "STOP". For OpenAI
	// Responses it is the response status, or the reason a response is
	// incomplete.
	StopReason string `json:"stop_reason,omitempty"`
	// Events is the number of stream events (SSE events, NDJSON lines)
	// in the body; a plain JSON body counts as one, a Gemini JSON array
	// as its length.
	Events int `json:"events"`
	// Errors holds the API's error reports in the body, each as
	// "code: message".
	Errors []string `json:"errors,omitempty"`
}

// A ToolCall is a call of a client-side tool that the model asks for.
type ToolCall struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments is the argument text as the model produced it: JSON
	// for function calls, joined from the streamed fragments, and free
	// text for the custom tools of OpenAI Responses.
	Arguments string `json:"arguments"`
}

// Usage counts tokens in the same terms for every format. InputTokens
// includes the CachedTokens read from a prompt cache (Anthropic reports
// them apart; they are added here), and OutputTokens includes the
// ReasoningTokens (Gemini reports them apart). TotalTokens is the API's
// total, or the sum where the API reports none.
type Usage struct {
	InputTokens     int `json:"input_tokens"`
	OutputTokens    int `json:"output_tokens"`
	TotalTokens     int `json:"total_tokens"`
	CachedTokens    int `json:"cached_tokens"`
	ReasoningTokens int `json:"reasoning_tokens"`
}

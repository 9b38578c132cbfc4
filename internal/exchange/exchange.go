// Package exchange defines the recorded form of one agent↔LLM HTTP exchange.
//
// An Exchange is the one model of an exchange from the tap to the report.
// It takes three other forms, each for a reason: its stored JSON
// (Marshal, Unmarshal), which recordings and exports keep and old
// recordings still read; its head (UnmarshalHead), what replay keeps in
// memory of each exchange so that a long session's requests are loaded one
// at a time; and the tap process's binary encoding (proxy/tapproc), which
// carries it across a pipe without JSON's cost on every streamed chunk.
//
// An exchange has one identity once recorded: its number, 1-based among a
// recording's exchanges in recorded order, as `acptap show` prints it
// ("llm #3") and replay's faults, request comparisons and reports name it.
// Its event's Seq places it on the recording's timeline; the tap's id
// names it only while it is in flight, before it has a number.
package exchange

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Route names how the agent reached the tap.
const (
	RouteProxy   = "proxy"    // through HTTP(S)_PROXY, with CONNECT and TLS interception for https
	RouteBaseURL = "base-url" // through a rewritten base-URL variable (Exchange.BaseURLVar)
	RouteMCP     = "mcp"      // through the route of an HTTP MCP server the editor named (Exchange.MCPServer)
)

// Exchange is one HTTP request of the agent and the response it got, as
// recorded. Secrets are removed before an Exchange is stored; bodies are
// kept decoded, with the original Content-Encoding noted.
type Exchange struct {
	Route      string `json:"route"`                  // RouteProxy, RouteBaseURL or RouteMCP
	BaseURLVar string `json:"base_url_var,omitempty"` // the variable of a RouteBaseURL exchange
	// MCPServer is the MCP server of a RouteMCP exchange: its number,
	// 1-based, in the recording's list of MCP servers
	// (store.Recording.MCPServers, whose index is one less).
	MCPServer int `json:"mcp_server,omitempty"`

	Method string `json:"method"`
	URL    string `json:"url"` // the upstream URL, absolute
	Proto  string `json:"proto,omitempty"`

	RequestHeaders  http.Header `json:"request_headers"`
	RequestBody     []byte      `json:"request_body"`               // decoded
	RequestEncoding string      `json:"request_encoding,omitempty"` // the request's Content-Encoding as sent

	Status           int         `json:"status"` // 0 when no response arrived
	ResponseHeaders  http.Header `json:"response_headers,omitempty"`
	ResponseEncoding string      `json:"response_encoding,omitempty"` // the response's Content-Encoding as received
	// Chunks are the decoded response body in the pieces in which it
	// arrived, each with its time since the request started, so that a
	// replay can hand a client the same bytes at the same boundaries.
	Chunks []Chunk `json:"chunks,omitempty"`

	TTFB     time.Duration `json:"ttfb"`     // request start → response headers
	Duration time.Duration `json:"duration"` // request start → end of the response body

	// End is how the exchange ended, or EndInFlight while it has not.
	End End `json:"end"`
	// Error says, for people, why the exchange did not complete, in the
	// words of the error that ended it: "no response: dial tcp ...:
	// connection refused". Empty when it completed. Programs read End:
	// the wording may change from one acptap to the next.
	Error string `json:"error,omitempty"`
}

// Chunk is one piece of a response body; of a WebSocket exchange (see
// WebSocket), one message of the server's.
type Chunk struct {
	At   time.Duration `json:"at"` // since the request started
	Data []byte        `json:"data"`
	// Binary marks a WebSocket message that is binary; the others are
	// text.
	Binary bool `json:"binary,omitempty"`
}

// Body returns the whole decoded response body.
func (e *Exchange) Body() []byte {
	n := 0
	for _, c := range e.Chunks {
		n += len(c.Data)
	}
	b := make([]byte, 0, n)
	for _, c := range e.Chunks {
		b = append(b, c.Data...)
	}
	return b
}

// Marshal encodes e for the store.
func Marshal(e *Exchange) ([]byte, error) {
	if b, ok := encodeFast(e); ok {
		return b, nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encoding exchange %s %s: %w", e.Method, e.URL, err)
	}
	return b, nil
}

// Unmarshal decodes an exchange written by Marshal, or by an acptap that
// wrote format-2 recordings: those exchanges have no end, which is read
// from their error text and status instead (see legacyEnd). Whether an
// exchange has an end is what tells the two apart, not the format of its
// recording: rewriting a recording's agent lane (replay --update) makes it
// the current format and keeps its exchanges as they were written.
func Unmarshal(data []byte) (*Exchange, error) {
	if e, ok := decodeFast(data); ok {
		return e, nil
	}
	return unmarshalJSON(data)
}

// unmarshalJSON is Unmarshal by encoding/json, the reference decodeFast
// must agree with.
func unmarshalJSON(data []byte) (*Exchange, error) {
	var e Exchange
	// The outer End, shallower than Exchange's, takes the "end" field:
	// nil when there is none.
	v := struct {
		*Exchange
		End *End `json:"end"`
	}{Exchange: &e}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("decoding exchange: %w", err)
	}
	if v.End != nil {
		e.End = *v.End
	} else {
		e.End = legacyEnd(e.Status, e.Error)
	}
	return &e, nil
}

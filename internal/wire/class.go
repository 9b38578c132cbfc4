package wire

import (
	"fmt"

	"github.com/acptap/acptap/internal/exchange"
)

// A Class says what an exchange is to a replay: the wire formats' concern,
// not the recorded exchange's, which the store keeps without knowing of
// them. It is not stored: it
// follows from the exchange's route, method and URL (see ClassOf), so
// that recordings made before classes existed have them too, and a
// replay classes a live request as it classes the recorded ones.
type Class uint8

const (
	// ClassLLM is the agent's conversation with its LLM: an exchange
	// that came through a base-URL route, or whose request is a
	// generation call of an LLM API (LLMRequest). A replay answers
	// these positionally.
	ClassLLM Class = iota + 1
	// ClassHTTP is the agent's other HTTP through the forward proxy:
	// package registries, update checks, telemetry, probes such as a
	// HEAD /. A replay answers these by method and URL.
	ClassHTTP
	// ClassMCP is the agent's traffic with an HTTP MCP server the editor
	// named, through the server's own route (exchange.RouteMCP). A
	// replay answers these by their JSON-RPC messages, as it answers a
	// stdio MCP server.
	ClassMCP
)

// String returns "llm", "http" or "mcp", the words of `acptap show --json`.
func (c Class) String() string {
	switch c {
	case ClassLLM:
		return "llm"
	case ClassHTTP:
		return "http"
	case ClassMCP:
		return "mcp"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// ClassOf returns the class of a request that reached the tap by route
// (exchange.RouteProxy, exchange.RouteBaseURL, exchange.RouteMCP, or ""
// when not known): an MCP route's is ClassMCP; a base-URL route is there
// for the LLM, so everything that comes through one is ClassLLM, as is a
// WebSocket's exchange (a ws:// or wss:// URL); anything else is ClassLLM
// if LLMRequest recognises it, and ClassHTTP otherwise.
func ClassOf(route, method, rawURL string) Class {
	if route == exchange.RouteMCP {
		return ClassMCP
	}
	// A WebSocket's messages are a conversation, whatever its API:
	// answered in order, never by URL.
	if route == exchange.RouteBaseURL || LLMRequest(method, rawURL) || IsWebSocket(rawURL) {
		return ClassLLM
	}
	return ClassHTTP
}

// ClassOfExchange returns the class of a recorded exchange (see ClassOf).
func ClassOfExchange(e *exchange.Exchange) Class { return ClassOf(e.Route, e.Method, e.URL) }

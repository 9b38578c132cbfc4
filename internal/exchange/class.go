package exchange

import (
	"context"
	"fmt"

	"github.com/acptap/acptap/internal/wire"
)

// A Class says what an exchange is to a replay. It is not stored: it
// follows from the exchange's route, method and URL (see ClassOf), so
// that recordings made before classes existed have them too, and a
// replay classes a live request as it classes the recorded ones.
type Class uint8

const (
	// ClassLLM is the agent's conversation with its LLM: an exchange
	// that came through a base-URL route, or whose request is a
	// generation call of an LLM API (wire.LLMRequest). A replay answers
	// these positionally.
	ClassLLM Class = iota + 1
	// ClassHTTP is the agent's other HTTP through the forward proxy:
	// package registries, update checks, telemetry, probes such as a
	// HEAD /. A replay answers these by method and URL.
	ClassHTTP
)

// String returns "llm" or "http", the words of `acptap show --json`.
func (c Class) String() string {
	switch c {
	case ClassLLM:
		return "llm"
	case ClassHTTP:
		return "http"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// ClassOf returns the class of a request that reached the tap by route
// (RouteProxy, RouteBaseURL, or "" when not known): a base-URL route is
// there for the LLM, so everything that comes through one is ClassLLM;
// anything else is ClassLLM if wire.LLMRequest recognises it, and
// ClassHTTP otherwise.
func ClassOf(route, method, rawURL string) Class {
	if route == RouteBaseURL || wire.LLMRequest(method, rawURL) {
		return ClassLLM
	}
	return ClassHTTP
}

// Class returns the class of e (see ClassOf).
func (e *Exchange) Class() Class { return ClassOf(e.Route, e.Method, e.URL) }

// routeKey is the context key of ContextWithRoute.
type routeKey struct{}

// routeInfo is what ContextWithRoute keeps.
type routeInfo struct{ route, varName string }

// ContextWithRoute returns ctx saying that its request reached the tap by
// route, through the base-URL variable varName for RouteBaseURL. The tap
// sets it on the requests it hands its Transport, which can read it with
// RouteFromContext.
func ContextWithRoute(ctx context.Context, route, varName string) context.Context {
	return context.WithValue(ctx, routeKey{}, routeInfo{route, varName})
}

// RouteFromContext returns what ContextWithRoute put into ctx; ok is false
// if nothing was.
func RouteFromContext(ctx context.Context) (route, varName string, ok bool) {
	ri, ok := ctx.Value(routeKey{}).(routeInfo)
	return ri.route, ri.varName, ok
}

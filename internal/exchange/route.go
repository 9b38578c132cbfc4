package exchange

import "context"

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

package exchange

import (
	"context"
	"testing"
)

func TestContextWithRoute(t *testing.T) {
	if _, _, ok := RouteFromContext(context.Background()); ok {
		t.Errorf("RouteFromContext of a bare context: ok, want not")
	}
	ctx := ContextWithRoute(context.Background(), RouteBaseURL, "OPENAI_BASE_URL")
	route, v, ok := RouteFromContext(ctx)
	if !ok || route != RouteBaseURL || v != "OPENAI_BASE_URL" {
		t.Errorf("RouteFromContext = %q, %q, %v; want base-url, OPENAI_BASE_URL, true", route, v, ok)
	}
}

package wire

import (
	"testing"

	"github.com/acptap/acptap/internal/exchange"
)

// TestClass: an exchange's class follows from its route and request, the
// same for a recorded exchange as for the request of a live one.
func TestClass(t *testing.T) {
	tests := []struct {
		route, method, url string
		want               Class
	}{
		{exchange.RouteProxy, "POST", "https://api.openai.com/v1/chat/completions", ClassLLM},
		{exchange.RouteProxy, "POST", "https://api.anthropic.com/v1/messages", ClassLLM},
		{"", "POST", "http://localhost:11434/api/chat", ClassLLM},
		// Whatever comes through a base-URL route is for the LLM, a
		// probe of the base URL too.
		{exchange.RouteBaseURL, "HEAD", "https://api.anthropic.com/", ClassLLM},
		{exchange.RouteBaseURL, "GET", "https://api.openai.com/v1/models", ClassLLM},
		{exchange.RouteProxy, "HEAD", "https://api.anthropic.com/", ClassHTTP},
		{exchange.RouteProxy, "GET", "https://registry.npmjs.org/left-pad", ClassHTTP},
		{exchange.RouteProxy, "POST", "https://api.anthropic.com/v1/messages/count_tokens", ClassHTTP},
		{exchange.RouteProxy, "GET", "http://127.0.0.1:4096/state", ClassHTTP},
		{"", "POST", "https://telemetry.example/v1/events", ClassHTTP},
	}
	for _, tt := range tests {
		x := &exchange.Exchange{Route: tt.route, Method: tt.method, URL: tt.url}
		if got := ClassOfExchange(x); got != tt.want {
			t.Errorf("class of %s %s by %q = %v, want %v", tt.method, tt.url, tt.route, got, tt.want)
		}
		if got := ClassOf(tt.route, tt.method, tt.url); got != tt.want {
			t.Errorf("ClassOf(%q, %q, %q) = %v, want %v", tt.route, tt.method, tt.url, got, tt.want)
		}
	}
	for c, want := range map[Class]string{ClassLLM: "llm", ClassHTTP: "http", 0: "class(0)"} {
		if got := c.String(); got != want {
			t.Errorf("Class(%d).String() = %q, want %q", uint8(c), got, want)
		}
	}
}

// TestClassOfFormat2: an exchange of a recording made before classes
// existed has its class.
func TestClassOfFormat2(t *testing.T) {
	x, err := exchange.Unmarshal([]byte(`{"route":"proxy","method":"GET","url":"https://registry.npmjs.org/left-pad","status":200}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := ClassOfExchange(x); got != ClassHTTP {
		t.Errorf("class %v, want http", got)
	}
}

// TestClassWebSocket: a WebSocket's exchanges are the LLM's class, of a
// known API or not.
func TestClassWebSocket(t *testing.T) {
	for _, u := range []string{"wss://api.openai.com/v1/responses", "wss://api.example/v1/realtime", "ws://127.0.0.1:9/socket"} {
		if got := ClassOf(exchange.RouteProxy, "GET", u); got != ClassLLM {
			t.Errorf("ClassOf(proxy, GET %s) = %v, want llm", u, got)
		}
	}
}

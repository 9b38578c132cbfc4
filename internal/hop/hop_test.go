package hop

import (
	"net/http"
	"reflect"
	"testing"
)

// TestRemoveHeaders: the hop-by-hop headers go, with those the Connection
// header names, in any case and spacing; the end-to-end headers stay.
func TestRemoveHeaders(t *testing.T) {
	h := http.Header{
		"Connection":          {"keep-alive, X-Hop-One", " x-hop-two ,,"},
		"Proxy-Connection":    {"keep-alive"},
		"Keep-Alive":          {"timeout=5"},
		"Proxy-Authenticate":  {"Basic"},
		"Proxy-Authorization": {"Basic c2VjcmV0"},
		"Te":                  {"trailers"},
		"Trailer":             {"X-Checksum"},
		"Transfer-Encoding":   {"chunked"},
		"Upgrade":             {"websocket"},
		"X-Hop-One":           {"1"},
		"X-Hop-Two":           {"2"},
		"Content-Type":        {"text/event-stream"},
		"Content-Encoding":    {"gzip"},
		"Authorization":       {"Bearer sk"},
	}
	RemoveHeaders(h)
	want := http.Header{
		"Content-Type":     {"text/event-stream"},
		"Content-Encoding": {"gzip"},
		"Authorization":    {"Bearer sk"},
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("after RemoveHeaders: %v, want %v", h, want)
	}
	RemoveHeaders(nil) // reading and deleting from a nil Header is fine
}

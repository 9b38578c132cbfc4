package proxy

import (
	"bytes"
	"net/url"
	"testing"
)

// FuzzEndpointRewriter: however a stream is cut into reads, the agent
// gets the same bytes; a stream whose first event is no endpoint event
// passes as it is.
func FuzzEndpointRewriter(f *testing.F) {
	f.Add([]byte("event: endpoint\ndata: /messages?sessionId=1\n\nevent: message\ndata: {}\n\n"), uint8(7))
	f.Add([]byte("event: endpoint\r\ndata: http://up.test:8080/m\r\n\r\n"), uint8(3))
	f.Add([]byte("data: {}\n\n"), uint8(1))
	f.Add([]byte("event: endpoint\ndata: /x"), uint8(2))
	f.Fuzz(func(t *testing.T, stream []byte, cut uint8) {
		up, _ := url.Parse("http://up.test:8080/sse")
		rt := &route{t: &Tap{secret: "S"}, mcpServer: 1, upstream: up, localURL: "http://127.0.0.1:1/S/sse"}
		whole := &endpointRewriter{rt: rt}
		want := append(whole.rewrite(bytes.Clone(stream)), whole.flush()...)
		pieces := &endpointRewriter{rt: rt}
		var got []byte
		step := int(cut)%7 + 1
		for i := 0; i < len(stream); i += step {
			got = append(got, pieces.rewrite(bytes.Clone(stream[i:min(i+step, len(stream))]))...)
		}
		got = append(got, pieces.flush()...)
		if !bytes.Equal(got, want) {
			t.Fatalf("in pieces of %d: %q\nwhole: %q", step, got, want)
		}
		if end := eventEnd(stream); end >= 0 && !bytes.Contains(stream[:end], []byte("endpoint")) && !bytes.Equal(want, stream) {
			t.Fatalf("a stream without an endpoint event changed: %q → %q", stream, want)
		}
	})
}

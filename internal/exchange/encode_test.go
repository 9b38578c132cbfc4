package exchange

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// encodeSamples are exchanges whose encodings encodeFast must write as
// encoding/json does: every omitted and null field, and strings of every
// kind of byte that JSON escapes.
var encodeSamples = []Exchange{
	{},
	{Method: "GET", URL: "http://x/", RequestHeaders: http.Header{}, RequestBody: []byte{}, ResponseHeaders: http.Header{}, Chunks: []Chunk{}},
	{Route: RouteMCP, MCPServer: 3, Method: "POST", URL: "http://127.0.0.1:9/mcp", RequestBody: []byte(`{"jsonrpc":"2.0"}`), Status: 200},
	{
		Route: RouteBaseURL, BaseURLVar: "OPENAI_BASE_URL", Method: "POST", URL: "https://api.test/v1/x?a=1&b=<2>", Proto: "HTTP/2.0",
		RequestHeaders:  http.Header{"Content-Type": {"application/json"}, "X-Nil": nil, "X-Empty": {}, "A": {"1", "2"}, "Ünïcode\u2028": {"\x00\x1f\b\f\n\r\t\"\\\x7f"}},
		RequestBody:     []byte("{\"model\":\"m\"}\xff"),
		RequestEncoding: "zstd",
		Status:          200, ResponseHeaders: http.Header{"Content-Type": {"text/event-stream"}, "Bad": {"\xff\xfe ok \u2029 é"}},
		ResponseEncoding: "gzip",
		Chunks:           []Chunk{{At: time.Millisecond, Data: []byte("data: a\n\n")}, {At: -1, Data: nil}, {Data: []byte{}, Binary: true}},
		TTFB:             time.Millisecond, Duration: 3 * time.Millisecond, End: EndCut, Error: "response cut <&> \xc3",
	},
}

// TestEncodeFast: encodeFast writes what encoding/json writes.
func TestEncodeFast(t *testing.T) {
	for i := range encodeSamples {
		checkEncode(t, &encodeSamples[i])
	}
	if _, ok := encodeFast(&Exchange{End: End(len(endWords))}); ok {
		t.Errorf("encodeFast of an End that is no End succeeded; want it left to encoding/json")
	}
}

// FuzzEncodeFast: encodeFast writes what encoding/json writes, whatever
// the strings and bytes.
func FuzzEncodeFast(f *testing.F) {
	f.Add("POST", "http://x/?q=<&>", "Content-Type", "text/plain", []byte("body"), []byte("data: 1\n\n"), "cut \xff", int64(5), uint8(3))
	f.Add("", "", "", "", []byte(nil), []byte{}, "", int64(-1), uint8(0))
	f.Add("\u2028", "\x00", "\xff", "\u2029\"\\", []byte{0, 255}, []byte("é"), "\t\b\f", int64(1<<62), uint8(6))
	f.Fuzz(func(t *testing.T, method, url, key, value string, body, chunk []byte, errText string, at int64, end uint8) {
		e := &Exchange{
			Route: RouteProxy, Method: method, URL: url, Proto: value,
			RequestHeaders: http.Header{key: {value, method}, "B": nil},
			RequestBody:    body, RequestEncoding: key,
			Status: int(at % 600), ResponseHeaders: http.Header{value: {key}},
			ResponseEncoding: errText,
			Chunks:           []Chunk{{At: time.Duration(at), Data: chunk}, {Data: body}},
			TTFB:             time.Duration(at), Duration: time.Duration(-at),
			End: End(end % uint8(len(endWords))), Error: errText,
		}
		checkEncode(t, e)
	})
}

// checkEncode fails unless encodeFast and encoding/json agree on e.
func checkEncode(t *testing.T, e *Exchange) {
	t.Helper()
	want, err := json.Marshal(e)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	got, ok := encodeFast(e)
	if !ok || !bytes.Equal(got, want) {
		t.Errorf("encodeFast:\n got %s (ok %v)\nwant %s", got, ok, want)
	}
}

// BenchmarkMarshal encodes a 1 KiB request answered with 1 KiB, and a
// stream of 100 events, as the tap records them.
func BenchmarkMarshal(b *testing.B) {
	h := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"Go-http-client/1.1"}, "Authorization": {"[REDACTED]"}, "Date": {"Tue, 01 Dec 2026 17:00:00 GMT"}}
	small := &Exchange{
		Route: RouteBaseURL, BaseURLVar: "OPENAI_BASE_URL", Method: "POST", URL: "http://127.0.0.1:1/v1/chat/completions",
		RequestHeaders: h, RequestBody: bytes.Repeat([]byte("x"), 1024), Status: 200, ResponseHeaders: h,
		Chunks: []Chunk{{At: time.Millisecond, Data: bytes.Repeat([]byte("y"), 1024)}}, End: EndComplete,
	}
	stream := *small
	stream.RequestBody = nil
	stream.Chunks = nil
	for i := range 100 {
		stream.Chunks = append(stream.Chunks, Chunk{At: time.Duration(i) * time.Microsecond, Data: []byte(`data: {"choices":[{"index":0,"delta":{"content":"token"}}],"obfuscation":"abcdef"}` + "\n\n")})
	}
	for _, x := range []struct {
		name string
		e    *Exchange
	}{{"request", small}, {"stream", &stream}} {
		b.Run(x.name+"/fast", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				encodeFast(x.e)
			}
		})
		b.Run(x.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				json.Marshal(x.e)
			}
		})
	}
}

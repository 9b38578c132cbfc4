package tapproc

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
)

// sampleExchange has every field set, nil and empty apart where they can
// be.
func sampleExchange() *exchange.Exchange {
	return &exchange.Exchange{
		Route:           exchange.RouteBaseURL,
		BaseURLVar:      "OPENAI_BASE_URL",
		Method:          "POST",
		URL:             "https://api.example.com/v1/responses?key=k",
		Proto:           "HTTP/2.0",
		RequestHeaders:  http.Header{"Content-Type": {"application/json"}, "X-Empty": {}, "X-Nil": nil, "X-Two": {"a", ""}},
		RequestBody:     []byte(`{"input":"hi"}`),
		RequestEncoding: "zstd",
		Status:          200,
		ResponseHeaders: http.Header{},
		Chunks: []exchange.Chunk{
			{At: time.Millisecond, Data: []byte("data: {\"a\":1}\n\n")},
			{At: -1, Data: []byte{}},
			{At: 2 * time.Second, Data: []byte{0xff, 0xfe, '\n'}, Binary: true},
		},
		ResponseEncoding: "gzip",
		TTFB:             3 * time.Millisecond,
		Duration:         time.Hour,
		End:              exchange.EndCut,
		Error:            "response cut after 12 bytes: EOF",
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for _, x := range []*exchange.Exchange{sampleExchange(), {}, {RequestBody: []byte{}, Chunks: []exchange.Chunk{}}} {
		got, err := decodeExchange(appendExchange(nil, x))
		if err != nil {
			t.Fatalf("decoding %+v: %v", x, err)
		}
		if !reflect.DeepEqual(got, x) {
			t.Errorf("got %+v\nwant %+v", got, x)
		}
	}
	// Every cut of an encoding is refused, as is anything after one.
	b := appendExchange(nil, sampleExchange())
	for i := range len(b) {
		if _, err := decodeExchange(b[:i]); err == nil {
			t.Fatalf("the first %d of %d bytes decoded", i, len(b))
		}
	}
	if _, err := decodeExchange(append(b, 0)); err == nil {
		t.Error("an encoding with a byte after it decoded")
	}
}

func BenchmarkCodec(b *testing.B) {
	x := sampleExchange()
	x.RequestBody = bytes.Repeat([]byte("x"), 1024)
	x.Chunks = []exchange.Chunk{{Data: bytes.Repeat([]byte("y"), 1024)}}
	b.Run("append", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = appendExchange(buf[:0], x)
		}
	})
	b.Run("marshal", func(b *testing.B) {
		for b.Loop() {
			exchange.Marshal(x)
		}
	})
	enc := appendExchange(nil, x)
	json, _ := exchange.Marshal(x)
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			decodeExchange(enc)
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		for b.Loop() {
			exchange.Unmarshal(json)
		}
	})
}

// FuzzCodec checks that exchanges built from the input survive the round
// trip, and that decoding the input itself never panics and gives what
// encodes to something that decodes the same.
func FuzzCodec(f *testing.F) {
	f.Add(appendExchange(nil, sampleExchange()), "k", int64(5))
	f.Add([]byte{}, "", int64(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "x", int64(-1))
	f.Fuzz(func(t *testing.T, data []byte, s string, n int64) {
		x := &exchange.Exchange{
			Method:          s,
			URL:             string(data),
			RequestHeaders:  http.Header{s: {string(data), s}},
			RequestBody:     data,
			Status:          int(n),
			Chunks:          []exchange.Chunk{{At: time.Duration(n), Data: data}, {Data: []byte(s)}},
			Duration:        time.Duration(-n),
			End:             exchange.End(uint8(n)),
			ResponseHeaders: http.Header{},
		}
		got, err := decodeExchange(appendExchange(nil, x))
		if err != nil || !reflect.DeepEqual(got, x) {
			t.Fatalf("round trip of %+v: got %+v, %v", x, got, err)
		}
		if y, err := decodeExchange(data); err == nil {
			again, err := decodeExchange(appendExchange(nil, y))
			if err != nil || !reflect.DeepEqual(again, y) {
				t.Fatalf("%+v, decoded from the input, does not round-trip: %+v, %v", y, again, err)
			}
		}
	})
}

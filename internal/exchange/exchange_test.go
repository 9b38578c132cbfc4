package exchange

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"
	"time"
)

func TestMarshalRoundTrip(t *testing.T) {
	e := &Exchange{
		Route: RouteBaseURL, BaseURLVar: "OPENAI_BASE_URL",
		Method: "POST", URL: "https://api.test/v1/responses", Proto: "HTTP/2.0",
		RequestHeaders:  http.Header{"Content-Type": {"application/json"}},
		RequestBody:     []byte("{\"model\":\"m\"}\xff"),
		RequestEncoding: "zstd",
		Status:          200, ResponseHeaders: http.Header{"Content-Type": {"text/event-stream"}},
		ResponseEncoding: "gzip",
		Chunks:           []Chunk{{At: time.Millisecond, Data: []byte("data: a\n\n")}, {At: 2 * time.Millisecond, Data: []byte("data: b\r\n\r\n")}},
		TTFB:             time.Millisecond, Duration: 3 * time.Millisecond, End: EndCut, Error: "response cut",
	}
	b, err := Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, e)
	}
	if want := "data: a\n\ndata: b\r\n\r\n"; string(got.Body()) != want {
		t.Errorf("Body() = %q, want %q", got.Body(), want)
	}
}

func TestUnmarshalRejectsGarbage(t *testing.T) {
	for _, in := range []string{"", "{", "[]", `{"status":"x"}`} {
		if _, err := Unmarshal([]byte(in)); err == nil {
			t.Errorf("Unmarshal(%q) succeeded, want an error", in)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	b, _ := Marshal(&Exchange{Method: "GET", URL: "http://x/", Chunks: []Chunk{{Data: []byte("hi")}}})
	f.Add(b)
	f.Add([]byte(`{"chunks":[{"at":1,"data":"aGk="}]}`))
	f.Add([]byte(`{"status":200,"error":"response cut after 3 bytes: the client went away"}`))
	f.Add([]byte(`{"status":200,"end":"cut","error":"x"}`))
	for _, s := range fastSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFast(t, data)
		e, err := Unmarshal(data)
		if err != nil {
			return
		}
		// Whatever decodes must encode and decode to the same thing.
		b, err := Marshal(e)
		if err != nil {
			t.Fatalf("Marshal after Unmarshal: %v", err)
		}
		e2, err := Unmarshal(b)
		if err != nil {
			t.Fatalf("Unmarshal(Marshal(e)): %v", err)
		}
		if !bytes.Equal(e.Body(), e2.Body()) || e.URL != e2.URL || e.Status != e2.Status || e.End != e2.End || e.Error != e2.Error {
			t.Fatalf("round trip changed the exchange")
		}
	})
}

// fastSamples are stored forms that the fast decoder must decode as
// encoding/json does, or leave to it.
var fastSamples = []string{
	`{"route":"proxy","method":"POST","url":"https://x/v1","request_headers":{"A":["1","2"],"B":null},"request_body":"eyJtIjoxfQ==","status":200,"chunks":[{"at":5,"data":"aGk="},{"at":null,"data":null}],"ttfb":1,"duration":2,"end":"complete"}`,
	`{"method":"GET","end":null,"status":500,"error":"x"}`,
	`{"method":"GET","status":200,"error":"response cut after 3 bytes: the client went away"}`,
	`{"Method":"GET"}`, `{"method":"GET","METHOD":"PUT"}`, `{"method":"GET","method":"PUT"}`,
	`{"\u006dethod":"GET"}`, `{"ſtatus":1}`, `{"status":1.0}`, `{"status":1e2}`, `{"status":-0}`,
	`{"status":99999999999999999999}`, `{"status":"200"}`, `{"url":"a\u00e9\n"}`, "{\"url\":\"\xff\"}",
	`{"request_body":"aGk"}`, `{"request_body":"aG\u006b="}`, `{"request_body":"aGk=\r\n"}`, `{"request_body":""}`,
	`{"chunks":[]}`, `{"chunks":[null]}`, `{"chunks":[{"AT":1}]}`, `{"chunks":[{"at":1,"at":2}]}`, `{"chunks":{}}`,
	`{"end":"sideways"}`, `{"end":1}`, `{"request_headers":[]}`, `{"request_headers":{"A":"x"}}`,
	`null`, `[]`, `{}`, `{"method":"GET"} x`, `{"other":[1,{"method":2}],"method":"GET"}`,
}

func TestDecodeFastAgrees(t *testing.T) {
	for _, s := range fastSamples {
		checkFast(t, []byte(s))
	}
	// What Marshal writes takes the fast path.
	e := &Exchange{
		Route: RouteBaseURL, BaseURLVar: "OPENAI_BASE_URL", Method: "POST", URL: "https://api.test/v1/responses",
		RequestHeaders: http.Header{"Content-Type": {"application/json"}}, RequestBody: []byte(`{"model":"m","input":"caf\u00e9 \"q\""}`),
		Status: 200, Chunks: []Chunk{{At: time.Millisecond, Data: []byte("data: a\n\n")}}, End: EndComplete,
		Error: "line\nbreak \xff", TTFB: 3, Duration: 4,
	}
	for _, x := range []*Exchange{e, {}, {Method: "GET", End: EndInFlight}} {
		b, err := Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := decodeFast(b); !ok {
			t.Errorf("decodeFast(%s) left it to encoding/json, want it decoded", b)
		}
		checkFast(t, b)
	}
}

// checkFast checks that decodeFast, where it decodes data, decodes it as
// encoding/json does.
func checkFast(t *testing.T, data []byte) {
	t.Helper()
	got, ok := decodeFast(data)
	if !ok {
		return
	}
	want, err := unmarshalJSON(data)
	if err != nil {
		t.Fatalf("decodeFast(%q) decoded what encoding/json refuses: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeFast(%q):\n got %+v\nwant %+v", data, got, want)
	}
}

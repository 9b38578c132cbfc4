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
	f.Fuzz(func(t *testing.T, data []byte) {
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

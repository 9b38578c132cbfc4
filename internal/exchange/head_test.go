package exchange

import (
	"net/http"
	"reflect"
	"testing"
	"time"
)

// head returns the fields of e that UnmarshalHead decodes.
func head(e *Exchange) Exchange {
	return Exchange{Route: e.Route, Method: e.Method, URL: e.URL, Status: e.Status, RequestBody: e.RequestBody}
}

// checkHead checks that UnmarshalHead decodes the head of what Unmarshal
// decodes, and fails where Unmarshal fails only over a skipped value, and
// that its rest, with the head's request body, decodes as data does.
func checkHead(t *testing.T, data []byte) {
	t.Helper()
	got, rest, herr := UnmarshalHead(data)
	want, err := Unmarshal(data)
	switch {
	case err == nil && herr != nil:
		t.Fatalf("UnmarshalHead(%q): %v, want the head of what Unmarshal decodes", data, herr)
	case err == nil && !reflect.DeepEqual(head(got), head(want)):
		t.Fatalf("UnmarshalHead(%q):\n got %+v\nwant %+v", data, head(got), head(want))
	case herr != nil && err.Error() != herr.Error():
		t.Fatalf("UnmarshalHead(%q) failed with %q, want Unmarshal's %q", data, herr, err)
	case herr != nil:
		return
	}
	whole, rerr := Unmarshal(rest)
	if (rerr == nil) != (err == nil) {
		t.Fatalf("Unmarshal of the rest %q: %v; of the whole %q: %v", rest, rerr, data, err)
	}
	if err != nil {
		return
	}
	whole.RequestBody = got.RequestBody
	if !reflect.DeepEqual(whole, want) {
		t.Fatalf("Unmarshal of the rest %q with the head's body:\n got %+v\nwant %+v", rest, whole, want)
	}
}

func TestUnmarshalHead(t *testing.T) {
	e := &Exchange{
		Route: RouteBaseURL, BaseURLVar: "OPENAI_BASE_URL", Method: "POST", URL: "https://api.test/v1/responses",
		RequestHeaders: http.Header{"Content-Type": {"application/json"}}, RequestBody: []byte(`{"model":"m","input":"caf\u00e9"}`),
		Status: 200, Chunks: []Chunk{{At: time.Millisecond, Data: []byte("data: a\n\n")}}, End: EndComplete, TTFB: 3, Duration: 4,
	}
	b, err := Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, rest, err := UnmarshalHead(b)
	if err != nil {
		t.Fatal(err)
	}
	// The rest has no body to decode again.
	if x, err := Unmarshal(rest); err != nil || x.RequestBody != nil || len(rest) >= len(b)-len(e.RequestBody) {
		t.Errorf("rest %s decodes to a request body %q (%v), want %d bytes less than the whole and no body", rest, x.RequestBody, err, len(e.RequestBody))
	}
	checkHead(t, b)
	// Only the head: the rest, the chunks above all, is skipped.
	if want := head(e); !reflect.DeepEqual(*got, want) {
		t.Errorf("UnmarshalHead:\n got %+v\nwant %+v", *got, want)
	}
	for _, s := range fastSamples {
		checkHead(t, []byte(s))
	}
	for _, in := range []string{"", "{", "[]", `{"status":"x"}`, "not an exchange"} {
		checkHead(t, []byte(in))
		if _, _, err := UnmarshalHead([]byte(in)); err == nil {
			t.Errorf("UnmarshalHead(%q) succeeded, want an error", in)
		}
	}
	// A skipped value is not checked: Unmarshal finds it.
	bad := []byte(`{"method":"POST","url":"https://x/v1","chunks":[{"at":1,"data":"not base64"}]}`)
	if _, _, err := UnmarshalHead(bad); err != nil {
		t.Errorf("UnmarshalHead(%s): %v, want its head", bad, err)
	}
	if _, err := Unmarshal(bad); err == nil {
		t.Errorf("Unmarshal(%s) succeeded, want an error", bad)
	}
}

func FuzzUnmarshalHead(f *testing.F) {
	for _, s := range fastSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkHead(t, data) })
}

// BenchmarkUnmarshal decodes a stored exchange of a long session whole
// and only its head: a request of 140 KiB, a response of 8 chunks.
func BenchmarkUnmarshal(b *testing.B) {
	body := []byte(`{"model":"m","messages":[`)
	for i := 0; len(body) < 140<<10; i++ {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"role":"user","content":"question: what changed in this step of the build? and why?"}`...)
	}
	body = append(body, "]}"...)
	e := &Exchange{Method: "POST", URL: "https://api.test/v1/chat/completions", RequestHeaders: http.Header{"Content-Type": {"application/json"}}, RequestBody: body, Status: 200, End: EndComplete}
	for i := range 8 {
		e.Chunks = append(e.Chunks, Chunk{At: time.Duration(i), Data: []byte(`data: {"choices":[{"delta":{"content":"part of the answer"}}]}` + "\n\n")})
	}
	data, err := Marshal(e)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("whole", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Unmarshal(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("head", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, _, err := UnmarshalHead(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package redact

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
)

const planted = "sk-planted-0123456789abcdef"

func TestNewPicksSecretLookingVariables(t *testing.T) {
	r := New([]string{
		"OPENAI_API_KEY=" + planted,
		"GITHUB_TOKEN=ghp_abcdefghijklmnop",
		"DB_PASSWORD=hunter2hunter2",
		"MY_SECRET=s3cr3t-value-x",
		"PATH=/usr/local/bin:/usr/bin",
		"HOME=/home/someone",
		"SHORT_KEY=abc",
		"EMPTY_TOKEN=",
		"NOEQUALS",
	})
	for _, v := range []string{planted, "ghp_abcdefghijklmnop", "hunter2hunter2", "s3cr3t-value-x"} {
		if got := r.String("x " + v + " y"); strings.Contains(got, v) {
			t.Errorf("String kept secret %q: %q", v, got)
		}
	}
	for _, v := range []string{"/usr/local/bin", "/home/someone", "abc"} {
		if got := r.String("x " + v + " y"); got != "x "+v+" y" {
			t.Errorf("String(%q) = %q, want it unchanged", v, got)
		}
	}
	if got, want := r.String("key="+planted), "key=[REDACTED:OPENAI_API_KEY]"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestHeader(t *testing.T) {
	r := New([]string{"ANTHROPIC_API_KEY=" + planted})
	h := http.Header{
		"Authorization":       {"Bearer " + planted},
		"X-Api-Key":           {planted},
		"X-Goog-Api-Key":      {"AIzaSyPlanted"},
		"Cookie":              {"session=abc; other=def"},
		"Set-Cookie":          {"id=xyz; Path=/"},
		"Proxy-Authorization": {"Basic dXNlcjpwYXNz"},
		"X-Custom":            {"prefix-" + planted},
		"Content-Type":        {"application/json"},
	}
	got := r.Header(h)
	want := http.Header{
		"Authorization":       {"Bearer [REDACTED]"},
		"X-Api-Key":           {"[REDACTED]"},
		"X-Goog-Api-Key":      {"[REDACTED]"},
		"Cookie":              {"[REDACTED]"},
		"Set-Cookie":          {"[REDACTED]"},
		"Proxy-Authorization": {"Basic [REDACTED]"},
		"X-Custom":            {"prefix-[REDACTED:ANTHROPIC_API_KEY]"},
		"Content-Type":        {"application/json"},
	}
	for k, v := range want {
		if g := got.Get(k); g != v[0] {
			t.Errorf("header %s = %q, want %q", k, g, v[0])
		}
	}
	if h.Get("Authorization") != "Bearer "+planted {
		t.Errorf("Header changed its argument")
	}
}

func TestURL(t *testing.T) {
	r := New([]string{"GEMINI_API_KEY=" + planted})
	tests := []struct{ in, want string }{
		{"https://generativelanguage.googleapis.com/v1beta/models/g:streamGenerateContent?alt=sse&key=AIzaSecret",
			"https://generativelanguage.googleapis.com/v1beta/models/g:streamGenerateContent?alt=sse&key=%5BREDACTED%5D"},
		{"https://x.test/p?API_KEY=abc&q=1", "https://x.test/p?API_KEY=%5BREDACTED%5D&q=1"},
		{"https://user:pass@x.test/p", "https://%5BREDACTED%5D@x.test/p"},
		{"https://x.test/p/" + planted + "/q", "https://x.test/p/[REDACTED:GEMINI_API_KEY]/q"},
		{"https://x.test/p?q=1", "https://x.test/p?q=1"},
	}
	for _, tt := range tests {
		if got := r.URL(tt.in); got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestExchangeMasksEverywhere(t *testing.T) {
	r := New([]string{"OPENAI_API_KEY=" + planted, "SLASHY_TOKEN=abc/def/ghi/jkl"})
	half := len(planted) / 2
	e := &exchange.Exchange{
		URL:             "https://api.test/v1?key=" + planted,
		RequestHeaders:  http.Header{"Authorization": {"Bearer " + planted}},
		RequestBody:     []byte(`{"note":"my key is ` + planted + `","path":"abc\/def\/ghi\/jkl"}`),
		ResponseHeaders: http.Header{"Set-Cookie": {"a=b"}},
		Chunks: []exchange.Chunk{
			{At: 1, Data: []byte("data: " + planted[:half])},
			{At: 2, Data: []byte(planted[half:] + "\n\n")},
		},
		Error: "upstream said " + planted,
	}
	r.Exchange(e)
	b, err := exchange.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{planted, "abc/def/ghi/jkl", `abc\/def\/ghi\/jkl`, `abc\\/def`} {
		if bytes.Contains(b, []byte(s)) || bytes.Contains(e.Body(), []byte(s)) {
			t.Errorf("secret %q survived redaction: %s", s, b)
		}
	}
	if got, want := string(e.Body()), "data: [REDACTED:OPENAI_API_KEY]\n\n"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	if len(e.Chunks) != 1 || e.Chunks[0].At != 1 {
		t.Errorf("chunks = %+v, want one chunk at the first chunk's time", e.Chunks)
	}
}

func TestZeroAndNilRedactor(t *testing.T) {
	var nilR *Redactor
	if got := string(nilR.Bytes([]byte("x"))); got != "x" {
		t.Errorf("nil Bytes = %q", got)
	}
	var zero Redactor
	if got := zero.Header(http.Header{"Authorization": {"Bearer t"}}).Get("Authorization"); got != "Bearer [REDACTED]" {
		t.Errorf("zero Redactor Authorization = %q, want masked", got)
	}
}

func FuzzRedact(f *testing.F) {
	f.Add([]byte("prefix"), []byte("suffix"), uint8(3))
	f.Fuzz(func(t *testing.T, pre, post []byte, cut uint8) {
		r := New([]string{"A_TOKEN=" + planted})
		in := append(append(append([]byte{}, pre...), planted...), post...)
		if out := r.Bytes(in); bytes.Contains(out, []byte(planted)) {
			t.Fatalf("Bytes(%q) = %q still holds the secret", in, out)
		}
		// Split anywhere into two chunks.
		k := int(cut) % (len(in) + 1)
		e := &exchange.Exchange{Chunks: []exchange.Chunk{{Data: bytes.Clone(in[:k])}, {Data: bytes.Clone(in[k:])}}}
		r.Exchange(e)
		if bytes.Contains(e.Body(), []byte(planted)) {
			t.Fatalf("exchange body %q still holds the secret", e.Body())
		}
	})
}

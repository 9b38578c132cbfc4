package testagent

import (
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestChunks(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want []string
	}{
		{"", 8, nil},
		{"abc", 8, []string{"abc"}},
		{"abcdefgh", 4, []string{"abcd", "efgh"}},
		{"aé", 2, []string{"a", "é"}}, // é is 2 bytes: not split
		{"✓✓", 1, []string{"✓", "✓"}}, // a rune longer than n is a chunk of its own
		{"a✓b", 2, []string{"a", "✓", "b"}},
	}
	for _, tt := range tests {
		if got := chunks(tt.s, tt.n); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("chunks(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func TestBypassProxy(t *testing.T) {
	tests := []struct {
		noProxy, url string
		want         bool
	}{
		{"", "http://127.0.0.1:8080/", false},
		{"*", "http://example.com/", true},
		{"127.0.0.1", "http://127.0.0.1:8080/", true},
		{"127.0.0.2", "http://127.0.0.1:8080/", false},
		{"127.0.0.0/8", "http://127.0.0.1:8080/", true},
		{"10.0.0.0/8", "http://127.0.0.1:8080/", false},
		{"::1", "http://[::1]:8080/", true},
		{"[::1]:8080", "http://[::1]:8080/", true},
		{"localhost:9090", "http://localhost:8080/", false},
		{"localhost:8080", "http://localhost:8080/", true},
		{"example.com", "https://api.example.com/v1", true},
		{".example.com", "https://example.com/v1", true},
		{"*.example.com", "https://api.example.com/v1", true},
		{"example.com:443", "https://api.example.com/v1", true},
		{"example.com:80", "https://api.example.com/v1", false},
		{"ample.com", "https://example.com/", false},
		{" foo.org , EXAMPLE.COM ", "https://Example.com/", true},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := bypassProxy(tt.noProxy, u); got != tt.want {
			t.Errorf("bypassProxy(%q, %s) = %v, want %v", tt.noProxy, tt.url, got, tt.want)
		}
	}
}

func TestReadSSE(t *testing.T) {
	tests := []struct {
		name    string
		stream  string
		want    []string
		wantErr error
	}{
		{"done", "data: a\n\ndata: b\n\ndata: [DONE]\n\ndata: after\n\n", []string{"a", "b"}, nil},
		{"crlf and comments", ": hi\r\n\r\nevent: x\r\ndata: a\r\nid: 1\r\n\r\ndata: [DONE]\r\n\r\n", []string{"a"}, nil},
		{"multi-line data", "data: {\ndata:\"k\": 1}\n\ndata: [DONE]\n\n", []string{"{\n\"k\": 1}"}, nil},
		{"no space after colon", "data:x\n\ndata:[DONE]\n\n", []string{"x"}, nil},
		{"cut before DONE", "data: a\n\n", []string{"a"}, errStreamEnded},
		{"cut inside an event", "data: a\n\ndata: b\n", []string{"a"}, errStreamEnded},
		{"cut inside a line", "data: a\n\ndata: [DO", []string{"a"}, errStreamEnded},
	}
	for _, tt := range tests {
		var got []string
		err := readSSE(strings.NewReader(tt.stream), func(data []byte) error {
			got = append(got, string(data))
			return nil
		})
		if !reflect.DeepEqual(got, tt.want) || !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: got %q, %v; want %q, %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}

	stop := errors.New("stop")
	err := readSSE(strings.NewReader("data: a\n\ndata: b\n\n"), func([]byte) error { return stop })
	if err != stop {
		t.Errorf("readSSE returned %v, want the callback's error", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	if d, ok := parseRetryAfter("3"); !ok || d != 3*time.Second {
		t.Errorf(`parseRetryAfter("3") = %v, %v; want 3s, true`, d, ok)
	}
	if _, ok := parseRetryAfter(""); ok {
		t.Error(`parseRetryAfter("") is ok, want not`)
	}
	if _, ok := parseRetryAfter("soon"); ok {
		t.Error(`parseRetryAfter("soon") is ok, want not`)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC1123)
	if d, ok := parseRetryAfter(strings.Replace(future, "UTC", "GMT", 1)); !ok || d <= 0 || d > time.Hour {
		t.Errorf("parseRetryAfter(an hour ahead) = %v, %v; want at most an hour, true", d, ok)
	}
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC1123)
	if d, ok := parseRetryAfter(strings.Replace(past, "UTC", "GMT", 1)); !ok || d != 0 {
		t.Errorf("parseRetryAfter(an hour ago) = %v, %v; want 0, true", d, ok)
	}
}

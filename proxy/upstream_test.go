package proxy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/acptap/acptap/proxy"
)

// TestParseUpstreamHidesCredentials: an upstream refused for its
// credentials, its query or as no URL at all is quoted in the error with
// them masked, for the error may be stored or printed.
func TestParseUpstreamHidesCredentials(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://user:pw-planted@host/v1", `"https://[REDACTED]@host/v1": credentials in the URL`},
		{"https://host/v1?key=k-planted", `"https://host/v1?key=[REDACTED]": a query or fragment`},
		{"http://user:pw-planted@host:99x/v1", `"http://[REDACTED]@host:99x/v1": invalid port ":99x" after host`},
		{"ftp://pw-planted@host", `"ftp://[REDACTED]@host": scheme is not http or https`},
	} {
		_, err := proxy.ParseUpstream(c.in)
		if !errors.Is(err, proxy.ErrInvalidUpstream) {
			t.Errorf("ParseUpstream(%q): %v, want ErrInvalidUpstream", c.in, err)
			continue
		}
		if strings.Contains(err.Error(), "planted") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseUpstream(%q): %v, want %s and no credential", c.in, err, c.want)
		}
	}
	if u, err := proxy.ParseUpstream("127.0.0.1:11434"); err != nil || u.String() != "http://127.0.0.1:11434" {
		t.Errorf("ParseUpstream of OLLAMA_HOST style: %v, %v", u, err)
	}
}

// Package redact removes secrets from what acptap records before it reaches the store.
package redact

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/acptap/acptap/internal/exchange"
)

// Mask replaces a redacted header or query value.
const Mask = "[REDACTED]"

// TapSecret is the name under which the HTTP tap's per-run secret is
// masked, [REDACTED:ACPTAP_TAP_SECRET], by the recorder in what it records
// and by replay in the requests it compares, so that a request that echoes
// the tap's URL compares alike in both. No such variable is set.
const TapSecret = "ACPTAP_TAP_SECRET"

// minSecretLen is the shortest environment value treated as a secret:
// shorter values ("1", "true", "dev") would be masked all over the record
// without protecting anything.
const minSecretLen = 8

// secretHeaders carry credentials whatever their value.
var secretHeaders = []string{
	"Authorization", "Proxy-Authorization", "X-Api-Key", "X-Goog-Api-Key",
	"Api-Key", "Cookie", "Set-Cookie", "X-Auth-Token", "Openai-Api-Key",
	"Anthropic-Api-Key", "Chatgpt-Account-Id",
}

// secretQueryKeys are query parameters that carry credentials, compared
// case-insensitively.
var secretQueryKeys = []string{"key", "api_key", "apikey", "api-key", "access_token", "token", "auth", "sig", "signature", "x-goog-api-key", "code"}

// secretNameParts mark an environment variable as holding a secret.
var secretNameParts = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION"}

// Redactor masks credentials in recorded data. The zero value masks the
// well-known headers and query keys only.
type Redactor struct {
	// secrets are the values to mask anywhere, longest first so that a
	// secret containing another is masked whole; each maps to its mask.
	secrets []secret
}

type secret struct {
	value []byte
	mask  []byte
}

// New returns a Redactor for an agent started with env (KEY=VALUE pairs):
// the values of variables whose names look like secrets (*KEY*, *TOKEN*,
// *SECRET*, *PASSWORD*, ...) are masked wherever they appear, as
// [REDACTED:NAME].
func New(env []string) *Redactor {
	r := &Redactor{}
	seen := map[string]bool{}
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || len(value) < minSecretLen || !SecretName(name) || seen[value] {
			continue
		}
		seen[value] = true
		mask := []byte("[REDACTED:" + name + "]")
		r.secrets = append(r.secrets, secret{value: []byte(value), mask: mask})
		// Inside JSON bodies a secret may appear escaped ("/" as "\/",
		// non-ASCII as \u sequences).
		if esc, err := json.Marshal(value); err == nil {
			if esc = esc[1 : len(esc)-1]; string(esc) != value && !seen[string(esc)] {
				seen[string(esc)] = true
				r.secrets = append(r.secrets, secret{value: esc, mask: mask})
			}
		}
		if esc := strings.ReplaceAll(value, "/", `\/`); esc != value && !seen[esc] {
			seen[esc] = true
			r.secrets = append(r.secrets, secret{value: []byte(esc), mask: mask})
		}
	}
	sort.SliceStable(r.secrets, func(i, j int) bool { return len(r.secrets[i].value) > len(r.secrets[j].value) })
	return r
}

// SecretName reports whether an environment variable's name says it holds a
// secret.
func SecretName(name string) bool {
	upper := strings.ToUpper(name)
	for _, part := range secretNameParts {
		if strings.Contains(upper, part) {
			return true
		}
	}
	return false
}

// Bytes returns b with every secret value masked. It returns b itself when
// there is nothing to mask, so the common case costs no allocation.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil {
		return b
	}
	for _, s := range r.secrets {
		if bytes.Contains(b, s.value) {
			b = bytes.ReplaceAll(b, s.value, s.mask)
		}
	}
	return b
}

// String is Bytes for strings.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	for _, sec := range r.secrets {
		if strings.Contains(s, string(sec.value)) {
			s = strings.ReplaceAll(s, string(sec.value), string(sec.mask))
		}
	}
	return s
}

// Header returns a copy of h with credential headers masked and secret
// values masked in every other header.
func (r *Redactor) Header(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		masked := make([]string, len(vs))
		secretHeader := isSecretHeader(k)
		for i, v := range vs {
			switch {
			case secretHeader:
				masked[i] = maskCredential(v)
			default:
				masked[i] = r.String(v)
			}
		}
		out[k] = masked
	}
	return out
}

// maskCredential keeps the scheme of an Authorization-like value ("Bearer",
// "Basic") so the record still says how the agent authenticated.
func maskCredential(v string) string {
	if scheme, _, ok := strings.Cut(v, " "); ok && len(scheme) <= 16 && !strings.ContainsAny(scheme, "=;,") {
		return scheme + " " + Mask
	}
	return Mask
}

func isSecretHeader(name string) bool {
	for _, h := range secretHeaders {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}

func isSecretQueryKey(key string) bool {
	for _, k := range secretQueryKeys {
		if strings.EqualFold(key, k) {
			return true
		}
	}
	return false
}

// URL returns rawURL with credential query parameters and userinfo masked,
// and secret values masked anywhere in it. A URL that does not parse is
// still masked for secret values.
func (r *Redactor) URL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return r.String(rawURL)
	}
	if u.User != nil {
		u.User = url.User(Mask)
	}
	if u.RawQuery != "" {
		q := u.Query()
		changed := false
		for k, vs := range q {
			if isSecretQueryKey(k) {
				for i := range vs {
					vs[i] = Mask
				}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return r.String(u.String())
}

// Exchange masks credentials in e in place: URL, headers, request body and
// response chunks.
func (r *Redactor) Exchange(e *exchange.Exchange) {
	e.URL = r.URL(e.URL)
	e.RequestHeaders = r.Header(e.RequestHeaders)
	e.ResponseHeaders = r.Header(e.ResponseHeaders)
	e.RequestBody = r.Bytes(e.RequestBody)
	for i := range e.Chunks {
		e.Chunks[i].Data = r.Bytes(e.Chunks[i].Data)
	}
	// A secret split across two chunks is missed chunk by chunk; mask the
	// joined body and fall back to one chunk when that finds more.
	if len(r.secrets) > 0 && len(e.Chunks) > 1 {
		body := e.Body()
		if red := r.Bytes(body); !bytes.Equal(red, body) {
			e.Chunks = []exchange.Chunk{{At: e.Chunks[0].At, Data: red}}
		}
	}
	e.Error = r.String(e.Error)
}

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
	// secrets are the values to mask anywhere, grouped by their first
	// byte and longest first within a group, so that a secret containing
	// another is masked whole; each maps to its mask.
	secrets []secret
	// group[c] to group[c+1] are the secrets whose first byte is c.
	group [257]int32
	// The scan slides a window as long as the shortest secret (up to
	// maxWindow) along the input, moving it on by shift[pairHash] of the
	// window's last two bytes: the least distance at which that pair is
	// within the first window bytes of a secret that would begin there,
	// so that no secret's start is passed over (as in Wu and Manber's
	// search for many patterns). Secrets are tried only where the shift
	// is 0. Most of a line is thus skipped a window at a time, most of
	// its bytes never read, where trying each secret in turn, or each
	// position, reads every byte at least once.
	window int
	shift  [1 << pairBits]uint8
	// firsts are the secrets' first bytes, if there are maxFirsts or
	// fewer: the scan starts, and goes on after each secret, where the
	// next of them is, found by bytes.IndexByte, which outruns the
	// window where they are rare (with one short secret, 35 times).
	firsts []byte
}

// maxFirsts bounds Redactor.firsts: each is one search of the input.
const maxFirsts = 4

// pairBits is the size of the hash of two bytes that indexes
// Redactor.shift: 4 KiB, where the pairs of 16 secrets leave most of the
// table at the window's full shift.
const pairBits = 12

// maxWindow bounds Redactor.window so that a shift fits in a uint8.
const maxWindow = 255

// pairHash is the index in Redactor.shift of the bytes a, b.
func pairHash(a, b byte) int { return (int(a)<<4 ^ int(b)) & (1<<pairBits - 1) }

type secret struct {
	value string
	mask  string
}

// New returns a Redactor for an agent started with env (KEY=VALUE pairs):
// the values of variables whose names look like secrets (*KEY*, *TOKEN*,
// *SECRET*, *PASSWORD*, ...) are masked wherever they appear, as
// [REDACTED:NAME].
func New(env []string) *Redactor {
	var secrets []secret
	seen := map[string]bool{}
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || len(value) < minSecretLen || !SecretName(name) || seen[value] {
			continue
		}
		seen[value] = true
		mask := "[REDACTED:" + name + "]"
		secrets = append(secrets, secret{value: value, mask: mask})
		// Inside JSON bodies a secret may appear escaped ("/" as "\/",
		// non-ASCII as \u sequences).
		if esc, err := json.Marshal(value); err == nil {
			if esc = esc[1 : len(esc)-1]; string(esc) != value && !seen[string(esc)] {
				seen[string(esc)] = true
				secrets = append(secrets, secret{value: string(esc), mask: mask})
			}
		}
		if esc := strings.ReplaceAll(value, "/", `\/`); esc != value && !seen[esc] {
			seen[esc] = true
			secrets = append(secrets, secret{value: esc, mask: mask})
		}
	}
	return newRedactor(secrets)
}

// newRedactor returns a Redactor masking secrets, whose values are 2
// bytes long or more (New's are minSecretLen) and not repeated.
func newRedactor(secrets []secret) *Redactor {
	r := &Redactor{secrets: secrets}
	if len(secrets) == 0 {
		return r
	}
	sort.SliceStable(secrets, func(i, j int) bool {
		a, b := secrets[i].value, secrets[j].value
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		return len(a) > len(b)
	})
	r.window = maxWindow
	for _, s := range secrets {
		r.group[int(s.value[0])+1]++
		r.window = min(r.window, len(s.value))
	}
	for c := 1; c < len(r.group); c++ {
		r.group[c] += r.group[c-1]
		if r.group[c] != r.group[c-1] && len(r.firsts) <= maxFirsts {
			r.firsts = append(r.firsts, byte(c-1))
		}
	}
	if len(r.firsts) > maxFirsts {
		r.firsts = nil
	}
	// A window whose last two bytes are a secret's bytes j-1 and j may
	// have that secret begin window-1-j bytes on; a pair in no secret
	// moves the window past its first byte of the two.
	for i := range r.shift {
		r.shift[i] = uint8(r.window - 1)
	}
	for _, s := range secrets {
		for j := 1; j < r.window; j++ {
			h := pairHash(s.value[j-1], s.value[j])
			r.shift[h] = min(r.shift[h], uint8(r.window-1-j))
		}
	}
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

// Bytes returns b with every secret value masked, in one pass: from the
// start of b, at each position the longest secret that begins there is
// replaced by its mask, and the scan goes on after that secret (matches
// do not overlap, and a mask is never scanned again); where none begins,
// the scan moves one byte on. It returns b itself when there is nothing
// to mask, so the common case costs no allocation, and never changes b.
func (r *Redactor) Bytes(b []byte) []byte {
	if out, ok := maskSecrets(r, b); ok {
		return out
	}
	return b
}

// String is Bytes for strings.
func (r *Redactor) String(s string) string {
	if out, ok := maskSecrets(r, s); ok {
		return string(out)
	}
	return s
}

// maskSecrets is Bytes and String: in with its secrets masked, and true, or
// false if in holds no secret.
func maskSecrets[T []byte | string](r *Redactor, in T) ([]byte, bool) {
	if r == nil || len(r.secrets) == 0 {
		return nil, false
	}
	var out []byte
	done := 0 // in[:done] is in out, masked
	i := skip(r, in, 0)
	w := r.window
	for i+w <= len(in) {
		if n := r.shift[pairHash(in[i+w-2], in[i+w-1])]; n > 0 {
			i += int(n)
			continue
		}
		c := in[i]
		var s *secret
		for k := r.group[c]; k < r.group[int(c)+1]; k++ {
			v := r.secrets[k].value
			if len(in)-i >= len(v) && string(in[i:i+len(v)]) == v {
				s = &r.secrets[k]
				break
			}
		}
		if s == nil {
			i++
			continue
		}
		if out == nil {
			// Room for one mask, the most common case beyond none.
			out = make([]byte, 0, len(in)-len(s.value)+len(s.mask))
		}
		out = append(out, in[done:i]...)
		out = append(out, s.mask...)
		i += len(s.value)
		done = i
		i = skip(r, in, i)
	}
	if out == nil {
		return nil, false
	}
	return append(out, in[done:]...), true
}

// skip returns where the first of r.firsts is in in from i on, or len(in)
// if none is; i if r.firsts is nil.
func skip[T []byte | string](r *Redactor, in T, i int) int {
	if r.firsts == nil {
		return i
	}
	end := len(in)
	for _, c := range r.firsts {
		if j := indexByte(in[i:end], c); j >= 0 {
			end = i + j
		}
	}
	return end
}

// indexByte is bytes.IndexByte and strings.IndexByte.
func indexByte[T []byte | string](in T, c byte) int {
	switch in := any(in).(type) {
	case []byte:
		return bytes.IndexByte(in, c)
	case string:
		return strings.IndexByte(in, c)
	}
	panic("unreachable")
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

// isSecretHeader reports whether a header carries a credential: a
// well-known one, or one whose name says so by the rules of JSON members
// (X-Auth-Token, X-Api-Secret).
func isSecretHeader(name string) bool {
	if SecretMember(name) {
		return true
	}
	for _, h := range secretHeaders {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}

// isSecretQueryKey reports whether a query parameter carries a
// credential: a well-known one, or one whose name says so by the rules of
// JSON members (client_secret, x-amz-security-token).
func isSecretQueryKey(key string) bool {
	if SecretMember(key) {
		return true
	}
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
	// A transport error quotes the URL, query and all.
	e.Error = r.Text(e.Error)
}

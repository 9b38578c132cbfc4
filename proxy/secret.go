package proxy

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// secretBytes is the size of a secret's random part: 192 bits, well past
// guessing by a local process that can try a few thousand a second.
const secretBytes = 24

// minSecretLen is the shortest Config.Secret accepted: 128 bits in
// base64url.
const minSecretLen = 22

// proxyUser is the user name of the forward proxy's credentials; only the
// password, the secret, is checked for being secret, but a user name is
// what clients expect before the colon.
const proxyUser = "acptap"

// NewSecret returns a fresh per-run secret for Config.Secret: 192 bits from
// crypto/rand, base64url without padding, so that it goes into a URL's
// path and user info as it is.
func NewSecret() string {
	b := make([]byte, secretBytes)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// checkSecret returns an error unless s is a usable Config.Secret:
// base64url characters only, at least 128 bits' worth.
func checkSecret(s string) error {
	if len(s) < minSecretLen {
		return fmt.Errorf("%w: %d characters, want at least %d", ErrInvalidSecret, len(s), minSecretLen)
	}
	if i := strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}); i >= 0 {
		return fmt.Errorf("%w: character %d is not one of A-Z a-z 0-9 - _", ErrInvalidSecret, i+1)
	}
	return nil
}

// guard checks the per-run secret on a listener of the tap and logs the
// first request it refuses, for the user whose agent drops the
// credentials or the base URL's path; later ones would only repeat it, and
// a process knocking on the port could fill the log.
type guard struct {
	t      *Tap
	where  string // the listener, for the notice: "forward proxy", "OPENAI_BASE_URL route"
	logged atomic.Bool
}

// refused logs the refusal of a request, the first time. what never holds
// the request's path or credentials: a near miss of the secret would be
// written out.
func (g *guard) refused(what string) {
	if g.logged.CompareAndSwap(false, true) {
		g.t.logf("http tap: %s: refused %s (later refusals are not logged)", g.where, what)
	}
}

// proxyAuthorized reports whether r carries the forward proxy's
// credentials in Proxy-Authorization, compared in constant time.
func (t *Tap) proxyAuthorized(r *http.Request) bool {
	scheme, cred, ok := strings.Cut(r.Header.Get("Proxy-Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return false
	}
	got, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(got, []byte(proxyUser+":"+t.secret)) == 1
}

// refuseProxy answers a forward proxy request without the credentials.
func (t *Tap) refuseProxy(w http.ResponseWriter, r *http.Request) {
	why := "without the proxy credentials"
	if r.Header.Get("Proxy-Authorization") != "" {
		why = "with wrong proxy credentials"
	}
	// The host is the target's (or the tap's own for a request that is
	// no proxy request), never a path or the credentials.
	t.proxyGuard.refused(fmt.Sprintf("%s %s %s", r.Method, r.Host, why))
	w.Header().Set("Proxy-Authenticate", `Basic realm="acptap"`)
	http.Error(w, "acptap: proxy authentication required", http.StatusProxyAuthRequired)
}

// stripSecret returns path without the leading /SECRET of a base-URL
// route, and whether it had it: "/SECRET" and "/SECRET/..." have it,
// "/SECRETX" does not. The secret is compared in constant time.
func stripSecret(path, secret string) (string, bool) {
	n := 1 + len(secret)
	if len(path) < n || path[0] != '/' {
		return "", false
	}
	if subtle.ConstantTimeCompare([]byte(path[1:n]), []byte(secret)) != 1 {
		return "", false
	}
	rest := path[n:]
	switch {
	case rest == "":
		return "/", true
	case rest[0] == '/':
		return rest, true
	}
	return "", false
}

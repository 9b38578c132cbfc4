package record

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/store"
)

// maxEnvValue bounds a value kept in a recording's environment: the
// metadata is read whole by every listing, and a value that long is data,
// not a setting.
const maxEnvValue = 4 << 10

// minTokenRun is the length from which a run of letters and digits (with
// "+_-", not "/", which parts a path) holding both is taken for a key or a
// per-run id: API keys, UUIDs, hashes. Settings' words ("xterm-256color",
// "en_US") and a path's parts are shorter.
const minTokenRun = 20

// userInfo finds a URL with user information, user:password@ or a token
// as the user, as proxy and database URLs carry credentials.
var userInfo = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*@`)

// recordedEnv is the agent's environment env (KEY=VALUE pairs) as a
// recording keeps it, for a replay to give the agent one of the same
// shape: every variable, by name, the last value of a name twice, sorted;
// its value only if it is no secret, else why it was withheld (see
// store.EnvVar). secrets is the recording's Redactor: a value it would
// mask holds a secret of another variable.
//
// Paths are kept as they are, under the recorded HOME and working
// directory too: the metadata has those, and a replay maps them to its
// sandbox's.
func recordedEnv(env []string, secrets *redact.Redactor) []store.EnvVar {
	last := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			last[k] = v
		}
	}
	out := make([]store.EnvVar, 0, len(last))
	for k, v := range last {
		ev := store.EnvVar{Name: k, Value: v, Withheld: withheld(k, v, secrets)}
		if filepath.IsAbs(v) {
			if fi, err := os.Stat(v); err == nil && fi.IsDir() {
				ev.Dir = true
			}
		}
		if ev.Withheld != "" {
			ev.Value = ""
		}
		out = append(out, ev)
	}
	slices.SortFunc(out, func(a, b store.EnvVar) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// withheld says why the value v of the variable k is not to be stored,
// or "" if it may be.
func withheld(k, v string, secrets *redact.Redactor) string {
	switch {
	case redact.SecretName(k):
		// Whatever its length: redact leaves short values unmasked in
		// what the agent writes, but a value kept here would be kept
		// for its own sake.
		return store.WithheldSecret
	case secrets.String(v) != v || userInfo.MatchString(v) || queryCredentials(v, secrets):
		return store.WithheldCredentials
	case hasTokenRun(v) && !isPaths(v):
		// A run in a path is a directory's name (a temporary one's),
		// not a key.
		return store.WithheldToken
	case len(v) > maxEnvValue:
		return store.WithheldLong
	}
	return ""
}

// queryCredentials reports whether v is a URL with a credential in its
// query (?key=..., ?access_token=...), as redact masks them in the URLs it
// records.
func queryCredentials(v string, secrets *redact.Redactor) bool {
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" || u.RawQuery == "" {
		return false
	}
	return secrets.URL(v) != secrets.String(u.String())
}

// isPaths reports whether v is an absolute path, or a list of them
// (PATH's form).
func isPaths(v string) bool {
	for p := range strings.SplitSeq(v, string(filepath.ListSeparator)) {
		if !filepath.IsAbs(p) {
			return false
		}
	}
	return true
}

// hasTokenRun reports whether v has a run of minTokenRun or more letters,
// digits and "+_-" with at least a letter and a digit in it.
func hasTokenRun(v string) bool {
	n, letter, digit := 0, false, false
	for i := 0; i <= len(v); i++ {
		var c byte
		if i < len(v) {
			c = v[i]
		}
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
			n, letter = n+1, true
		case '0' <= c && c <= '9':
			n, digit = n+1, true
		case c == '+' || c == '_' || c == '-':
			n++
		default:
			if n >= minTokenRun && letter && digit {
				return true
			}
			n, letter, digit = 0, false, false
		}
	}
	return false
}

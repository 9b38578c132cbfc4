package proxy

import (
	"strings"
	"testing"
)

// FuzzStripSecret: stripSecret takes a path exactly when it is /SECRET or
// under /SECRET/, and gives back the rest, a path of its own.
func FuzzStripSecret(f *testing.F) {
	const secret = "s3cr3t-s3cr3t_s3cr3t-s3cr3t"
	for _, p := range []string{"/" + secret, "/" + secret + "/", "/" + secret + "/v1/x", "/" + secret + "x", "/", "", "//" + secret, "/" + secret[:5]} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		rest, ok := stripSecret(path, secret)
		want := path == "/"+secret || strings.HasPrefix(path, "/"+secret+"/")
		if ok != want {
			t.Fatalf("stripSecret(%q) ok = %v, want %v", path, ok, want)
		}
		if !ok {
			return
		}
		if !strings.HasPrefix(rest, "/") {
			t.Fatalf("stripSecret(%q) = %q, want a path starting with /", path, rest)
		}
		if path != "/"+secret+rest && !(path == "/"+secret && rest == "/") {
			t.Fatalf("stripSecret(%q) = %q: /SECRET and the rest do not make the path", path, rest)
		}
	})
}

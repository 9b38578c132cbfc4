package proxy_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/proxy"
)

// TestNotices: what the tap has to say about a failed exchange, a body it
// records undecoded and a TLS handshake the agent refused reaches Logf
// once, as one line that names the tap and not the program, which the
// caller adds (acptap record prints "acptap: " before it).
func TestNotices(t *testing.T) {
	cases := []struct {
		name string
		// provoke makes the tap notice something, and returns when the
		// notice must have been given.
		provoke func(t *testing.T, tap *proxy.Tap, ca *proxy.CA, rec *fakeRecorder, log *testkit.Logs)
		want    string // the notice starts with it
	}{
		{"upstream down", func(t *testing.T, tap *proxy.Tap, _ *proxy.CA, rec *fakeRecorder, _ *testkit.Logs) {
			local, err := tap.AddBaseURL("OPENAI_BASE_URL", "http://"+deadAddr(t)+"/v1")
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Post(local+"/chat/completions", "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			rec.finished(t, 1)
		}, "http tap: POST http://127.0.0.1:"},
		{"undecodable body", func(t *testing.T, tap *proxy.Tap, _ *proxy.CA, rec *fakeRecorder, _ *testkit.Logs) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
			defer srv.Close()
			local, err := tap.AddBaseURL("OPENAI_BASE_URL", srv.URL+"/v1")
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, local+"/chat/completions", strings.NewReader("not gzip at all"))
			req.Header.Set("Content-Encoding", "gzip")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			rec.finished(t, 1)
		}, "http tap: recording the request body of POST http://127.0.0.1:"},
		{"refused handshake", func(t *testing.T, tap *proxy.Tap, _ *proxy.CA, _ *fakeRecorder, log *testkit.Logs) {
			pu, err := url.Parse(tap.ProxyURL())
			if err != nil {
				t.Fatal(err)
			}
			// The client does not trust the tap's CA.
			tr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: newTestCA(t).pool}}
			defer tr.CloseIdleConnections()
			if resp, err := (&http.Client{Transport: tr}).Get("https://api.example.com/v1/models"); err == nil {
				resp.Body.Close()
				t.Fatal("the client trusted the tap's certificate")
			}
			// The server logs the handshake after the client has given up.
			deadline := time.Now().Add(hangGuard)
			for len(log.Lines()) == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
		}, "http tap: http: TLS handshake error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := &testkit.Logs{}
			rec := newFakeRecorder()
			ca := newCA(t)
			tap := newTap(t, proxy.Config{CA: ca, Recorder: rec, Logf: log.Logf})
			c.provoke(t, tap, ca, rec, log)
			if err := tap.Close(); err != nil {
				t.Fatal(err)
			}
			lines := log.Lines()
			if len(lines) != 1 {
				t.Fatalf("got %d notices %q, want one", len(lines), lines)
			}
			if !strings.HasPrefix(lines[0], c.want) {
				t.Errorf("notice %q, want one starting %q", lines[0], c.want)
			}
			if strings.Contains(lines[0], "acptap") || strings.Contains(lines[0], "\n") {
				t.Errorf("notice %q names the program or spans lines; the caller says who speaks", lines[0])
			}
		})
	}
}

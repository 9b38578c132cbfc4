package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/proxy"
)

// intruderEnv makes the test binary testkit.Intruder: another process on
// the machine that knows the tap's ports but not its secret.
const intruderEnv = "ACPTAP_PROXY_TEST_INTRUDER"

// TestOtherProcessRefused: the agent, a child process given the tap's
// environment, reaches its LLM by either route, while another process that
// knows the ports but not the secret gets 407 from the forward proxy and
// 404 from the base-URL route; nothing it sent is forwarded or recorded,
// and neither the recording nor the tap's notices hold the secret.
func TestOtherProcessRefused(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	answer := []string{"Hello", " from", " the LLM"}
	for _, route := range []string{exchange.RouteProxy, exchange.RouteBaseURL} {
		t.Run(route, func(t *testing.T) {
			var mu sync.Mutex
			var upstreamGot []string
			llm := fakeLLM(t, answer)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				upstreamGot = append(upstreamGot, r.Method+" "+r.URL.Path)
				mu.Unlock()
				if v := r.Header.Get("Proxy-Authorization"); v != "" {
					t.Errorf("the upstream got Proxy-Authorization %q, want it kept to the tap", v)
				}
				llm(w, r)
			}))
			defer srv.Close()
			rec := newFakeRecorder()
			var log testkit.Logs
			secret := proxy.NewSecret()
			tap := newTap(t, proxy.Config{Recorder: rec, Secret: secret, Logf: log.Logf})
			base := srv.URL + "/v1"
			env := childEnviron()
			local := ""
			if route == exchange.RouteProxy {
				env = append(env, "OPENAI_BASE_URL="+base)
			} else if local, err = tap.AddBaseURL("OPENAI_BASE_URL", base); err != nil {
				t.Fatal(err)
			}
			env, err := tap.Env(env, proxy.EnvOptions{ProxyLoopback: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range env {
				if strings.HasPrefix(kv, "HTTPS_PROXY=") && !strings.Contains(kv, "acptap:"+secret+"@") {
					t.Errorf("%s, want the credentials acptap:SECRET in it", strings.ReplaceAll(kv, secret, "SECRET"))
				}
			}

			var stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			tr, err := testeditor.Run(ctx, testeditor.Options{
				Argv: []string{exe}, Env: env, Stderr: &stderr, Prompts: []string{"say hello"},
			})
			if err != nil {
				t.Fatalf("session: %v\nagent stderr:\n%s", err, stderr.Bytes())
			}
			if len(tr.Turns) != 1 || tr.Turns[0].Text != strings.Join(answer, "") {
				t.Fatalf("turns %+v; want one with %q\nagent stderr:\n%s", tr.Turns, strings.Join(answer, ""), stderr.Bytes())
			}

			pu, _ := url.Parse(tap.ProxyURL())
			args := []string{pu.Host, base + "/chat/completions"}
			if local != "" {
				lu, _ := url.Parse(local)
				args = append(args,
					"http://"+lu.Host+"/v1/chat/completions",                                // no secret
					"http://"+lu.Host+"/"+strings.Repeat("A", len(secret))+"/v1/models",     // a wrong one
					"http://"+lu.Host+"/"+secret[:len(secret)-1]+"/v1/models",               // one character short
					"http://"+lu.Host+"/"+secret+"x/v1/models",                              // one too many
					"http://"+lu.Host+"/"+strings.ToUpper(secret)+"/v1/models?case=changed", // case matters
				)
			}
			cmd := exec.Command(exe, args...)
			cmd.Env = []string{intruderEnv + "=1", "GORACE=atexit_sleep_ms=0"}
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Run(); err != nil {
				t.Fatalf("intruder: %v\n%s", err, errOut.Bytes())
			}
			if got, want := out.String(), testkit.IntruderWant(len(args)-2); got != want {
				t.Errorf("the intruder got\n%s\nwant\n%s", got, want)
			}

			if err := tap.Close(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			if want := []string{"POST /v1/chat/completions"}; fmt.Sprint(upstreamGot) != fmt.Sprint(want) {
				t.Errorf("the upstream got %q, want only the agent's %q", upstreamGot, want)
			}
			mu.Unlock()
			calls := rec.all()
			if n := len(endedCalls(calls)); n != 1 {
				t.Errorf("%d exchanges recorded, want the agent's 1", n)
			}
			for _, c := range calls {
				if bytes.Contains(c.Data, []byte(secret)) {
					t.Errorf("a recorded exchange holds the secret: %s", c.Data)
				}
			}
			x := rec.finished(t, 1)[0]
			if x.URL != base+"/chat/completions" || x.RequestHeaders.Get("Proxy-Authorization") != "" {
				t.Errorf("recorded URL %s, Proxy-Authorization %q; want %s/chat/completions and none", x.URL, x.RequestHeaders.Get("Proxy-Authorization"), base)
			}
			notices := log.String()
			if strings.Contains(notices, secret) {
				t.Errorf("the tap's notices hold the secret:\n%s", notices)
			}
			for _, want := range []string{"http tap: forward proxy: refused GET 127.0.0.1:", "without the proxy credentials (later refusals are not logged)"} {
				if !strings.Contains(notices, want) {
					t.Errorf("the tap's notices lack %q:\n%s", want, notices)
				}
			}
			if local != "" && !strings.Contains(notices, "http tap: OPENAI_BASE_URL route: refused GET of a path outside the route's secret prefix") {
				t.Errorf("the tap's notices lack the route's refusal:\n%s", notices)
			}
			wantRefusals := 1 // the forward proxy's first
			if local != "" {
				wantRefusals++ // and the route's
			}
			if n := strings.Count(notices, "refused"); n != wantRefusals {
				t.Errorf("%d refusals logged, want %d, the first of each listener:\n%s", n, wantRefusals, notices)
			}
		})
	}
}

// TestSecretPrefix: a base-URL route forwards /SECRET and what is under
// it, with the secret cut off and the client's escapes kept, and refuses
// the rest.
func TestSecretPrefix(t *testing.T) {
	const secret = "s3cr3t-s3cr3t_s3cr3t-s3cr3t"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.EscapedPath()+"?"+r.URL.RawQuery)
	}))
	defer srv.Close()
	rec := newFakeRecorder()
	tap := newTap(t, proxy.Config{Secret: secret, Recorder: rec})
	local, err := tap.AddBaseURL("ANTHROPIC_BASE_URL", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/" + secret; !strings.HasSuffix(local, want) {
		t.Fatalf("AddBaseURL = %q, want it to end in %s", local, want)
	}
	root := strings.TrimSuffix(local, "/"+secret)
	for _, c := range []struct {
		path   string
		status int
		body   string // the upstream's answer: the path it got
	}{
		{"/" + secret, 200, "/?"},
		{"/" + secret + "/", 200, "/?"},
		{"/" + secret + "/v1/messages?beta=true", 200, "/v1/messages?beta=true"},
		{"/" + secret + "/v1/files/a%2Fb", 200, "/v1/files/a%2Fb?"},
		{"/%73" + secret[1:] + "/v1/x", 200, "/v1/x?"}, // an escaped character of the secret
		{"/", 404, ""},
		{"/v1/messages", 404, ""},
		{"/" + secret + "x", 404, ""},
		{"/" + secret[:10], 404, ""},
		{"//" + secret + "/v1", 404, ""},
	} {
		resp, err := http.Get(root + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || c.status == 200 && string(body) != c.body {
			t.Errorf("GET %s: %d %q, want %d %q", c.path, resp.StatusCode, body, c.status, c.body)
		}
		if resp.StatusCode == 404 && string(body) != "acptap: not found\n" {
			t.Errorf("GET %s: 404 body %q, want \"acptap: not found\\n\"", c.path, body)
		}
	}
	if err := tap.Close(); err != nil {
		t.Fatal(err)
	}
	for _, x := range rec.finished(t, 5) {
		if strings.Contains(x.URL, secret[1:]) {
			t.Errorf("recorded URL %s holds the secret", x.URL)
		}
	}
}

// TestProxyCredentials: the forward proxy takes the credentials of
// ProxyURL in any spelling of the Basic scheme, and nothing else.
func TestProxyCredentials(t *testing.T) {
	const secret = "0123456789-0123456789_0123456789"
	srv := httptest.NewServer(echoHandler)
	defer srv.Close()
	tap := newTap(t, proxy.Config{Secret: secret})
	pu, _ := url.Parse(tap.ProxyURL())
	if pu.User.String() != "acptap:"+secret {
		t.Errorf("ProxyURL user info %q, want acptap:SECRET", pu.User)
	}
	good := testkit.BasicAuth("acptap", secret)
	for _, c := range []struct {
		auth   string
		status int
	}{
		{good, 200},
		{"basic " + strings.TrimPrefix(good, "Basic "), 200},
		{"BASIC  " + strings.TrimPrefix(good, "Basic "), 200},
		{"", 407},
		{testkit.BasicAuth("someone", secret), 407},
		{testkit.BasicAuth("acptap", secret+"x"), 407},
		{testkit.BasicAuth("acptap", secret[1:]), 407},
		{testkit.BasicAuth("acptap", ""), 407},
		{"Bearer " + secret, 407},
		{"Basic !!notbase64", 407},
		{"Basic", 407},
	} {
		for _, method := range []string{http.MethodGet, http.MethodConnect} {
			target := srv.URL + "/v1/models"
			if method == http.MethodConnect {
				target = strings.TrimPrefix(srv.URL, "http://")
			}
			resp, err := testkit.ProxyRequest(pu.Host, method, target, c.auth)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Errorf("%s with Proxy-Authorization %q: %d, want %d", method, c.auth, resp.StatusCode, c.status)
			}
			if got, want := resp.Header.Get("Proxy-Authenticate"), map[bool]string{true: `Basic realm="acptap"`}[c.status == 407]; got != want {
				t.Errorf("%s with Proxy-Authorization %q: Proxy-Authenticate %q, want %q", method, c.auth, got, want)
			}
		}
	}
}

// TestInvalidSecret: New refuses a Config.Secret too short to be secret or
// that does not go into a URL as it is.
func TestInvalidSecret(t *testing.T) {
	for _, s := range []string{"short", strings.Repeat("a", 21), strings.Repeat("a", 30) + "/", strings.Repeat("a", 30) + "%41", strings.Repeat("a", 30) + "@", strings.Repeat("é", 22)} {
		tap, err := proxy.New(proxy.Config{Secret: s, CA: newCA(t)})
		if !errors.Is(err, proxy.ErrInvalidSecret) {
			t.Errorf("New with Secret %q: %v, want ErrInvalidSecret", s, err)
		}
		if tap != nil {
			tap.Close()
		}
	}
	a, b := proxy.NewSecret(), proxy.NewSecret()
	if a == b || len(a) < 32 {
		t.Errorf("NewSecret gave %q and %q, want two different secrets of at least 32 characters", a, b)
	}
	tap, err := proxy.New(proxy.Config{Secret: a, CA: newCA(t)})
	if err != nil {
		t.Fatalf("New with NewSecret's %q: %v", a, err)
	}
	tap.Close()
}

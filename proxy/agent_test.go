package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/proxy"
)

// fakeLLM is an OpenAI Chat Completions upstream that streams answer in
// three deltas.
func fakeLLM(t *testing.T, answer []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			t.Errorf("fake LLM got %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range answer {
			b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": d}}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}
}

// childEnviron is this process's environment without what would change the
// agent's HTTP setup, running the test agent.
func childEnviron(extra ...string) []string {
	gorace := "atexit_sleep_ms=0" // an exiting -race binary sleeps a second by default
	var env []string
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(name) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS",
			"OPENAI_BASE_URL", "OPENAI_API_KEY", agentEnv:
			continue
		case "GORACE":
			gorace = value + " " + gorace
			continue
		}
		env = append(env, kv)
	}
	return append(env, append([]string{agentEnv + "=1", "GORACE=" + gorace, "OPENAI_API_KEY=sk-test"}, extra...)...)
}

// TestChildAgent runs the test agent as a real child process, driven over
// ACP by the test editor, with its LLM traffic going through the tap by
// each route: the forward proxy with TLS interception (HTTPS_PROXY and the
// CA trusted through SSL_CERT_FILE, all from Env), and a base-URL route
// (OPENAI_BASE_URL from AddBaseURL and Env).
func TestChildAgent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	answer := []string{"Hello", " from", " the LLM"}
	for _, route := range []string{exchange.RouteProxy, exchange.RouteBaseURL} {
		t.Run(route, func(t *testing.T) {
			upCA := newTestCA(t)
			srv := upCA.startTLS(t, fakeLLM(t, answer), true)
			rec := newFakeRecorder()
			tap := newTap(t, proxy.Config{Recorder: rec, UpstreamCAs: upCA.pool})
			base := srv.URL + "/v1"
			env := childEnviron()
			if route == exchange.RouteProxy {
				env = append(env, "OPENAI_BASE_URL="+base)
			} else if _, err := tap.AddBaseURL("OPENAI_BASE_URL", base); err != nil {
				t.Fatal(err)
			}
			// The upstream is on loopback, as an LLM run locally is.
			env, err := tap.Env(env, proxy.EnvOptions{ProxyLoopback: true})
			if err != nil {
				t.Fatal(err)
			}

			var stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			tr, err := testeditor.Run(ctx, testeditor.Options{
				Argv:    []string{exe},
				Env:     env,
				Stderr:  &stderr,
				Prompts: []string{"say hello"},
			})
			if err != nil {
				t.Fatalf("session: %v\nagent stderr:\n%s", err, stderr.Bytes())
			}
			if len(tr.Turns) != 1 || tr.Turns[0].Text != strings.Join(answer, "") || tr.Turns[0].StopReason != "end_turn" {
				t.Fatalf("turns %+v; want one ending end_turn with %q\nagent stderr:\n%s", tr.Turns, strings.Join(answer, ""), stderr.Bytes())
			}

			x := rec.finished(t, 1)[0]
			if x.Route != route || x.URL != base+"/chat/completions" || x.Status != http.StatusOK || x.Error != "" {
				t.Errorf("recorded route %q, %s, status %d, error %q; want %q, %s/chat/completions, 200", x.Route, x.URL, x.Status, x.Error, route, base)
			}
			if x.Proto != "HTTP/2.0" {
				t.Errorf("recorded proto %q, want HTTP/2.0", x.Proto)
			}
			if !bytes.Contains(x.RequestBody, []byte("say hello")) || x.RequestHeaders.Get("Authorization") != "Bearer sk-test" {
				t.Errorf("recorded request body %q, Authorization %q; want the prompt and the key", x.RequestBody, x.RequestHeaders.Get("Authorization"))
			}
			for _, d := range answer {
				if !bytes.Contains(x.Body(), []byte(d)) {
					t.Errorf("recorded response lacks %q: %s", d, x.Body())
				}
			}
		})
	}
}

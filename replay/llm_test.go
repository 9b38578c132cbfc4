package replay

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acptap/acptap/mismatch"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/replay/llmserver"
	"github.com/acptap/acptap/store"
)

// chatRecording is a recording of one Chat Completions exchange through
// the base-URL variable OPENAI_BASE_URL, with proxyEnv saying whether the
// agent also had HTTPS_PROXY.
func chatRecording(t *testing.T, proxyEnv bool) (*recording, []byte) {
	stream := testkit.WireSample(t, "oai_chat_text.sse")
	x := chatExchange("https://api.example/v1/chat/completions", http.Header{"Content-Type": {"application/json"}}, []byte(`{"model":"gpt-5","stream":true}`), stream)
	return &recording{
		meta: store.Recording{
			Name:     "r",
			BaseURLs: map[string]string{"OPENAI_BASE_URL": "https://api.example/v1"},
			ProxyEnv: proxyEnv,
		},
		exchanges: []llmserver.Recorded{{Number: 1, Seq: 3, Exchange: x}},
	}, stream
}

// post sends body to url and returns the response's status and body.
func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func TestStartLLMBaseURL(t *testing.T) {
	rec, stream := chatRecording(t, false)
	var compared atomic.Int32
	compare := func(_ int, recorded, live *exchange.Exchange) (llmserver.Drift, bool) {
		compared.Add(1)
		if recorded != rec.exchanges[0].Exchange || !bytes.Equal(live.RequestBody, []byte(`{"model":"gpt-5","stream":true}`)) {
			return llmserver.Drift{Mismatch: mismatch.Mismatch{Path: "$.body", Recorded: string(recorded.RequestBody), Live: string(live.RequestBody)}}, true
		}
		return llmserver.Drift{}, false
	}
	opts := &Options{CA: testCA(t)}
	llm, err := startLLM(rec, []string{"agent", "--base=${OPENAI_BASE_URL}", "${OTHER}"}, []string{"HOME=/sb/home", "A=1"}, opts, compare, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer llm.close()

	base, ok := envValue(llm.env, "OPENAI_BASE_URL")
	if u, err := url.Parse(base); !ok || err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" {
		t.Fatalf("OPENAI_BASE_URL=%q, want a loopback URL of the tap", base)
	}
	// Only the recorded variables are expanded.
	if want := []string{"agent", "--base=" + base, "${OTHER}"}; !slices.Equal(llm.argv, want) {
		t.Errorf("argv %q, want %q", llm.argv, want)
	}
	for _, kv := range []string{"HOME=/sb/home", "A=1"} {
		if !slices.Contains(llm.env, kv) {
			t.Errorf("env lacks the sandbox's %s: %q", kv, llm.env)
		}
	}
	// The recorded agent had no proxy: the replayed one has none either.
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"} {
		if v, ok := envValue(llm.env, k); ok {
			t.Errorf("%s=%q, want it unset without ProxyEnv", k, v)
		}
	}

	status, body := post(t, base+"/chat/completions", `{"model":"gpt-5","stream":true}`)
	if status != http.StatusOK || !bytes.Equal(body, stream) {
		t.Errorf("the recorded request got %d and %d bytes, want 200 and the %d recorded", status, len(body), len(stream))
	}
	// The recording has no second answer.
	if status, _ := post(t, base+"/chat/completions", `{"model":"gpt-5","stream":true}`); status == http.StatusOK {
		t.Errorf("a request more than recorded got %d, want an error", status)
	}
	report := llm.server.Report()
	if report.Served != 1 || len(report.Unanswered) != 1 || len(report.Unrequested) != 0 || len(report.Drift) != 0 {
		t.Errorf("report %+v, want 1 served, 1 unanswered", report)
	}
	if compared.Load() != 1 {
		t.Errorf("compare called %d times, want once, for the answered request", compared.Load())
	}
}

func TestStartLLMProxyEnv(t *testing.T) {
	rec, _ := chatRecording(t, true)
	llm, err := startLLM(rec, []string{"agent"}, []string{"HOME=/sb/home", "HTTPS_PROXY=http://elsewhere:1"}, &Options{CA: testCA(t)}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer llm.close()
	proxyURL, ok := envValue(llm.env, "HTTPS_PROXY")
	if u, err := url.Parse(proxyURL); !ok || err != nil || u.Hostname() != "127.0.0.1" {
		t.Errorf("HTTPS_PROXY=%q, want the tap's loopback proxy", proxyURL)
	}
	for _, k := range []string{"OPENAI_BASE_URL", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"} {
		if v, ok := envValue(llm.env, k); !ok || v == "" {
			t.Errorf("%s unset, want it set with ProxyEnv", k)
		}
	}
	// One value per variable: the tap's wins over the sandbox's.
	n := 0
	for _, kv := range llm.env {
		if strings.HasPrefix(kv, "HTTPS_PROXY=") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("HTTPS_PROXY is set %d times, want once", n)
	}
}

// TestStartLLMOnlyTheAgent: the replay's tap takes the agent's requests,
// which carry the secret of the environment it is given, and refuses
// another process's, which lack it, without consuming the recording.
func TestStartLLMOnlyTheAgent(t *testing.T) {
	rec, stream := chatRecording(t, true)
	llm, err := startLLM(rec, []string{"agent"}, nil, &Options{CA: testCA(t)}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer llm.close()
	proxyURL, _ := envValue(llm.env, "HTTPS_PROXY")
	base, _ := envValue(llm.env, "OPENAI_BASE_URL")
	pu, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	bu, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := pu.User.Password()
	if pu.User.Username() != "acptap" || len(secret) < 22 || !strings.HasPrefix(bu.Path, "/"+secret+"/") {
		t.Fatalf("HTTPS_PROXY %q and OPENAI_BASE_URL %q: want the credentials acptap:SECRET and a path under /SECRET/", proxyURL, base)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, pu.Host, "https://api.example/v1/chat/completions",
		"http://"+bu.Host+"/v1/chat/completions", "http://"+bu.Host+strings.Replace(bu.Path, secret, strings.Repeat("A", len(secret)), 1)+"/chat/completions")
	cmd.Env = []string{intruderEnv + "=1", "GORACE=" + gorace()}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("intruder: %v", err)
	}
	if got, want := string(out), testkit.IntruderWant(2); got != want {
		t.Errorf("the intruder got\n%s\nwant\n%s", got, want)
	}
	// The agent's request gets the one recorded answer the intruder did
	// not take.
	status, body := post(t, base+"/chat/completions", `{"model":"gpt-5","stream":true}`)
	if status != http.StatusOK || !bytes.Equal(body, stream) {
		t.Errorf("the agent's request got %d and %d bytes, want 200 and the %d recorded", status, len(body), len(stream))
	}
	if report := llm.server.Report(); report.Served != 1 || len(report.Unanswered) != 0 {
		t.Errorf("report %+v, want the agent's request served and none unanswered", report)
	}
}

// TestStartLLMLoopback: the replayed agent's NO_PROXY names loopback as
// the recorded agent's did, unless the replay says otherwise.
func TestStartLLMLoopback(t *testing.T) {
	tests := []struct {
		name           string
		loopbackDirect bool // the recording's
		mode           LoopbackMode
		wantLoopback   bool // NO_PROXY names localhost, 127.0.0.1 and ::1
	}{
		{"recorded direct", true, LoopbackAsRecorded, true},
		{"recorded proxied", false, LoopbackAsRecorded, false},
		{"proxied by the replay", true, LoopbackProxied, false},
		{"direct by the replay", false, LoopbackDirect, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, _ := chatRecording(t, true)
			rec.meta.LoopbackDirect = tt.loopbackDirect
			llm, err := startLLM(rec, []string{"agent"}, nil, &Options{CA: testCA(t), Loopback: tt.mode}, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer llm.close()
			proxyURL, _ := envValue(llm.env, "HTTPS_PROXY")
			pu, err := url.Parse(proxyURL)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"NO_PROXY", "no_proxy"} {
				v, _ := envValue(llm.env, k)
				entries := strings.Split(v, ",")
				if !slices.Contains(entries, pu.Host) {
					t.Errorf("%s=%q, want the tap %s in it", k, v, pu.Host)
				}
				for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
					if got := slices.Contains(entries, h); got != tt.wantLoopback {
						t.Errorf("%s=%q names %s: %v, want %v", k, v, h, got, tt.wantLoopback)
					}
				}
			}
		})
	}
}

func TestStartLLMFaults(t *testing.T) {
	rec, _ := chatRecording(t, false)
	fault, err := llmserver.ParseFault("status:503")
	if err != nil {
		t.Fatal(err)
	}
	llm, err := startLLM(rec, []string{"agent"}, nil, &Options{CA: testCA(t), Faults: map[int]llmserver.Fault{1: fault}}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer llm.close()
	base, _ := envValue(llm.env, "OPENAI_BASE_URL")
	if status, _ := post(t, base+"/chat/completions", `{"model":"gpt-5","stream":true}`); status != http.StatusServiceUnavailable {
		t.Errorf("the faulted exchange got %d, want 503", status)
	}
	if got := llm.server.Report().Faulted; !slices.Equal(got, []llmserver.AppliedFault{{Number: 1, Fault: fault}}) {
		t.Errorf("faulted exchanges %v, want [1]", got)
	}

	// A fault for an exchange the recording does not have.
	if llm, err := startLLM(rec, []string{"agent"}, nil, &Options{CA: testCA(t), Faults: map[int]llmserver.Fault{2: fault}}, nil, nil, nil); !errors.Is(err, llmserver.ErrInvalidOptions) {
		if err == nil {
			llm.close()
		}
		t.Errorf("startLLM with a fault for llm #2 of 1 = %v, want llmserver.ErrInvalidOptions", err)
	}
}

func TestCompareRequests(t *testing.T) {
	rec := &recording{
		meta: store.Recording{Cwd: "/rec/project", Home: "/home/u"},
		cwds: addSessionCwd(nil, []byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/rec/session","mcpServers":[]}}`)),
	}
	sb := &sandbox{work: "/sb/work", home: "/sb/home", tmp: "/sb/tmp"}
	n := newNormalizers(rec, sb, &Options{})
	request := func(body string) *exchange.Exchange {
		return &exchange.Exchange{Method: "POST", URL: "https://api.example/v1/chat/completions", RequestHeaders: http.Header{}, RequestBody: []byte(body)}
	}
	// The recorded session's cwd and the sandbox's workspace are the same
	// place.
	recorded := request(`{"model":"m","messages":[{"role":"system","content":"cwd: /rec/session/src, home /home/u"}]}`)
	live := request(`{"model":"m","messages":[{"role":"system","content":"cwd: /sb/work/src, home /sb/home"}]}`)
	if d, differ := n.compareRequests(1, recorded, live); differ {
		t.Errorf("requests differing in their directories differ at %s: %v, %v", d.Path, d.Recorded, d.Live)
	}
	changed := request(`{"model":"m","messages":[{"role":"system","content":"cwd: /sb/work/src, home /sb/home. Answer in French."}]}`)
	d, differ := n.compareRequests(1, recorded, changed)
	if !differ || !strings.Contains(d.Path, "messages") || !strings.Contains(d.Live.(string), "Answer in French.") || d.More != 0 {
		t.Errorf("compareRequests of a changed prompt = %+v, %v; want the prompt, and no more", d, differ)
	}
	// Every other difference is counted.
	more := request(`{"model":"n","messages":[{"role":"system","content":"cwd: /sb/work/src, home /sb/home. Answer in French."},{"role":"user","content":"hi"}]}`)
	if d, differ := n.compareRequests(1, recorded, more); !differ || d.More != 2 {
		t.Errorf("compareRequests of a request changed in 3 places = %+v, %v; want the first and 2 more", d, differ)
	}
}

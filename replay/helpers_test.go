package replay

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/testing/testagent"
	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/store"
)

// agentEnv, set to 1, makes the test binary run testagent.Main instead of
// the tests, so that the tests can replay the agent as a real process.
const agentEnv = "REPLAY_TEST_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(agentEnv) == "1" {
		os.Exit(testagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	if os.Getenv(intruderEnv) == "1" {
		os.Exit(testkit.Intruder(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// intruderEnv makes the test binary testkit.Intruder.
const intruderEnv = "ACPTAP_REPLAY_TEST_INTRUDER"

// hangGuard bounds a test's wait for a process that went wrong.
const hangGuard = 2 * time.Minute

// gorace is GORACE for the agents: under -race an exiting binary sleeps a
// second by default.
func gorace() string {
	return strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
}

// replayEnv is Options.Env for a replay of the test agent: what makes the
// test binary the agent, on top of the sandbox's allowlist.
func replayEnv() []string {
	return []string{agentEnv + "=1", "GORACE=" + gorace()}
}

// recordEnv is the environment of the test agent while it is recorded:
// this process's but for what would send it elsewhere, plus extra.
func recordEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "OPENAI_BASE_URL", "OPENAI_API_KEY", "GORACE", agentEnv:
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, agentEnv+"=1", "GORACE="+gorace()), extra...)
}

// testCA is an interception CA of the test's own: a replay never touches
// the user's.
func testCA(t testing.TB) *proxy.CA {
	t.Helper()
	ca, err := proxy.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// session says what recordSession records.
type session struct {
	args    []string // the test agent's arguments
	prompts []string // nil for "hello"
	// llm, if true, makes the agent ask a fake OpenAI upstream, reached
	// through OPENAI_BASE_URL (a base-URL variable of the recording).
	llm bool
	// mask, if not nil, is applied to each frame before it is stored, as
	// a recorder masks them.
	mask func([]byte) []byte
	// mcpOverACP are MCP servers the editor hosts on the ACP connection
	// (testeditor.Options.MCPOverACP).
	mcpOverACP []string
}

// recordSession runs the test agent with s.args under the scripted editor
// in a fresh workspace holding notes.txt, and stores the session in st as
// acptap record would: the editor and agent frames, then the LLM
// exchanges. It returns the agent's command line as recorded.
func recordSession(t testing.TB, st *store.Store, name string, s session) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("Teh quick brown fox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := testkit.SelfArgv(t, s.args...)
	meta := store.Recording{Name: name, Argv: argv, Cwd: dir, Home: os.Getenv("HOME"), Tmp: os.TempDir()}
	env := recordEnv()
	var upstream *fakeLLM
	if s.llm {
		upstream = newFakeLLM(t)
		base := upstream.srv.URL + "/v1"
		env = append(env, "OPENAI_BASE_URL="+base, "OPENAI_API_KEY=sk-test-0123456789")
		meta.BaseURLs = map[string]string{"OPENAI_BASE_URL": base}
		meta.EnvNames = []string{"OPENAI_API_KEY", "OPENAI_BASE_URL"}
	}
	var stderr testkit.SyncBuffer
	tr, err := testeditor.Run(ctx, testeditor.Options{Argv: argv, Dir: dir, Env: env, Stderr: &stderr, Cwd: dir, Prompts: s.prompts, MCPOverACP: s.mcpOverACP})
	if err != nil {
		t.Fatalf("recording: %v\nagent stderr:\n%s", err, stderr.String())
	}

	w, err := st.Create(meta, false)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Duration(0)
	next := func() time.Duration { at += time.Millisecond; return at }
	for _, m := range tr.Messages {
		e := store.Event{Kind: store.KindFrame, Lane: store.LaneAgent, Offset: next(), Data: []byte(m.Raw)}
		if m.Dir == "send" {
			e.Lane = store.LaneEditor
		}
		if m.Msg != nil {
			e.Data = slices.Clone(m.Msg)
		}
		if s.mask != nil {
			e.Data = s.mask(e.Data)
		}
		w.Append(e)
	}
	if upstream != nil {
		for _, x := range upstream.recorded() {
			data, err := exchange.Marshal(x)
			if err != nil {
				t.Fatal(err)
			}
			w.Append(store.Event{Kind: store.KindExchange, Lane: store.LaneLLM, Offset: next(), Data: data})
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return argv
}

// fakeLLM is an OpenAI Chat Completions upstream answering every request
// with a captured stream, and keeping each exchange as the tap would
// record it.
type fakeLLM struct {
	srv  *httptest.Server
	mu   sync.Mutex // guards xs
	xs   []*exchange.Exchange
	body []byte
}

func newFakeLLM(t testing.TB) *fakeLLM {
	f := &fakeLLM{body: testkit.WireSample(t, "oai_chat_text.sse")}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeLLM) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Write(f.body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.xs = append(f.xs, chatExchange(f.srv.URL+r.URL.Path, r.Header.Clone(), body, f.body))
}

func (f *fakeLLM) recorded() []*exchange.Exchange {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.xs
}

// chatExchange is a recorded Chat Completions exchange through the
// OPENAI_BASE_URL route: a POST of reqBody to url answered with the
// stream resp.
func chatExchange(url string, header http.Header, reqBody, resp []byte) *exchange.Exchange {
	header.Del("Authorization")
	return &exchange.Exchange{
		Route:           exchange.RouteBaseURL,
		BaseURLVar:      "OPENAI_BASE_URL",
		Method:          http.MethodPost,
		URL:             url,
		RequestHeaders:  header,
		RequestBody:     reqBody,
		Status:          http.StatusOK,
		ResponseHeaders: http.Header{"Content-Type": {"text/event-stream"}},
		Chunks:          []exchange.Chunk{{Data: bytes.Clone(resp)}},
		End:             exchange.EndComplete,
	}
}

// envValue returns the last value of k in env.
func envValue(env []string, k string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], k+"="); ok {
			return v, true
		}
	}
	return "", false
}

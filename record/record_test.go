package record_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/snapshot"
	"github.com/acptap/acptap/internal/testing/testagent"
	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/record"
	"github.com/acptap/acptap/store"
)

// The test binary is also the test agent and a recorder: record.Run runs
// in a child process whose stdio a real scripted editor drives, with the
// test agent as its child, all over real pipes.
const (
	modeEnv  = "RECORD_TEST_MODE" // "agent" or "recorder"
	storeEnv = "RECORD_TEST_STORE"
	nameEnv  = "RECORD_TEST_NAME"
	baseEnv  = "RECORD_TEST_UPSTREAM"
)

func TestMain(m *testing.M) {
	switch os.Getenv(modeEnv) {
	case "agent":
		os.Exit(testagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	case "recorder":
		os.Exit(recorder())
	}
	os.Exit(m.Run())
}

// recorder records the test agent with record.Run into the store of
// $RECORD_TEST_STORE, as a program wrapping an agent would.
func recorder() int {
	st, err := store.Open(os.Getenv(storeEnv), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "recorder:", err)
		return 2
	}
	defer st.Close()
	self, _ := os.Executable()
	env := append(os.Environ(), modeEnv+"=agent")
	var routes []record.BaseURL
	if up := os.Getenv(baseEnv); up != "" {
		routes = append(routes, record.BaseURL{Var: "OPENAI_BASE_URL", Upstream: up})
	}
	res, err := record.Run(context.Background(), st, record.Options{
		Argv:       []string{self},
		Name:       os.Getenv(nameEnv),
		Env:        env,
		BaseURLs:   routes,
		NoProxyEnv: true,
		CADir:      os.Getenv("ACPTAP_CA_DIR"),
		Logf:       func(format string, args ...any) { fmt.Fprintf(os.Stderr, "notice: "+format+"\n", args...) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "recorder:", err)
		return 2
	}
	return res.Exit.Code
}

// childEnv is a child's environment: a recorder's or the agent's.
func childEnv(t *testing.T, extra ...string) []string {
	return testkit.ChildEnv(append([]string{modeEnv + "=", "ACPTAP_CA_DIR=" + filepath.Join(t.TempDir(), "ca")}, extra...)...)
}

// events returns the events of recording name.
func events(t *testing.T, path, name string) (store.Recording, []store.Event) {
	t.Helper()
	st, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	meta, err := st.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	var evs []store.Event
	if err := st.Events(name, func(e store.Event) error {
		e.Data = append([]byte(nil), e.Data...)
		evs = append(evs, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return meta, evs
}

// TestRunRecordsBothSides records a real session driven by the scripted
// editor through record.Run, with the agent's LLM calls through a base-URL
// route, and finds in the store exactly what the editor and the agent
// exchanged, and the LLM exchanges.
func TestRunRecordsBothSides(t *testing.T) {
	sse := testkit.WireSample(t, "oai_chat_text.sse")
	var hits atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(sse)
	}))
	defer upstream.Close()

	db := filepath.Join(t.TempDir(), "s.db")
	var stderr testkit.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr, err := testeditor.Run(ctx, testeditor.Options{
		Argv:    testkit.SelfArgv(t),
		Env:     childEnv(t, modeEnv+"=recorder", storeEnv+"="+db, nameEnv+"=both", baseEnv+"="+upstream.URL+"/v1", "OPENAI_API_KEY=sk-record-test-0123456789"),
		Prompts: []string{"hello", "again"},
		Stderr:  &stderr,
	})
	if err != nil {
		t.Fatalf("editor: %v; stderr:\n%s", err, stderr.String())
	}
	if got := strings.Count(stderr.String(), `notice: recording "both" into `); got != 1 {
		t.Errorf("the recording notice was printed %d times, want once; stderr:\n%s", got, stderr.String())
	}

	meta, evs := events(t, db, "both")
	if !meta.Done || meta.ExitCode != 0 || meta.BaseURLs["OPENAI_BASE_URL"] != upstream.URL+"/v1" || meta.ProxyEnv {
		t.Errorf("metadata = done %v exit %d base URLs %v proxy env %v; want done, exit 0, the route, no proxy env",
			meta.Done, meta.ExitCode, meta.BaseURLs, meta.ProxyEnv)
	}
	var editor, agent []string
	var llm []*exchange.Exchange
	for _, e := range evs {
		switch e.Lane {
		case store.LaneEditor:
			editor = append(editor, compact(t, e.Data))
		case store.LaneAgent:
			if len(strings.TrimSpace(string(e.Data))) > 0 {
				agent = append(agent, compact(t, e.Data))
			}
		case store.LaneLLM:
			x, err := exchange.Unmarshal(e.Data)
			if err != nil {
				t.Fatalf("llm event %d: %v", e.Seq, err)
			}
			llm = append(llm, x)
		}
	}
	var sent, received []string
	for _, m := range tr.Messages {
		line := m.Raw
		if m.Msg != nil {
			line = compact(t, m.Msg)
		}
		if m.Dir == "send" {
			sent = append(sent, line)
		} else {
			received = append(received, line)
		}
	}
	if strings.Join(editor, "\n") != strings.Join(sent, "\n") {
		t.Errorf("editor lane:\n%s\nwant what the editor sent:\n%s", strings.Join(editor, "\n"), strings.Join(sent, "\n"))
	}
	if strings.Join(agent, "\n") != strings.Join(received, "\n") {
		t.Errorf("agent lane:\n%s\nwant what the editor received:\n%s", strings.Join(agent, "\n"), strings.Join(received, "\n"))
	}
	if got := hits.Load(); got != 2 || len(llm) != 2 {
		t.Fatalf("upstream got %d requests and %d exchanges were recorded, want 2 and 2", got, len(llm))
	}
	for i, x := range llm {
		if x.Route != exchange.RouteBaseURL || x.Status != 200 || string(x.Body()) != string(sse) {
			t.Errorf("exchange %d: route %q status %d, body equal %v; want base-url, 200, the upstream's bytes", i+1, x.Route, x.Status, string(x.Body()) == string(sse))
		}
		if strings.Contains(fmt.Sprint(x.RequestHeaders), "sk-record-test-0123456789") {
			t.Errorf("exchange %d: the API key reached the store", i+1)
		}
	}
}

// TestPrepareRefuses: every option that cannot work is refused by Prepare
// with its own error, before anything could reach a store.
func TestPrepareRefuses(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	self := testkit.SelfArgv(t)
	base := func(o record.Options) record.Options {
		if o.Argv == nil {
			o.Argv = self
		}
		o.CADir = filepath.Join(dir, "ca")
		o.Env = []string{"PATH=" + os.Getenv("PATH")}
		return o
	}
	for _, tt := range []struct {
		name string
		opts record.Options
		want []error
	}{
		{"no command", record.Options{Argv: []string{}}, []error{record.ErrNoCommand}},
		{"agent not found", record.Options{Argv: []string{"no-such-agent-xyz"}}, []error{record.ErrAgentNotFound}},
		{"bad name", record.Options{Name: "../evil"}, []error{record.ErrName}},
		{"base URL twice", record.Options{BaseURLs: []record.BaseURL{{Var: "OPENAI_BASE_URL"}, {Var: "OPENAI_BASE_URL"}}}, []error{record.ErrBaseURL, record.ErrBaseURLTwice}},
		{"base URL unknown", record.Options{BaseURLs: []record.BaseURL{{Var: "MY_UNSET_BASE"}}}, []error{record.ErrBaseURL, record.ErrBaseURLUnknown}},
		{"base URL scheme", record.Options{BaseURLs: []record.BaseURL{{Var: "X", Upstream: "ftp://127.0.0.1:1/v1"}}}, []error{record.ErrBaseURL, record.ErrBaseURLUpstream}},
		{"base URL bad var", record.Options{BaseURLs: []record.BaseURL{{Var: "A B", Upstream: "http://x"}}}, []error{record.ErrBaseURL}},
		// The tap refuses these; Prepare does so before the store is touched.
		{"base URL credentials", record.Options{BaseURLs: []record.BaseURL{{Var: "X", Upstream: "https://user:pw-planted@h/v1"}}}, []error{record.ErrBaseURL, record.ErrBaseURLUpstream, proxy.ErrInvalidUpstream}},
		{"base URL query", record.Options{BaseURLs: []record.BaseURL{{Var: "X", Upstream: "https://h/v1?key=k-planted"}}}, []error{record.ErrBaseURL, record.ErrBaseURLUpstream}},
		{"upstream CA missing", record.Options{UpstreamCA: filepath.Join(dir, "nope.pem")}, []error{record.ErrUpstreamCA}},
		{"upstream CA not PEM", record.Options{UpstreamCA: notPEM}, []error{record.ErrUpstreamCA}},
		{"snapshot too many files", record.Options{Snapshot: true, SnapshotMaxFiles: 1}, []error{record.ErrSnapshot, snapshot.ErrTooManyFiles}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := record.Prepare(base(tt.opts))
			if err == nil {
				t.Fatalf("Prepare succeeded (plan %q), want %v", p.Name(), tt.want)
			}
			for _, want := range tt.want {
				if !errors.Is(err, want) {
					t.Errorf("Prepare: %v; want an error matching %v", err, want)
				}
			}
			if strings.Contains(err.Error(), "planted") {
				t.Errorf("Prepare: %q quotes the credential", err)
			}
			if strings.Contains(err.Error(), "--") {
				t.Errorf("Prepare: %q speaks command-line syntax; the CLI adds the fix", err)
			}
		})
	}
	t.Run("bad CA dir", func(t *testing.T) {
		o := base(record.Options{})
		o.CADir = notPEM // a file, not a directory
		if _, err := record.Prepare(o); !errors.Is(err, record.ErrCA) {
			t.Errorf("Prepare: %v; want ErrCA", err)
		}
	})
}

// TestPrepareNamesAndDefaults: a plan without a name gets a generated one
// from the program's name, valid in a store.
func TestPrepareNamesAndDefaults(t *testing.T) {
	p, err := record.Prepare(record.Options{Argv: []string{"sh", "-c", "true"}, CADir: filepath.Join(t.TempDir(), "ca")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Name(), "sh-") || store.ValidName(p.Name()) != nil {
		t.Errorf("generated name %q, want sh-TIME-RANDOM and valid", p.Name())
	}
}

// TestRunExistingName: a second recording of a name is refused with
// store.ErrExists, and replaces the first with Force.
func TestRunExistingName(t *testing.T) {
	st := openStore(t)
	opts := record.Options{Argv: []string{"sh", "-c", "exit 3"}, Name: "dup", CADir: filepath.Join(t.TempDir(), "ca"),
		Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}
	res, err := record.Run(context.Background(), st, opts)
	if err != nil || res.Exit.Code != 3 || res.Name != "dup" {
		t.Fatalf("first Run = %+v, %v; want exit 3 of dup", res, err)
	}
	if _, err := record.Run(context.Background(), st, opts); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second Run: %v, want store.ErrExists", err)
	}
	opts.Force, opts.Argv = true, []string{"sh", "-c", "exit 4"}
	if res, err := record.Run(context.Background(), st, opts); err != nil || res.Exit.Code != 4 {
		t.Fatalf("forced Run = %+v, %v; want exit 4", res, err)
	}
	meta, err := st.Get("dup")
	if err != nil || meta.ExitCode != 4 {
		t.Errorf("recording dup: exit %d, %v; want the forced one, exit 4", meta.ExitCode, err)
	}
}

// TestRunCancelTerminatesTheAgent: cancelling the context ends an agent
// that would run forever, and the recording is finished with its signal.
func TestRunCancelTerminatesTheAgent(t *testing.T) {
	st := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	stdin, stdinW := io.Pipe() // never closed: the agent would wait forever
	defer stdinW.Close()
	// Cancel once the agent is up and has said so.
	started := writerFunc(func(p []byte) (int, error) { cancel(); return len(p), nil })
	res, err := record.Run(ctx, st, record.Options{
		Argv:   []string{"sh", "-c", "echo started; exec sleep 600"},
		Name:   "cancelled",
		CADir:  filepath.Join(t.TempDir(), "ca"),
		Stdin:  stdin,
		Stdout: started, Stderr: io.Discard,
		Grace: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit.Signal != syscall.SIGTERM {
		t.Errorf("agent ended with %+v, want SIGTERM", res.Exit)
	}
	meta, err := st.Get("cancelled")
	if err != nil || !meta.Done || meta.Signal != syscall.SIGTERM.String() {
		t.Errorf("recording: done %v signal %q, %v; want done with %q", meta.Done, meta.Signal, err, syscall.SIGTERM.String())
	}
	var frames int
	if err := st.Events("cancelled", func(e store.Event) error {
		if e.Lane == store.LaneAgent && acp.Parse(e.Data).Kind == acp.Junk {
			frames++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if frames != 1 {
		t.Errorf("%d agent frames recorded, want the one line it printed", frames)
	}
}

// writerFunc is a function as an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// compact returns a JSON line without insignificant white space, or the
// line itself if it is not JSON.
func compact(t *testing.T, line []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, line) != nil {
		return string(line)
	}
	return b.String()
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

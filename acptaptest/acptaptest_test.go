package acptaptest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/acptaptest"
	"github.com/acptap/acptap/fixture"
	"github.com/acptap/acptap/internal/demollm"
	"github.com/acptap/acptap/internal/testing/testagent"
	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/record"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/rerecord"
	"github.com/acptap/acptap/store"
)

// The test binary doubles as the demo agent and as `acptap record`, so that
// recordings are made and replayed by real processes over real pipes.
const (
	roleEnv  = "ACPTAPTEST_ROLE" // "agent" or "record"
	storeEnv = "ACPTAPTEST_STORE"
	nameEnv  = "ACPTAPTEST_NAME"
	llmEnv   = "ACPTAPTEST_LLM" // the demo LLM's base URL, when recording in LLM mode
)

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "agent":
		os.Exit(testagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	case "record":
		os.Exit(recordMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// recordMain records the demo agent with args into the store, as `acptap
// record` does, on this process's stdio.
func recordMain(args []string) int {
	st, err := store.Open(os.Getenv(storeEnv), nil)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 2
	}
	defer st.Close()
	exe, _ := os.Executable()
	opts := record.Options{
		Argv:       append([]string{exe}, args...),
		Name:       os.Getenv(nameEnv),
		Env:        agentEnv(),
		NoProxyEnv: true,
		CADir:      filepath.Join(filepath.Dir(os.Getenv(storeEnv)), "ca"),
	}
	if u := os.Getenv(llmEnv); u != "" {
		opts.BaseURLs = []record.BaseURL{{Var: "OPENAI_BASE_URL", Upstream: u}}
	}
	if _, err := record.Run(context.Background(), st, opts); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 2
	}
	return 0
}

// agentEnv is the environment that makes the test binary the demo agent:
// this process's, with the role changed.
func agentEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, roleEnv+"=") || strings.HasPrefix(kv, "GORACE=")
	})
	return append(env, roleEnv+"=agent", "GORACE=atexit_sleep_ms=0")
}

// replayOptions makes the replays run the test binary as the demo agent.
func replayOptions(args ...string) replay.Options {
	o := replay.Options{Env: []string{roleEnv + "=agent", "GORACE=atexit_sleep_ms=0"}, Timeout: 20 * time.Second}
	if args != nil {
		exe, _ := os.Executable()
		o.Argv = append([]string{exe}, args...)
	}
	return o
}

// recordDemo records a session of the demo agent with args into the store
// at db, driven by the scripted editor; llm runs it against the demo LLM.
func recordDemo(t *testing.T, db, name string, llm bool, args ...string) {
	t.Helper()
	if err := record1(db, name, llm, args...); err != nil {
		t.Fatal(err)
	}
}

// record1 is recordDemo without a testing.T, for the example.
func record1(db, name string, llm bool, args ...string) error {
	if !llm {
		return recordAt(db, name, "", args...)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: demollm.Handler()}
	go srv.Serve(ln)
	defer srv.Close()
	return recordAt(db, name, "http://"+ln.Addr().String()+"/v1", args...)
}

// recordAt records a session of the demo agent, against the LLM at the
// base URL llm unless it is "".
func recordAt(db, name string, llm string, args ...string) error {
	ws, err := os.MkdirTemp("", "acptaptest-ws-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("Teh quick brown fox\n"), 0o644); err != nil {
		return err
	}
	env := append(agentEnv(), roleEnv+"=record", storeEnv+"="+db, nameEnv+"="+name)
	if llm != "" {
		env = append(env, llmEnv+"="+llm, demoKey)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr testkit.SyncBuffer
	_, err = testeditor.Run(ctx, testeditor.Options{
		Argv:    append([]string{exe}, args...),
		Dir:     ws,
		Cwd:     ws,
		Env:     env,
		Prompts: []string{"Fix the typo in notes.txt", "Thanks!"},
		Stderr:  &stderr,
	})
	if err != nil {
		return fmt.Errorf("recording %s: %v\nstderr: %s", name, err, stderr.String())
	}
	return nil
}

// demoKey is the demo LLM's key, which the agent had when recorded.
const demoKey = "OPENAI_API_KEY=sk-demo-not-a-real-key"

// demoStore records the demo agent (against the demo LLM) and the
// scripted test agent into a new store and returns its path.
func demoStore(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "acptap.db")
	recordDemo(t, db, "fix-typo", true, "--title-call")
	recordDemo(t, db, "scripted", false, "--message", "Fixed it.")
	return db
}

func TestReplayDemo(t *testing.T) {
	db := demoStore(t)
	acptaptest.Replay(t, db, &acptaptest.Options{Replay: replayOptions()})
}

func TestCheck(t *testing.T) {
	db := demoStore(t)
	reports, err := acptaptest.Check(t.Context(), db, &acptaptest.Options{Replay: replayOptions()})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range reports {
		got = append(got, r.Name+" "+r.Outcome.String())
		if !strings.HasPrefix(r.Text, "PASS "+r.Name+" (") {
			t.Errorf("%s: report %q, want it to start with %q", r.Name, r.Text, "PASS "+r.Name+" (")
		}
	}
	if want := []string{"fix-typo PASS", "scripted PASS"}; !slices.Equal(got, want) {
		t.Errorf("outcomes %q, want %q", got, want)
	}

	// A changed agent: the report is the CLI's FAIL, and nothing changes
	// in the store.
	reports, err = acptaptest.Check(t.Context(), db, &acptaptest.Options{Names: []string{"scripted"}, Replay: replayOptions("--message", "Did nothing.")})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || reports[0].Outcome != acptaptest.Failed ||
		!strings.HasPrefix(reports[0].Text, "FAIL scripted: agent output differs") || !strings.Contains(reports[0].Text, `+`) {
		t.Errorf("replay of a changed agent: got %+v, want one FAIL report with a diff", reports)
	}
}

func TestCheckErrors(t *testing.T) {
	db := demoStore(t)
	for _, tc := range []struct {
		name string
		path string
		opts *acptaptest.Options
		want error
	}{
		{"no store", filepath.Join(t.TempDir(), "missing.db"), nil, store.ErrNoStore},
		{"unknown name", db, &acptaptest.Options{Names: []string{"nope"}}, store.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := acptaptest.Check(t.Context(), tc.path, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Errorf("Check: got error %v, want %v", err, tc.want)
			}
		})
	}
}

// The tests below run this test binary again as `go test` would, with a
// store and a changed agent named by the environment, so that a failing
// or -update run can be watched from outside.
const (
	childStoreEnv = "ACPTAPTEST_CHILD_STORE"
	childArgsEnv  = "ACPTAPTEST_CHILD_ARGS" // the changed agent's arguments, one per line
)

// TestChildReplay is the test the child runs; it does nothing otherwise.
func TestChildReplay(t *testing.T) {
	db := os.Getenv(childStoreEnv)
	if db == "" {
		t.Skip("run by TestReplayFails and TestReplayUpdate")
	}
	args := strings.Split(os.Getenv(childArgsEnv), "\n")
	exe, _ := os.Executable()
	acptaptest.Replay(t, db, &acptaptest.Options{ // the line failures are reported at
		Replay:   replayOptions(args...),
		Rerecord: rerecord.Options{Argv: append([]string{exe}, args...), Env: append(agentEnv(), demoKeyIf()...)},
	})
}

// demoKeyIf is the demo key when the child runs with it.
func demoKeyIf() []string {
	if os.Getenv("OPENAI_API_KEY") != "" {
		return []string{"OPENAI_API_KEY=" + os.Getenv("OPENAI_API_KEY")}
	}
	return nil
}

// replayLine is the line of TestChildReplay that calls Replay, where its
// subtests' failures are reported.
func replayLine(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("acptaptest_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(src), "\n") {
		if strings.Contains(line, "// the line failures are reported at") {
			return fmt.Sprintf("acptaptest_test.go:%d: ", i+1)
		}
	}
	t.Fatal("no Replay call in TestChildReplay")
	return ""
}

func runChild(t *testing.T, db string, agentArgs []string, flags ...string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"-test.run=^TestChildReplay$", "-test.v"}, flags...)...)
	cmd.Env = append(os.Environ(), childStoreEnv+"="+db, childArgsEnv+"="+strings.Join(agentArgs, "\n"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return string(out), 0
}

func TestReplayFails(t *testing.T) {
	db := filepath.Join(t.TempDir(), "acptap.db")
	recordDemo(t, db, "scripted", false, "--message", "Fixed it.")
	out, code := runChild(t, db, []string{"--message", "Did nothing."})
	// The subtest fails with the CLI's report: its FAIL line and its diff.
	for _, want := range []string{
		`--- FAIL: TestChildReplay/scripted`,
		// At the line that called Replay, not inside acptaptest.
		replayLine(t) + "FAIL scripted: agent output differs",
		`FAIL scripted: agent output differs in turn 1, agent message, update 1: content.text: expected "Fixed it.", got "Did nothing."`,
		`(?m)^\s*-\s+"text": "Fixed it\.",$`,
		`(?m)^\s*\+\s+"text": "Did nothing\.",$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) && !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

func TestReplayUpdate(t *testing.T) {
	db := filepath.Join(t.TempDir(), "acptap.db")
	recordDemo(t, db, "scripted", false, "--message", "Fixed it.")
	changed := []string{"--message", "Did nothing."}
	out, code := runChild(t, db, changed, "-update")
	if code != 0 || !strings.Contains(out, "UPDATED scripted (expected agent stream rewritten:") {
		t.Fatalf("with -update: exit %d, output:\n%s\nwant exit 0 and UPDATED", code, out)
	}
	// The recording now expects the changed agent.
	if out, code := runChild(t, db, changed); code != 0 || !strings.Contains(out, "--- PASS: TestChildReplay/scripted") {
		t.Errorf("after -update: exit %d, output:\n%s\nwant the changed agent to pass", code, out)
	}
	if out, code := runChild(t, db, []string{"--message", "Fixed it."}); code != 1 {
		t.Errorf("after -update, the old agent: exit %d, want 1; output:\n%s", code, out)
	}
}

// TestReplayDirectory replays recordings exported into a directory, as the
// CLI reads them, and -update writes the change back to its files.
func TestReplayDirectory(t *testing.T) {
	db := filepath.Join(t.TempDir(), "acptap.db")
	recordDemo(t, db, "scripted", false, "--message", "Fixed it.")
	dir := t.TempDir()
	st, err := store.Open(db, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := fixture.FromStore(st, "scripted")
	if err == nil {
		err = fixture.Export(t.Context(), rec, filepath.Join(dir, "scripted"))
	}
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	reports, err := acptaptest.Check(t.Context(), dir, &acptaptest.Options{Replay: replayOptions()})
	if err != nil || len(reports) != 1 || reports[0].Outcome != acptaptest.Passed {
		t.Fatalf("Check of the directory: %v, %+v; want scripted PASS", err, reports)
	}
	changed := []string{"--message", "Did nothing."}
	if out, code := runChild(t, dir, changed, "-update"); code != 0 || !strings.Contains(out, "UPDATED scripted") {
		t.Fatalf("with -update: exit %d, output:\n%s", code, out)
	}
	events, err := os.ReadFile(filepath.Join(dir, "scripted", "events.ndjson"))
	if err != nil || !strings.Contains(string(events), `"Did noth"`) || strings.Contains(string(events), `"Fixed it"`) {
		t.Errorf("events.ndjson after -update (%v): want the changed answer written back", err)
	}
	if out, code := runChild(t, dir, changed); code != 0 {
		t.Errorf("after -update: exit %d, output:\n%s", code, out)
	}
}

// TestRecordMode: -acptap.record records each recording again against the
// live LLM, with the changed agent, and replaces it; without the key the
// subtest fails naming it.
func TestRecordMode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: demollm.Handler()}
	go srv.Serve(ln)
	defer srv.Close()
	db := filepath.Join(t.TempDir(), "acptap.db")
	if err := recordAt(db, "fix-typo", "http://"+ln.Addr().String()+"/v1"); err != nil {
		t.Fatal(err)
	}
	changed := []string{"--system", "Answer in French."}

	out, code := runChild(t, db, changed, "-acptap.record")
	if code != 1 || !strings.Contains(out, "rerecord fix-typo: the agent had OPENAI_API_KEY when recorded, which is not set here") {
		t.Errorf("-acptap.record without the key: exit %d, want 1 naming the key; output:\n%s", code, out)
	}
	t.Setenv("OPENAI_API_KEY", "sk-demo-not-a-real-key")
	out, code = runChild(t, db, changed, "-acptap.record")
	if code != 0 || !strings.Contains(out, "RERECORDED fix-typo in ") || !strings.Contains(out, "Answer in French.") {
		t.Fatalf("-acptap.record: exit %d, want 0 and the change reported; output:\n%s", code, out)
	}
	srv.Close() // replays are offline
	t.Setenv("OPENAI_API_KEY", "")
	if out, code := runChild(t, db, changed); code != 0 {
		t.Errorf("replay of the new version with the changed agent: exit %d, output:\n%s", code, out)
	}
	if out, code := runChild(t, db, nil); code != 1 {
		t.Errorf("replay of the new version with the old agent: exit %d, want 1; output:\n%s", code, out)
	}
}

package rerecord

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/testing/testagent"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/record"
	"github.com/acptap/acptap/scenario"
	"github.com/acptap/acptap/store"
)

// agentEnv makes the test binary the test agent.
const agentEnv = "ACPTAP_RERECORD_TEST_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(agentEnv) == "1" {
		os.Exit(testagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

func env(extra ...string) []string { return append(testkit.ChildEnv(extra...), agentEnv+"=1") }

// recordScenario records the scenario file at path with the test agent
// and args into st, as record --scenario does.
func recordScenario(t *testing.T, st *store.Store, name, path string, args ...string) {
	t.Helper()
	sc, err := scenario.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cwd := filepath.Join(t.TempDir(), "workspace")
	if err := os.CopyFS(cwd, os.DirFS(sc.Workspace)); err != nil {
		t.Fatal(err)
	}
	ro := record.Options{
		Argv: testkit.SelfArgv(t, args...), Env: env(), Name: name, Dir: cwd, Snapshot: true, NoProxyEnv: true,
		Scenario: sc.Source, ScenarioPath: path, CADir: filepath.Join(t.TempDir(), "ca"), Logf: t.Logf,
	}
	d, err := record.RunDriven(t.Context(), st, ro, func(stdin io.WriteCloser, stdout io.Reader) error {
		_, err := scenario.Play(t.Context(), sc, stdin, stdout, scenario.Options{Cwd: cwd})
		return err
	})
	if err != nil || d.DriverErr != nil {
		t.Fatalf("recording: %v, %v", err, d.DriverErr)
	}
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

// TestScenarioGone re-records a scenario's recording whose file is gone:
// from the copy kept with the recording, in its snapshot's workspace.
func TestScenarioGone(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("from the workspace\n"), 0o644)
	path := filepath.Join(dir, "reads.json")
	os.WriteFile(path, []byte(`{"workspace": "ws", "prompts": ["read it"], "permissions": ["allow_once"]}`), 0o644)
	st := openStore(t)
	recordScenario(t, st, "reads", path, "--read", "notes.txt")
	os.RemoveAll(dir) // the file and its workspace are gone

	dst := openStore(t)
	res, err := Run(context.Background(), st, "reads", dst, Options{Argv: testkit.SelfArgv(t, "--read", "notes.txt", "--message", "Read."), Env: env(), CADir: filepath.Join(t.TempDir(), "ca"), Logf: t.Logf})
	if err != nil || res.Err != nil {
		t.Fatalf("Run: %v, %v", err, res.Err)
	}
	if turns := res.Scenario.Sessions[0].Turns; len(turns) != 1 || turns[0].Text != "Read." {
		t.Errorf("turns %+v, want the changed agent's answer", turns)
	}
	meta, err := dst.Get("reads")
	if err != nil || meta.Scenario != path || !meta.Snapshot {
		t.Fatalf("the new version: %+v, %v; want the scenario's path kept and a snapshot", meta, err)
	}
	kept, err := dst.Blob("reads", store.ScenarioBlob)
	if err != nil || !strings.Contains(string(kept), `"workspace": "ws"`) {
		t.Errorf("the new version's scenario copy: %q, %v; want the original file", kept, err)
	}
	// The agent read the file from the snapshot's workspace.
	var read bool
	dst.Lines("reads", func(e store.Event) error {
		read = read || strings.Contains(string(e.Data), "from the workspace")
		return nil
	})
	if !read {
		t.Error("the new version lacks the workspace file's text the agent read")
	}
}

func TestCheckKeys(t *testing.T) {
	meta := store.Recording{Name: "r", Env: []store.EnvVar{
		{Name: "HOME", Value: "/home/me"},
		{Name: "OPENAI_API_KEY", Withheld: store.WithheldSecret},
		{Name: "GH_TOKEN", Withheld: store.WithheldSecret},
		{Name: "LONG", Withheld: store.WithheldLong},
	}}
	err := CheckKeys(meta, []string{"GH_TOKEN=x", "OPENAI_API_KEY="})
	var ke *KeysError
	if !errors.As(err, &ke) || strings.Join(ke.Vars, ",") != "OPENAI_API_KEY" {
		t.Fatalf("got %v, want OPENAI_API_KEY missing", err)
	}
	if want := "rerecord r: the agent had OPENAI_API_KEY when recorded, which is not set here; rerecord calls the live LLM: set it"; err.Error() != want {
		t.Errorf("got %q\nwant %q", err, want)
	}
	if err := CheckKeys(meta, []string{"GH_TOKEN=x", "OPENAI_API_KEY=y"}); err != nil {
		t.Errorf("with both keys: %v", err)
	}
	if err := CheckKeys(meta, []string{}); err == nil || !strings.Contains(err.Error(), "had OPENAI_API_KEY, GH_TOKEN when recorded, which are not set here; rerecord calls the live LLM: set them") {
		t.Errorf("with none: %v", err)
	}
}

func TestNoAgent(t *testing.T) {
	st := openStore(t)
	w, err := st.Create(store.Recording{Name: "empty"}, false)
	if err != nil {
		t.Fatal(err)
	}
	w.Finish()
	_, err = Run(context.Background(), st, "empty", openStore(t), Options{})
	if !errors.Is(err, ErrNoAgent) {
		t.Errorf("got %v, want ErrNoAgent", err)
	}
}

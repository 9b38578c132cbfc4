package calibrate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/testagent"
	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/store"
)

// agentEnv, set to 1, makes the test binary run testagent.Main instead of
// the tests, so that the tests can replay the agent as a real process.
const agentEnv = "CALIBRATE_TEST_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(agentEnv) == "1" {
		os.Exit(testagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

func gorace() string { return strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0") }

// record runs the test agent with args under the scripted editor in a
// workspace holding notes.txt, and stores the session in a new store as
// acptap record would. It returns the store and the agent's command.
func record(t *testing.T, args ...string) (*store.Store, []string) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("Teh quick brown fox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := testkit.SelfArgv(t, args...)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stderr testkit.SyncBuffer
	tr, err := testeditor.Run(ctx, testeditor.Options{
		Argv: argv, Dir: dir, Cwd: dir, Stderr: &stderr, Prompts: []string{"fix the typo", "thanks"},
		Env: testkit.ChildEnv(agentEnv+"=1", "GORACE="+gorace()),
	})
	if err != nil {
		t.Fatalf("recording: %v\n%s", err, stderr.String())
	}
	w, err := st.Create(store.Recording{Name: "r", Argv: argv, Cwd: dir, Home: os.Getenv("HOME"), Tmp: os.TempDir()}, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range tr.Messages {
		e := store.Event{Kind: store.KindFrame, Lane: store.LaneAgent, Offset: time.Duration(i) * time.Millisecond, Data: []byte(m.Raw)}
		if m.Dir == "send" {
			e.Lane = store.LaneEditor
		}
		if m.Msg != nil {
			e.Data = slices.Clone(m.Msg)
		}
		w.Append(e)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return st, argv
}

func options(t *testing.T, runs int) Options {
	ca, err := proxy.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return Options{Runs: runs, Replay: replay.Options{
		Env: []string{agentEnv + "=1", "GORACE=" + gorace()}, CA: ca, Timeout: 20 * time.Second, Grace: 10 * time.Second,
	}}
}

func TestRun(t *testing.T) {
	st, argv := record(t, "--noise", "--read", "notes.txt")
	ctx := t.Context()
	opts := options(t, 0)
	if res, err := replay.Run(ctx, st, "r", opts.Replay); err != nil || res.Equal() {
		t.Fatalf("uncalibrated replay: %v, equal %v; want a divergence", err, err == nil && res.Equal())
	}
	res, err := Run(ctx, st, "r", opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Calibrated() || res.Runs != DefaultRuns || res.Name != "r" {
		t.Fatalf("Run: calibrated %v after %d runs: %v; want calibrated after %d", res.Calibrated(), res.Runs, res.Conflicts, DefaultRuns)
	}
	var paths []string
	for _, l := range res.Rules {
		paths = append(paths, l.Rule.WithComment("").String())
		if len(l.Values) != 1+DefaultRuns {
			t.Errorf("rule %s learned from %d values, want %d", l.Rule, len(l.Values), 1+DefaultRuns)
		}
	}
	want := []string{
		`{"path":"$.params.update.content[*].content.text","regexp":"( as <tmp>/agent-home\\.)[0-9A-Za-z]{6}(/projects/<cwd>/notes\\.)","replace":"${1}<random>${2}"}`,
		`{"path":"$.params.update.content[*].content.text","regexp":"(\nshell job )[0-9]+$","replace":"${1}<number>"}`,
		`{"path":"$.params.update.rawOutput.run","regexp":"^[0-9a-f]{16}$","replace":"<hex>"}`,
	}
	if strings.Join(paths, "\n") != strings.Join(want, "\n") {
		t.Errorf("rules\n%s\nwant\n%s", strings.Join(paths, "\n"), strings.Join(want, "\n"))
	}
	if err := Save(st, res); err != nil {
		t.Fatal(err)
	}
	stored, err := replay.StoredRules(st, "r")
	if err != nil || len(stored) != len(res.Rules) {
		t.Fatalf("StoredRules = %d rules, %v; want %d", len(stored), err, len(res.Rules))
	}
	for range 3 {
		if res, err := replay.Run(ctx, st, "r", opts.Replay); err != nil || !res.Equal() {
			t.Fatalf("calibrated replay: %v, %+v", err, res)
		}
	}

	// A changed agent: no calibration, and the stored rules stay.
	for _, tc := range []struct {
		args []string
		kind Kind
		runs int
		want string
	}{
		{[]string{"--message", "Something else"}, Steady, DefaultRuns,
			`every run differs from the recording the same way, which is no noise: the recording caught a rare behaviour, or the agent changed since; at agent output $[6].params.update.content.text: recorded "You said: fix the typo", live "Something else"`},
		// A stream more, in every run: no presence rule makes a stream.
		{[]string{"--thought", "Hm."}, Structure, DefaultRuns,
			`run 1 differs from the recording in more than values at agent output turn 1, agent thought, value 1: recorded nothing, live {`},
		// A request fewer in every run: no noise either.
		{[]string{"--no-permission"}, Steady, DefaultRuns,
			`every run differs from the recording the same way, which is no noise: the recording caught a rare behaviour, or the agent changed since; at agent output turn 1, requests and responses, value 3: recorded {"id":"<agentRpc:1>","jsonrpc":"2.0","method":"session/request_permission"`},
		{[]string{"--exit", "3"}, Diverged, 1,
			"run 1 diverged in more than the agent's output: editor side: "},
	} {
		o := options(t, 0)
		o.Replay.Argv = append([]string{argv[0], "--noise", "--read", "notes.txt"}, tc.args...)
		res, err := Run(ctx, st, "r", o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Calibrated() || res.Conflicts[0].Kind != tc.kind || res.Runs != tc.runs || len(res.Rules) != 0 || !strings.HasPrefix(res.Conflicts[0].String(), tc.want) {
			t.Errorf("Run with %v: %d runs, %d rules, conflicts %v; want %d runs, no rules, first\n%s", tc.args, res.Runs, len(res.Rules), res.Conflicts, tc.runs, tc.want)
		}
		if err := Save(st, res); !errors.Is(err, ErrNotCalibrated) {
			t.Errorf("Save of an uncalibrated result: %v, want ErrNotCalibrated", err)
		}
	}
	if again, err := replay.StoredRules(st, "r"); err != nil || len(again) != len(stored) {
		t.Errorf("after failed calibrations, %d rules stored, %v; want the %d of before", len(again), err, len(stored))
	}

	if _, err := Run(ctx, st, "r", Options{Runs: -1}); !errors.Is(err, ErrRuns) {
		t.Errorf("Run with -1 runs: %v, want ErrRuns", err)
	}
	faulted := opts
	fault, err := replay.ParseStdioFault("1=drop")
	if err != nil {
		t.Fatal(err)
	}
	faulted.Replay.StdioFaults = []replay.StdioFault{fault}
	if _, err := Run(ctx, st, "r", faulted); !errors.Is(err, ErrFaults) {
		t.Errorf("Run with a stdio fault: %v, want ErrFaults", err)
	}
	if _, err := Run(ctx, st, "nope", opts); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Run of a missing recording: %v, want ErrNotFound", err)
	}
}

// TestNothingVaries: an agent that varies nothing gets an empty rule set,
// which Save stores.
func TestNothingVaries(t *testing.T) {
	st, _ := record(t, "--read", "notes.txt")
	res, err := Run(t.Context(), st, "r", options(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Calibrated() || len(res.Rules) != 0 || res.Runs != 2 {
		t.Fatalf("Run: %d runs, rules %v, conflicts %v; want 2 runs and nothing", res.Runs, res.Rules, res.Conflicts)
	}
	if err := Save(st, res); err != nil {
		t.Fatal(err)
	}
	if rules, err := replay.StoredRules(st, "r"); err != nil || rules == nil || len(rules) != 0 {
		t.Errorf("StoredRules = %v, %v; want an empty set", rules, err)
	}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// TestSamples covers how replays become samples: frame by frame, request
// by request, and a frame or a request more is a conflict.
func TestSamples(t *testing.T) {
	rec := []json.RawMessage{raw(`{"a":1}`), raw(`{"b":"x"}`)}
	differs := []replay.Divergence{{Kind: replay.OutputDiffers}}
	results := []*replay.Result{
		{Expected: rec, Actual: []json.RawMessage{raw(`{"a":1}`), raw(`{"b":"y"}`)}, Divergences: differs,
			Requests: []replay.RequestPair{{Number: 2, Recorded: "r2", Live: "l2"}, {Number: 1, Recorded: "r1", Live: "l1"}}},
		{Expected: rec, Actual: []json.RawMessage{raw(`{"a":1}`), raw(`{"b":"z"}`)}, Divergences: differs,
			Requests: []replay.RequestPair{{Number: 1, Recorded: "r1", Live: "m1"}, {Number: 2, Recorded: "r2", Live: "m2"}}},
	}
	samples, conflicts := agentSamples(results)
	if len(conflicts) != 0 || len(samples) != 2 || samples[1].Name != "agent output $[1]" || len(samples[1].Values) != 3 {
		t.Fatalf("agentSamples = %+v, %v", samples, conflicts)
	}
	if _, _, _, differ := normalize.FirstDifference(samples[1].Values, []any{raw(`{"b":"x"}`), raw(`{"b":"y"}`), raw(`{"b":"z"}`)}); differ {
		t.Errorf("sample 1 values %v, want the recorded frame, then each run's", samples[1].Values)
	}
	reqs, conflicts := requestSamples(results)
	if len(conflicts) != 0 || len(reqs) != 2 || reqs[0].Name != "llm #1 $" || !slices.Equal(reqs[0].Values, []any{"r1", "l1", "m1"}) {
		t.Errorf("requestSamples = %+v, %v; want llm #1 with r1, l1, m1 first", reqs, conflicts)
	}

	// A run replay found equal teaches nothing, however its comparison
	// listed the streams (a state notification a turn later): its values
	// are the recording's.
	equal := &replay.Result{Expected: []json.RawMessage{raw(`{"a":1}`)}, Actual: []json.RawMessage{raw(`{"a":1}`), raw(`{"state":1}`), raw(`{"b":"x"}`)}}
	samples, conflicts = agentSamples(append(slices.Clone(results), equal))
	if len(conflicts) != 0 || len(samples) != 2 || len(samples[1].Values) != 4 || string(samples[1].Values[3].(json.RawMessage)) != `{"b":"x"}` {
		t.Errorf("agentSamples with a run replay found equal: %+v, %v; want its values the recording's", samples, conflicts)
	}
	if samples, conflicts := agentSamples([]*replay.Result{equal, equal}); len(samples) != 0 || len(conflicts) != 0 {
		t.Errorf("agentSamples of runs all equal: %+v, %v; want nothing to learn", samples, conflicts)
	}

	results[1].Actual = append(results[1].Actual, raw(`{"c":1}`))
	results[1].Requests = results[1].Requests[:1]
	if _, c := agentSamples(results); len(c) != 1 || c[0].Kind != Structure || c[0].Run != 2 || c[0].Path != "agent output $[2]" {
		t.Errorf("agentSamples with a frame more: %+v, want a Structure conflict of run 2 at $[2]", c)
	}
	if _, c := requestSamples(results); len(c) != 1 || c[0].Run != 2 || c[0].Path != "llm #2 $" {
		t.Errorf("requestSamples with a request fewer: %+v, want a conflict of run 2 at llm #2", c)
	} else if got := c[0].String(); got != `run 2 differs from the recording in more than values at llm #2 $: recorded "1 request", live "0 requests"` {
		t.Errorf("String() = %s", got)
	}
}

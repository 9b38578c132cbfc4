package replay

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/acptap/acptap/lane"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/replay/driver"
)

// recorded records a session of the test agent with args and loads it.
func recorded(t *testing.T, s session) *recording {
	t.Helper()
	st := openStore(t)
	recordSession(t, st, "r", s)
	rec, err := load(st, "r")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.close)
	return rec
}

// spooled returns the lines of a spool.
func spooled(t *testing.T, s *frameSpool) [][]byte {
	t.Helper()
	var lines [][]byte
	for i := range s.Len() {
		l, err := s.Line(i)
		if err != nil {
			t.Fatal(err)
		}
		if l.Lane == lane.Agent {
			lines = append(lines, l.Data)
		}
	}
	return lines
}

// agentCount returns how many of rec's compared frames are the agent's.
func agentCount(t *testing.T, rec *recording) int {
	t.Helper()
	n := 0
	for _, i := range rec.compared {
		l, err := rec.frames.Line(i)
		if err != nil {
			t.Fatal(err)
		}
		if l.Lane == lane.Agent {
			n++
		}
	}
	return n
}

// agentRunConfig is the agentConfig of a run of the test agent with args
// against rec, in a fresh directory.
func agentRunConfig(t *testing.T, rec *recording, args ...string) agentConfig {
	dir := t.TempDir()
	return agentConfig{
		argv:    testkit.SelfArgv(t, args...),
		dir:     dir,
		env:     recordEnv(),
		grace:   10 * time.Second,
		frames:  rec.frames,
		timeout: 20 * time.Second,
		pathMap: map[string]string{rec.meta.Cwd: dir},
		keep:    true,
	}
}

func runIt(t *testing.T, cfg agentConfig) *agentRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	run, err := runAgent(ctx, cfg)
	if err != nil {
		t.Fatalf("runAgent: %v", err)
	}
	t.Cleanup(run.live.close)
	return run
}

func TestRunAgent(t *testing.T) {
	args := []string{"--read", "notes.txt", "--string-ids"}
	rec := recorded(t, session{args: args, prompts: []string{"one", "two"}})
	var stderr testkit.SyncBuffer
	cfg := agentRunConfig(t, rec, append(args, "--stderr-log")...)
	cfg.stderr = &stderr
	run := runIt(t, cfg)
	if run.driveErr != nil {
		t.Fatalf("the editor side failed: %v", run.driveErr)
	}
	if run.exit.Code != 0 || run.exit.Signal != 0 {
		t.Errorf("the agent ended with %v, want exit status 0", run.exit)
	}
	lines := spooled(t, run.live)
	if len(lines) != agentCount(t, rec) {
		t.Errorf("%d live lines, want the %d recorded", len(lines), agentCount(t, rec))
	}
	if run.drive.Received != len(lines) || !slices.EqualFunc(run.kept, lines, slices.Equal) || run.drive.Live != nil {
		t.Errorf("the driver saw %d lines (keeping %d), runAgent kept %d and spooled %d", run.drive.Received, len(run.drive.Live), len(run.kept), len(lines))
	}
	if !strings.Contains(stderr.String(), "testagent: ") {
		t.Errorf("the agent's stderr did not reach the config's: %q", stderr.String())
	}
	// The recorded cwd was mapped to the run's directory, which the
	// agent was started in.
	live := string(slices.Concat(lines...))
	if !strings.Contains(live, cfg.dir) || strings.Contains(live, rec.meta.Cwd) {
		t.Errorf("the agent mentions the recorded cwd %s or not its own %s: was the session's cwd mapped?", rec.meta.Cwd, cfg.dir)
	}
}

// TestRunAgentLongLines checks that lines stdiotap hands over in pieces
// reach the driver and the comparison whole.
func TestRunAgentLongLines(t *testing.T) {
	args := []string{"--message", strings.Repeat("a long answer ", 20), "--chunk-size", "100"}
	rec := recorded(t, session{args: args})
	cfg := agentRunConfig(t, rec, args...)
	cfg.maxLine = 16
	run := runIt(t, cfg)
	if run.driveErr != nil {
		t.Fatalf("the editor side failed: %v", run.driveErr)
	}
	lines := spooled(t, run.live)
	if len(lines) != agentCount(t, rec) {
		t.Fatalf("%d live lines, want the %d recorded", len(lines), agentCount(t, rec))
	}
	long := 0
	for _, l := range lines {
		if !json.Valid(l) {
			t.Errorf("live line %q is not a whole JSON line", l)
		}
		if len(l) > cfg.maxLine {
			long++
		}
	}
	if long == 0 {
		t.Errorf("no line is longer than %d bytes: the test tests nothing", cfg.maxLine)
	}
}

func TestRunAgentExitsAtOnce(t *testing.T) {
	rec := recorded(t, session{})
	run := runIt(t, agentRunConfig(t, rec, "--exit", "3"))
	if run.exit.Code != 3 {
		t.Errorf("the agent ended with %v, want exit status 3", run.exit)
	}
	var we *driver.WaitError
	if !errors.As(run.driveErr, &we) || !errors.Is(we, driver.ErrOutputClosed) {
		t.Errorf("driveErr = %v, want a *driver.WaitError for the agent's output ending", run.driveErr)
	}
	if lines := spooled(t, run.live); len(lines) != 0 {
		t.Errorf("live lines %q, want none", lines)
	}
}

func TestRunAgentCannotStart(t *testing.T) {
	rec := recorded(t, session{})
	cfg := agentRunConfig(t, rec)
	cfg.argv = []string{"/nonexistent/agent-xyz"}
	if run, err := runAgent(context.Background(), cfg); !errors.Is(err, ErrStart) {
		t.Errorf("runAgent = %+v, %v; want ErrStart", run, err)
	}
}

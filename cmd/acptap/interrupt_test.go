package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/testkit"
)

// TestReplaySignal interrupts `acptap replay` of two recordings while the
// second replays: the first's report is printed and in the JUnit file, the
// running agent is stopped, nothing is left in TMPDIR, and acptap exits
// 128+n, for each of SIGINT, SIGTERM and SIGHUP.
func TestReplaySignal(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "a-quick", agentEnv(), nil)
	// Ten chunks 400ms apart per turn: the replay of b-slow takes 8 s,
	// unless interrupted.
	recordSession(t, dir, db, "b-slow", agentEnv(), nil, "--chunk-size", "1", "--chunk-delay", "400ms", "--message", "ten chars!")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			tmp := t.TempDir()
			junit := filepath.Join(t.TempDir(), "r.xml")
			mark := "ACPTAP_TEST_MARK=" + filepath.Base(tmp)
			cmd := exec.Command("acptap", "replay", "--store", db, "--parallel", "1", "--junit", junit, "--env", mark, "a-quick", "b-slow")
			cmd.Dir = dir
			cmd.Env = append(agentEnv(), "TMPDIR="+tmp)
			// Read while the child writes: the buffers are shared with
			// exec's copying goroutines.
			var stdout, stderr testkit.SyncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The slow agent runs once its first chunk is out.
			deadline := time.Now().Add(time.Minute)
			for markedProcesses(mark) == 0 || !strings.Contains(stdout.String(), "PASS a-quick") {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("the slow replay never started; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			code := -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if want := 128 + int(sig); code != want {
				t.Errorf("exit %d (%v), want %d", code, err, want)
			}
			if got := stderr.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "interrupted by "+sigName(sig)+" after 1 of 2 recordings, whose reports are complete") {
				t.Errorf("stderr %q, want one line saying what ran", got)
			}
			if !strings.HasPrefix(stdout.String(), "PASS a-quick (") || strings.Contains(stdout.String(), "b-slow") {
				t.Errorf("stdout %q, want a-quick's report and nothing of b-slow", stdout.String())
			}
			if b, err := os.ReadFile(junit); err != nil || !bytes.Contains(b, []byte(`<testcase name="a-quick"`)) || bytes.Contains(b, []byte("b-slow")) {
				t.Errorf("JUnit report (%v):\n%s\nwant a-quick's case alone", err, b)
			}
			if n := markedProcesses(mark); n != 0 {
				t.Errorf("%d agent processes outlived the replay", n)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				var names []string
				for _, e := range left {
					names = append(names, e.Name())
				}
				t.Errorf("left in TMPDIR: %s", strings.Join(names, ", "))
			}
		})
	}
}

func sigName(sig syscall.Signal) string {
	return map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP"}[sig]
}

// markedProcesses counts the live processes whose environment holds mark.
func markedProcesses(mark string) int {
	n := 0
	paths, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(b, []byte{0}) {
			if string(kv) == mark {
				n++
				break
			}
		}
	}
	return n
}

// TestRecordScenarioSignal interrupts `acptap record --scenario` mid-turn:
// the agent is stopped, what was recorded is kept and replayable as far
// as it went, the workspace's copy is gone from TMPDIR, and acptap exits
// 128+n.
func TestRecordScenarioSignal(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	scenarioFile := filepath.Join(dir, "slow.json")
	if err := os.WriteFile(scenarioFile, []byte(`{"prompts": ["ten chars!", "never sent"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	mark := "ACPTAP_TEST_MARK=" + filepath.Base(tmp)
	cmd := exec.Command("acptap", "record", "--store", db, "--scenario", scenarioFile, "--", "testagent", "--chunk-size", "1", "--chunk-delay", "400ms")
	cmd.Dir = dir
	cmd.Env = append(agentEnv(), "TMPDIR="+tmp, mark)
	var stdout, stderr testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The agent is mid-turn once the recording is listed as live.
	deadline := time.Now().Add(time.Minute)
	for {
		out, _ := exec.Command("acptap", "show", "--store", db, "slow").Output()
		if bytes.Contains(out, []byte("agent_message_chunk")) {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the turn never started; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 130 {
		t.Errorf("exit %d (%v), want 130\nstderr:\n%s", code, err, stderr.String())
	}
	if got := stderr.String(); !strings.Contains(got, "acptap: record: interrupted by SIGINT; what was recorded is kept\n") {
		t.Errorf("stderr %q, want the interruption said", got)
	}
	if got := stdout.String(); !strings.HasPrefix(got, "FAILED slow: prompt 1: gave up waiting for the session/prompt response: context canceled") {
		t.Errorf("stdout %q, want the scenario's end said", got)
	}
	if n := markedProcesses(mark); n != 0 {
		t.Errorf("%d agent processes outlived the recording", n)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("left in TMPDIR: %s", strings.Join(names, ", "))
	}
	out, err := exec.Command("acptap", "show", "--store", db, "slow").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(`session/prompt id=2 "ten chars!"`)) || bytes.Contains(out, []byte("never sent")) {
		t.Errorf("show (%v):\n%s\nwant the first turn kept, the second never sent", err, out)
	}
}

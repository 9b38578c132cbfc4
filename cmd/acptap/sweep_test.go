package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/testkit"
)

// tmpEntries returns the names in dir.
func tmpEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// waitMarked waits until a process whose environment holds mark runs,
// failing t (and killing cmd) after a minute.
func waitMarked(t *testing.T, cmd *exec.Cmd, mark string, out, errOut *testkit.SyncBuffer) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for markedProcesses(mark) == 0 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the agent never started; stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCalibrateSignal interrupts `acptap calibrate` while its first run's
// agent runs: the agent is stopped, its sandbox and its tap's files are
// removed, acptap says why it stopped and that it stored nothing, and
// exits 128+n, for each of SIGINT, SIGTERM and SIGHUP.
func TestCalibrateSignal(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	// Ten chunks 400ms apart per turn: each run takes 8 s, unless
	// interrupted.
	recordSession(t, dir, db, "slow", agentEnv(), nil, "--chunk-size", "1", "--chunk-delay", "400ms", "--message", "ten chars!")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			tmp := t.TempDir()
			mark := "ACPTAP_TEST_MARK=" + filepath.Base(tmp)
			cmd := exec.Command("acptap", "calibrate", "--store", db, "--runs", "3", "--env", mark, "slow")
			cmd.Dir = dir
			cmd.Env = append(agentEnv(), "TMPDIR="+tmp)
			var stdout, stderr testkit.SyncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitMarked(t, cmd, mark, &stdout, &stderr)
			// The sandbox and the tap's files are there while it runs.
			running := tmpEntries(t, tmp)
			if !slices.ContainsFunc(running, func(n string) bool { return strings.HasPrefix(n, "acptap-replay-") }) ||
				!slices.ContainsFunc(running, func(n string) bool { return strings.HasPrefix(n, "acptap-tap-") }) {
				t.Errorf("TMPDIR while the replay runs: %q, want a sandbox and the tap's files", running)
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
			want := "acptap: calibrate: interrupted by " + sigName(sig) + " after 0 of 1 recordings; no rules stored\n"
			if got := stderr.String(); got != want {
				t.Errorf("stderr %q, want %q", got, want)
			}
			if stdout.String() != "" {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			if n := markedProcesses(mark); n != 0 {
				t.Errorf("%d agent processes outlived calibrate", n)
			}
			if left := tmpEntries(t, tmp); len(left) != 0 {
				t.Errorf("left in TMPDIR: %s", strings.Join(left, ", "))
			}
		})
	}
	out, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "slow")
	if strings.Contains(out, "calibrated") {
		t.Errorf("an interrupted calibrate stored rules:\n%s", out)
	}
}

// TestSweepOfKilledDirs kills `acptap replay` and `acptap record` with
// SIGKILL, which leaves their sandbox and their tap's files in TMPDIR,
// then runs a replay: it removes what the dead processes left, and
// neither what a live process owns nor what names no process.
func TestSweepOfKilledDirs(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "slow", agentEnv(), nil, "--chunk-size", "1", "--chunk-delay", "400ms", "--message", "ten chars!")
	recordSession(t, dir, db, "quick", agentEnv(), nil)
	tmp := t.TempDir()
	env := append(agentEnv(), "TMPDIR="+tmp)

	// A replay killed while its agent runs.
	mark := "ACPTAP_TEST_MARK=" + filepath.Base(tmp)
	cmd := exec.Command("acptap", "replay", "--store", db, "--env", mark, "slow")
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitMarked(t, cmd, mark, &stdout, &stderr)
	cmd.Process.Kill()
	cmd.Wait()
	// Its agent ends with it (Pdeathsig).
	for deadline := time.Now().Add(10 * time.Second); markedProcesses(mark) != 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	left := tmpEntries(t, tmp)
	var killed []string
	for _, n := range left {
		if strings.HasPrefix(n, fmt.Sprintf("acptap-replay-%d-", cmd.Process.Pid)) || strings.HasPrefix(n, fmt.Sprintf("acptap-tap-%d-", cmd.Process.Pid)) {
			killed = append(killed, n)
		}
	}
	if len(killed) != 2 {
		t.Fatalf("TMPDIR after replay's SIGKILL: %q, want its sandbox and its tap's files, named with its pid %d", left, cmd.Process.Pid)
	}

	// A record killed while its agent runs: its tap process's files stay.
	rec := exec.Command("acptap", "record", "--store", db, "--name", "killed", "--", "testagent")
	rec.Dir, rec.Env = dir, env
	stdin, err := rec.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	waitlive := time.Now().Add(time.Minute)
	for !slices.ContainsFunc(tmpEntries(t, tmp), func(n string) bool {
		return strings.HasPrefix(n, "acptap-tap-") && !slices.Contains(killed, n)
	}) {
		if time.Now().After(waitlive) {
			rec.Process.Kill()
			rec.Wait()
			t.Fatal("acptap record never wrote its tap's files")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rec.Process.Kill()
	rec.Wait()

	// What a live process owns (this test's), and what names no
	// process, stay.
	keep := []string{
		fmt.Sprintf("acptap-replay-%d-1", os.Getpid()),
		fmt.Sprintf("acptap-tap-%d-1", os.Getpid()),
		"acptap-replay-1234567",
		"acptap-replay-x-1",
	}
	for _, n := range keep {
		if err := os.Mkdir(filepath.Join(tmp, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The killed record's tap process goes with it (Pdeathsig), but
	// asynchronously.
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, errOut, code := runAcptap(t, dir, env, "replay", "--store", db, "quick")
		if code != 0 {
			t.Fatalf("replay: exit %d\n%s%s", code, out, errOut)
		}
		got := tmpEntries(t, tmp)
		slices.Sort(got)
		want := slices.Clone(keep)
		slices.Sort(want)
		if slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TMPDIR after the next replay: %q, want only %q", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

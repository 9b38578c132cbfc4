package stdiotap

import (
	"bufio"
	"errors"
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// parentCommand runs the test binary as a parent process holding a
// Session (forward or plain) on its own stdio, whose agent is the test
// binary in helper mode agentArgs.
func parentCommand(t *testing.T, forward string, agentArgs ...string) *exec.Cmd {
	t.Helper()
	argv := helperArgv(t, append([]string{"parent", forward}, agentArgs...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = helperEnviron()
	return cmd
}

// startParent starts cmd and kills it after a minute, so that a hanging
// parent or agent fails the test instead of hanging it: a killed parent
// takes its agent with it, and its output ends.
func startParent(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := cmd.Process
	watchdog := time.AfterFunc(time.Minute, func() { p.Kill() })
	t.Cleanup(func() {
		watchdog.Stop()
		p.Kill()
	})
}

// TestForwardSignals sends a signal to a parent process running a
// Session with ForwardSignals, and checks that the agent, in a process
// group of its own, gets it and that its exit status becomes the
// parent's.
func TestForwardSignals(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
	}{
		{syscall.SIGTERM, "SIGTERM"},
		{syscall.SIGINT, "SIGINT"},
		{syscall.SIGHUP, "SIGHUP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := parentCommand(t, "forward", "trap", "7")
			stdin, err := cmd.StdinPipe() // kept open: no EOF, no stopping the agent
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			startParent(t, cmd)
			out := bufio.NewReader(stdout)
			if line, err := out.ReadString('\n'); line != "ready\n" {
				t.Fatalf("agent: got %q, %v; want %q", line, err, "ready\n")
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			rest, err := io.ReadAll(out)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(rest), "got "+tc.name+"\n"; got != want {
				t.Errorf("agent: got %q, want %q", got, want)
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 7 {
				t.Errorf("parent: got %v, want exit status 7", err)
			}
		})
	}

	// Without ForwardSignals the parent dies of the signal, and the agent
	// never gets it (it is killed by Pdeathsig where there is one).
	t.Run("off", func(t *testing.T) {
		cmd := parentCommand(t, "plain", "trap", "7")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		startParent(t, cmd)
		out := bufio.NewReader(stdout)
		if line, err := out.ReadString('\n'); line != "ready\n" {
			t.Fatalf("agent: got %q, %v; want %q", line, err, "ready\n")
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(out)
		if len(rest) != 0 {
			t.Errorf("agent: got %q, want nothing", rest)
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("parent: got %v, want killed by SIGTERM", err)
		}
		if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("parent: got %v, want killed by SIGTERM", err)
		}
	})
}

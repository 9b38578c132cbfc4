package stdiotap

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestPdeathsig kills a parent process running a Session with SIGKILL
// and checks that the agent dies too. The agent holds a FIFO open for
// writing, so the test reads EOF from it once the agent is gone.
func TestPdeathsig(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := parentCommand(t, "plain", "fifo", fifo)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Opened without waiting for a writer; the agent opens it before it
	// says it is ready.
	f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	startParent(t, cmd)
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("agent: got %q, %v; want %q", line, err, "ready\n")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// A deadline so that a surviving agent fails the test rather than
	// hanging it; the kernel kills the agent at once.
	f.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadAll(f); err != nil {
		t.Fatalf("agent still holds the FIFO after its parent was killed: %v", err)
	}
}

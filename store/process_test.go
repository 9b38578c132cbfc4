package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/testkit"
)

// The test binary re-executes itself as a helper process when childEnv
// names a mode, with the store's path in childPathEnv.
const (
	childEnv     = "ACPTAP_STORE_TEST_CHILD"
	childPathEnv = "ACPTAP_STORE_TEST_PATH"
)

// runChild is the helper process: "lock" and "rlock" hold the store open
// (read-write or read-only) until stdin closes and say "ready" on stdout;
// "writer" records crashEvents until killed, and says what it appended and
// what it flushed.
func runChild(mode, path string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "child %s: %v\n", mode, err)
		return 1
	}
	switch mode {
	case "lock", "rlock":
		// A transaction that lasts, the file's lock held all along.
		db, _, err := openDB(path, mode == "lock", false, waitForever, nil, nil)
		if err != nil {
			return fail(err)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		if err := db.Close(); err != nil {
			return fail(err)
		}
		return 0
	case "store":
		// An open Store with a recording under way, as acptap record has.
		s, err := Open(path, nil)
		if err != nil {
			return fail(err)
		}
		w, err := s.Create(Recording{Name: "child"}, false)
		if err != nil {
			return fail(err)
		}
		w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Data: []byte("from the child")})
		if err := w.Flush(); err != nil {
			return fail(err)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		if err := s.Close(); err != nil {
			return fail(err)
		}
		return 0
	case "replacer":
		// acptap record --force under way: the recording "a" is
		// replaced by one with a frame, until the child is killed.
		s, err := Open(path, nil)
		if err != nil {
			return fail(err)
		}
		w, err := s.Create(Recording{Name: "a"}, true)
		if err != nil {
			return fail(err)
		}
		w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Data: []byte("new")})
		if err := w.Flush(); err != nil {
			return fail(err)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		return fail(errors.New("stdin closed: the child should have been killed"))
	case "writer":
		s, err := Open(path, nil)
		if err != nil {
			return fail(err)
		}
		w, err := s.Create(Recording{Name: "killed", Argv: []string{"agent"}}, false)
		if err != nil {
			return fail(err)
		}
		for seq := uint64(1); ; seq++ {
			if got := w.Append(crashEvent(seq)); got != seq {
				return fail(fmt.Errorf("Append returned Seq %d, want %d", got, seq))
			}
			switch {
			case seq%256 == 0:
				if err := w.Flush(); err != nil {
					return fail(err)
				}
				fmt.Printf("committed %d\n", seq)
			case seq%32 == 0:
				fmt.Printf("appended %d\n", seq)
			}
		}
	}
	return fail(errors.New("unknown mode"))
}

// crashEvent is the event the writer child appends as seq.
func crashEvent(seq uint64) Event {
	e := Event{Seq: seq, Kind: KindFrame, Lane: Lane(seq%3 + 1), Offset: time.Duration(seq) * time.Microsecond}
	if seq%16 == 0 {
		e.Kind, e.Lane = KindExchange, LaneLLM
	}
	e.Data = fmt.Appendf(nil, "%d:", seq)
	e.Data = append(e.Data, bytes.Repeat([]byte{byte('a' + seq%26)}, int(seq*7919%20000))...)
	return e
}

// child is a running helper process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *testkit.SyncBuffer
}

func startChild(t *testing.T, mode, path string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childPathEnv+"="+path)
	c := &child{cmd: cmd, stderr: new(testkit.SyncBuffer)}
	cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdout = bufio.NewReader(stdout)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return c
}

// line reads a line of the child's stdout.
func (c *child) line(t *testing.T) string {
	t.Helper()
	l, err := c.stdout.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's stdout: %v; its stderr:\n%s", err, c.stderr)
	}
	return strings.TrimSuffix(l, "\n")
}

// stop closes the child's stdin and waits for it to exit.
func (c *child) stop(t *testing.T) {
	t.Helper()
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v; its stderr:\n%s", err, c.stderr)
	}
}

// TestLocked checks that Open waits for a lock held by a transaction of
// another process, up to the timeout, and fails with ErrLocked after it.
func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acptap.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	c := startChild(t, "lock", path)
	if l := c.line(t); l != "ready" {
		t.Fatalf("child said %q, want ready", l)
	}
	const timeout = 300 * time.Millisecond
	for _, readOnly := range []bool{false, true} {
		start := time.Now()
		s, err := Open(path, &Options{ReadOnly: readOnly, Timeout: timeout})
		elapsed := time.Since(start)
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) {
			t.Errorf("Open(ReadOnly: %v) of a store another process writes = %v, want ErrLocked naming the store", readOnly, err)
		}
		if elapsed < timeout {
			t.Errorf("Open(ReadOnly: %v) gave up after %v, before the timeout of %v", readOnly, elapsed, timeout)
		}
	}
	c.stop(t)
	s, err = Open(path, &Options{Timeout: -1})
	if err != nil {
		t.Fatalf("Open after the other process exited: %v", err)
	}
	s.Close()

	// Readers share the lock; a writer waits for them.
	c = startChild(t, "rlock", path)
	if l := c.line(t); l != "ready" {
		t.Fatalf("child said %q, want ready", l)
	}
	s, err = Open(path, &Options{ReadOnly: true, Timeout: -1})
	if err != nil {
		t.Errorf("read-only Open next to another reader: %v", err)
	} else {
		s.Close()
	}
	if s, err := Open(path, &Options{Timeout: -1}); !errors.Is(err, ErrLocked) {
		if err == nil {
			s.Close()
		}
		t.Errorf("Open of a store another process reads = %v, want ErrLocked", err)
	}
	c.stop(t)
}

// TestTwoProcesses checks that a Store of each of two processes writes
// the one file at once, each seeing the other's recording, live.
func TestTwoProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acptap.db")
	c := startChild(t, "store", path)
	if l := c.line(t); l != "ready" {
		t.Fatalf("child said %q, want ready", l)
	}
	s, err := Open(path, &Options{Timeout: -1})
	if err != nil {
		t.Fatalf("Open next to another process's open Store: %v", err)
	}
	defer s.Close()
	w, err := s.Create(Recording{Name: "parent"}, false)
	if err != nil {
		t.Fatalf("Create next to another process's Writer: %v", err)
	}
	w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Data: []byte("from the parent")})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get("child")
	if err != nil || rec.Done || !rec.Live || rec.Frames != 1 {
		t.Errorf("Get(child) = %+v, %v; want the child's live recording with its frame", rec, err)
	}
	if err := s.Delete("child"); !errors.Is(err, ErrBusy) {
		t.Errorf("Delete of the child's live recording = %v, want ErrBusy", err)
	}
	if _, err := s.Create(Recording{Name: "child"}, true); !errors.Is(err, ErrBusy) {
		t.Errorf("Create --force over the child's live recording = %v, want ErrBusy", err)
	}
	if err := s.PutBlob("child", "b", []byte("x")); !errors.Is(err, ErrBusy) {
		t.Errorf("PutBlob into the child's live recording = %v, want ErrBusy", err)
	}
	c.stop(t)
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	recs, err := s.List()
	if err != nil || len(recs) != 2 {
		t.Fatalf("List = %+v, %v; want both recordings", recs, err)
	}
	for _, r := range recs {
		// The child's Close finished its Writer; neither is live.
		if r.Live {
			t.Errorf("after both ended: %s is live", r.Name)
		}
	}
	if err := s.Delete("child"); err != nil {
		t.Errorf("Delete of the child's recording after it ended: %v", err)
	}
}

func TestKilledWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acptap.db")
	c := startChild(t, "writer", path)
	// Kill the child half-way between two Flushes, after a few of them,
	// while its Writer commits on its own.
	var committed, appended uint64
	for committed < 8*256 || appended%256 != 160 {
		l := c.line(t)
		verb, num, _ := strings.Cut(l, " ")
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil || n <= max(committed, appended) || verb != "committed" && verb != "appended" {
			t.Fatalf("child said %q after appending %d and committing %d", l, appended, committed)
		}
		appended = n
		if verb == "committed" {
			committed = n
		}
	}
	// The child goes on appending and committing while it dies.
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := c.cmd.Wait()
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want killed by SIGKILL; its stderr:\n%s", err, c.stderr)
	}

	s, err := Open(path, nil)
	if err != nil {
		t.Fatalf("Open after the writer was killed: %v", err)
	}
	recs, err := s.List()
	if err != nil || len(recs) != 1 || recs[0].Name != "killed" || recs[0].Done || recs[0].Live {
		t.Fatalf("List = %+v, %v; want the unfinished recording, not live", recs, err)
	}
	var n uint64
	var frames, exchanges int
	err = s.Events("killed", func(e Event) error {
		n++
		if want := crashEvent(n); !eventEqual(e, want) {
			return fmt.Errorf("got %s, want %s", describe(e), describe(want))
		}
		if e.Kind == KindFrame {
			frames++
		} else {
			exchanges++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if n < committed {
		t.Errorf("%d events survived, want at least the %d committed", n, committed)
	}
	if recs[0].Frames != frames || recs[0].Exchanges != exchanges {
		t.Errorf("counters = %d frames, %d exchanges; events have %d, %d", recs[0].Frames, recs[0].Exchanges, frames, exchanges)
	}
	t.Logf("%d events survived; the child had flushed %d and appended %d", n, committed, appended)

	// The store takes new recordings.
	w, err := s.Create(Recording{Name: "after"}, false)
	if err != nil {
		t.Fatalf("Create after the crash: %v", err)
	}
	w.Append(Event{Kind: KindFrame})
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkStoreFile(t, path)
}

package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestRecordMaxBacklog checks that --max-backlog reaches the recorder's
// bound. While the test holds the store's lock no commit can land, so
// framing soon waits for the store and what cat echoes piles up unframed:
// with --max-backlog 4MiB the stdio's half, 2 MiB, is the bound that the
// notice names, and forwarding stops before the 8 MiB sent are all
// echoed. With the default bound (128 MiB for stdio) there would be no
// notice at all, and everything would be echoed.
func TestRecordMaxBacklog(t *testing.T) {
	const size = 8 << 20
	db := filepath.Join(t.TempDir(), "s.db")
	cmd, stdin, stdout, errs := startCat(t, db, "bounded", "--max-backlog", "4MiB")
	stderr := make(chan string, 16)
	go func() {
		defer close(stderr)
		sc := bufio.NewScanner(errs)
		for sc.Scan() {
			stderr <- sc.Text()
		}
	}()

	// The recording exists: take the store's lock from under its writer.
	lock, err := os.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	unlock := func() {
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
			t.Error(err)
		}
	}
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()

	var sent bytes.Buffer
	for i := 0; sent.Len() < size; i++ {
		sent.Write(floodLine("bounded", i))
		sent.WriteByte('\n')
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := stdin.Write(sent.Bytes())
		if cerr := stdin.Close(); err == nil {
			err = cerr
		}
		wrote <- err
	}()
	// allEchoed says when the whole of sent has come back: the end of
	// stdout would not come while the store is locked, since acptap
	// exits only once its last frames are committed.
	var echo bytes.Buffer
	allEchoed := make(chan struct{})
	echoed := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		all := false
		for {
			n, err := stdout.Read(buf)
			echo.Write(buf[:n])
			if !all && echo.Len() >= sent.Len() {
				all = true
				close(allEchoed)
			}
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				echoed <- err
				return
			}
		}
	}()

	var behind string
	for behind == "" {
		select {
		case line, ok := <-stderr:
			if !ok {
				t.Fatal("acptap record closed stderr without a backlog notice")
			}
			if strings.Contains(line, "falls behind") {
				behind = line
			}
		case <-allEchoed:
			t.Fatalf("all %d bytes echoed with the store locked and no backlog notice: --max-backlog did not bound forwarding", sent.Len())
		}
	}
	if want := "forwarding will wait for it if that reaches 2 MiB"; !strings.HasSuffix(behind, want) {
		t.Errorf("backlog notice: got %q, want it to end %q", behind, want)
	}

	unlock()
	locked = false
	if err := <-wrote; err != nil {
		t.Fatalf("writing to acptap record: %v", err)
	}
	if err := <-echoed; err != nil {
		t.Fatalf("reading from acptap record: %v", err)
	}
	// All of stderr before Wait, which closes the pipe.
	var rest []string
	for line := range stderr {
		rest = append(rest, line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("acptap record: %v", err)
	}
	// Once the lock is let go, recording catches up, and may fall behind
	// again (cat echoes as fast as it is fed): notices in pairs, each of
	// the same bound, the last one of catching up. A backlog from a quarter
	// of the 2 MiB bound up is said in KiB below a MiB, else in whole MiB.
	caught := regexp.MustCompile(`^acptap: recording caught up with the agent's stdio \(it fell up to (\d+ KiB|[12] MiB) behind; forwarding (never waited|waited .* for it)\)$`)
	again := regexp.MustCompile(`^acptap: recording falls behind the agent's stdio by (\d+ KiB|[12] MiB); forwarding will wait for it if that reaches 2 MiB$`)
	for i, line := range rest {
		if want := []*regexp.Regexp{caught, again}[i%2]; !want.MatchString(line) {
			t.Errorf("stderr line %d after the notice: got %q, want one matching %s", i+1, line, want)
		}
	}
	if len(rest)%2 != 1 {
		t.Errorf("stderr after the notice: got %q, want it to end with recording caught up", rest)
	}
	if !bytes.Equal(echo.Bytes(), sent.Bytes()) {
		t.Errorf("echo: got %d bytes, want the %d sent", echo.Len(), sent.Len())
	}
	events := showJSON(t, db, "bounded")
	for _, lane := range []string{"editor", "agent"} {
		if got := laneBytes(t, events, lane); !bytes.Equal(got, sent.Bytes()) {
			t.Errorf("%s lane: got %d bytes, want the %d sent", lane, len(got), sent.Len())
		}
	}
}

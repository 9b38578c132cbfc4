package stdiotap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestRoundTrip sends a payload through an agent that echoes it in random
// writes, the editor writing it in random writes too, and checks that
// both directions are forwarded and framed exactly.
func TestRoundTrip(t *testing.T) {
	seed := newSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	payload := acpPayload(rng, 32<<20)

	r := start(t, Config{}, "echo", strconv.FormatUint(seed, 10))
	writeErr := make(chan error, 1)
	go func() {
		err := writeChunked(r.stdin, payload, rng)
		r.stdin.Close()
		writeErr <- err
	}()
	exit := r.wait(t)
	if err := <-writeErr; err != nil {
		t.Fatalf("editor write: %v", err)
	}
	if exit != (Exit{}) {
		t.Errorf("exit: got %v, want %v", exit, Exit{})
	}
	checkBytes(t, "editor received", r.stdout.bytes(), payload)
	for _, st := range []Stream{Stdin, Stdout} {
		got := r.log.get(st)
		checkFrames(t, st.String(), got, refFrames(st, payload, defaultMaxLine))
		checkBytes(t, st.String()+" reassembled", reassemble(got), payload)
		checkTimes(t, st.String(), r.Started(), got)
	}
	if got := r.log.get(Stderr); len(got) != 0 {
		t.Errorf("stderr: got %d frames, want none; first %s", len(got), describe(got[0]))
	}
}

// TestAgentOutput has the agent write a payload on its stdout or stderr
// and exit while the editor keeps stdin open.
func TestAgentOutput(t *testing.T) {
	for _, st := range []Stream{Stdout, Stderr} {
		t.Run(st.String(), func(t *testing.T) {
			seed := newSeed(t)
			payload := acpPayload(rand.New(rand.NewPCG(seed, 0)), 1<<20)
			file := filepath.Join(t.TempDir(), "payload")
			if err := os.WriteFile(file, payload, 0o600); err != nil {
				t.Fatal(err)
			}
			r := start(t, Config{}, "cat", file, strconv.FormatUint(seed, 10), st.String())
			if exit := r.wait(t); exit != (Exit{}) {
				t.Errorf("exit: got %v, want %v", exit, Exit{})
			}
			got, other := r.stdout.bytes(), r.stderr.bytes()
			if st == Stderr {
				got, other = other, got
			}
			checkBytes(t, "forwarded", got, payload)
			if len(other) != 0 {
				t.Errorf("other stream: got %q, want nothing", other)
			}
			checkFrames(t, st.String(), r.log.get(st), refFrames(st, payload, defaultMaxLine))
		})
	}
}

// TestMaxLine checks that lines longer than MaxLine are split into
// Continued pieces and that the pieces reassemble to the line.
func TestMaxLine(t *testing.T) {
	const max = 1000
	seed := newSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	var payload []byte
	for _, n := range []int{0, 1, max - 1, max, max + 1, 2*max - 1, 2 * max, 2*max + 1, 4*max + max/2, 0, 5*max + 3} {
		payload = append(payload, bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, n)...)
		payload = append(payload, '\n')
	}
	payload = append(payload, bytes.Repeat([]byte("z"), 2*max+max/2)...) // no final newline

	r := start(t, Config{MaxLine: max}, "echo", strconv.FormatUint(seed, 10))
	go func() {
		writeChunked(r.stdin, payload, rng)
		r.stdin.Close()
	}()
	if exit := r.wait(t); exit != (Exit{}) {
		t.Errorf("exit: got %v, want %v", exit, Exit{})
	}
	checkBytes(t, "editor received", r.stdout.bytes(), payload)
	for _, st := range []Stream{Stdin, Stdout} {
		got := r.log.get(st)
		continued := 0
		for i, l := range got {
			if len(l.Data) > max {
				t.Fatalf("%v frame %d: %d bytes, longer than MaxLine %d", st, i, len(l.Data), max)
			}
			if l.Continued {
				continued++
				if len(l.Data) != max {
					t.Fatalf("%v frame %d: Continued with %d bytes, want %d", st, i, len(l.Data), max)
				}
			}
		}
		if continued == 0 {
			t.Fatalf("%v: no Continued frame", st)
		}
		checkFrames(t, st.String(), got, refFrames(st, payload, max))
		checkBytes(t, st.String()+" reassembled", reassemble(got), payload)
	}
}

func TestExitCode(t *testing.T) {
	for _, code := range []int{0, 3, 255} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			r := start(t, Config{}, "exit", strconv.Itoa(code))
			exit := r.wait(t)
			if want := (Exit{Code: code}); exit != want {
				t.Errorf("got %v, want %v", exit, want)
			}
			if got, want := exit.String(), fmt.Sprintf("exit status %d", code); got != want {
				t.Errorf("String: got %q, want %q", got, want)
			}
		})
	}
}

func TestKilledBySignal(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
	}{
		{syscall.SIGKILL, "SIGKILL"},
		{syscall.SIGHUP, "SIGHUP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, Config{}, "kill", strconv.Itoa(int(tc.sig)))
			exit := r.wait(t)
			if want := (Exit{Code: 128 + int(tc.sig), Signal: tc.sig}); exit != want {
				t.Errorf("got %+v, want %+v", exit, want)
			}
			if got, want := exit.String(), "killed by "+tc.name; got != want {
				t.Errorf("String: got %q, want %q", got, want)
			}
		})
	}
}

// TestStdinEOF checks that an agent that does not exit when the editor
// closes stdin gets SIGTERM after Grace, and SIGKILL if it ignores that.
func TestStdinEOF(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want Exit
	}{
		{"linger", Exit{Code: 128 + int(syscall.SIGTERM), Signal: syscall.SIGTERM}},
		{"stubborn", Exit{Code: 128 + int(syscall.SIGKILL), Signal: syscall.SIGKILL}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			r := start(t, Config{Grace: 50 * time.Millisecond}, tc.mode)
			r.log.waitFor(t, Stdout, "ready")
			r.stdin.Close()
			if exit := r.wait(t); exit != tc.want {
				t.Errorf("exit: got %v, want %v", exit, tc.want)
			}
			// The agent saw EOF before it was stopped.
			if got, want := string(r.stdout.bytes()), "ready\neof\n"; got != want {
				t.Errorf("agent output: got %q, want %q", got, want)
			}
		})
	}
}

// TestAgentExitsFirst checks that Wait returns when the agent exits while
// the editor keeps stdin open, with the editor's unterminated bytes that
// reached the agent framed.
func TestAgentExitsFirst(t *testing.T) {
	const sent = "hello\npart"
	r := start(t, Config{}, "readn", strconv.Itoa(len(sent)), "4")
	if _, err := r.stdin.WriteString(sent); err != nil {
		t.Fatal(err)
	}
	if exit, want := r.wait(t), (Exit{Code: 4}); exit != want {
		t.Errorf("exit: got %v, want %v", exit, want)
	}
	checkFrames(t, "stdin", r.log.get(Stdin), refFrames(Stdin, []byte(sent), defaultMaxLine))

	// The session is over: more input is neither forwarded nor framed.
	if _, err := r.stdin.WriteString("more\n"); err != nil {
		t.Fatal(err)
	}
	r.stdin.Close()
	if exit, want := r.wait(t), (Exit{Code: 4}); exit != want {
		t.Errorf("second Wait: got %v, want %v", exit, want)
	}
}

// TestAgentClosesStdin checks that when writes to the agent's stdin fail
// (EPIPE: it closed it) the editor's input is still read and framed, and
// that the agent is still stopped after the editor's EOF.
func TestAgentClosesStdin(t *testing.T) {
	seed := newSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	first := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}` + "\n")
	r := start(t, Config{Grace: 50 * time.Millisecond}, "closein", strconv.Itoa(len(first)))
	if _, err := r.stdin.Write(first); err != nil {
		t.Fatal(err)
	}
	r.log.waitFor(t, Stdout, "closed")
	// More than a pipe holds: were it not drained, this would block.
	rest := acpPayload(rng, 1<<20)
	if err := writeChunked(r.stdin, rest, rng); err != nil {
		t.Fatalf("editor write: %v", err)
	}
	r.stdin.Close()
	want := Exit{Code: 128 + int(syscall.SIGTERM), Signal: syscall.SIGTERM}
	if exit := r.wait(t); exit != want {
		t.Errorf("exit: got %v, want %v", exit, want)
	}
	all := append(first, rest...)
	checkBytes(t, "stdin reassembled", reassemble(r.log.get(Stdin)), all)
}

// TestEditorGone checks that when writes to the editor fail (EPIPE) the
// agent's output is still drained and framed, so the agent finishes.
func TestEditorGone(t *testing.T) {
	seed := newSeed(t)
	payload := acpPayload(rand.New(rand.NewPCG(seed, 0)), 1<<20)
	file := filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(file, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr.Close()
	defer pw.Close()
	r := start(t, Config{Stdout: pw}, "cat", file, strconv.FormatUint(seed, 10), "stdout")
	if exit := r.wait(t); exit != (Exit{}) {
		t.Errorf("exit: got %v, want %v", exit, Exit{})
	}
	checkBytes(t, "stdout reassembled", reassemble(r.log.get(Stdout)), payload)
	if _, err := pw.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("write to the editor's closed pipe: got %v, want EPIPE", err)
	}
}

// TestEditorGoneOwnStdout runs a Session in a child process whose own
// stdout is a broken pipe: it must not die of SIGPIPE, and must still
// frame everything the agent wrote.
func TestEditorGoneOwnStdout(t *testing.T) {
	seed := newSeed(t)
	payload := acpPayload(rand.New(rand.NewPCG(seed, 0)), 1<<20)
	file := filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(file, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := parentCommand(t, "plain", "cat", file, strconv.FormatUint(seed, 10), "stdout")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr.Close()
	cmd.Stdout = pw
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe() // kept open: no EOF, no stopping the agent
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	startParent(t, cmd)
	err = cmd.Wait()
	pw.Close()
	if err != nil {
		t.Fatalf("parent: %v; stderr:\n%s", err, stderr.String())
	}
	if got, want := strings.TrimSpace(stderr.String()), fmt.Sprintf("framed %d", len(payload)); got != want {
		t.Errorf("parent stderr: got %q, want %q", got, want)
	}
}

// TestGrandchildHoldsOutput checks that Wait returns when the agent has
// exited but a process it left behind keeps its stdout and stderr open.
func TestGrandchildHoldsOutput(t *testing.T) {
	r := start(t, Config{Grace: 50 * time.Millisecond}, "orphan")
	exit := r.wait(t)
	out := string(r.stdout.bytes())
	var pid int
	if _, err := fmt.Sscanf(out, "grandchild %d\n", &pid); err != nil {
		t.Fatalf("agent output %q: %v", out, err)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	if exit != (Exit{}) {
		t.Errorf("exit: got %v, want %v", exit, Exit{})
	}
	checkFrames(t, "stdout", r.log.get(Stdout), refFrames(Stdout, []byte(out), defaultMaxLine))
}

func TestSignal(t *testing.T) {
	r := start(t, Config{}, "linger")
	r.log.waitFor(t, Stdout, "ready")
	if err := r.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	if exit, want := r.wait(t), (Exit{Code: 128 + int(syscall.SIGTERM), Signal: syscall.SIGTERM}); exit != want {
		t.Errorf("exit: got %v, want %v", exit, want)
	}
	if err := r.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after exit: got %v, want %v", err, os.ErrProcessDone)
	}
}

func TestProcessGroup(t *testing.T) {
	r := start(t, Config{}, "linger")
	pgid, err := syscall.Getpgid(r.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if pgid != r.Pid() {
		t.Errorf("agent's process group: got %d, want its pid %d", pgid, r.Pid())
	}
	if own := syscall.Getpgrp(); pgid == own {
		t.Errorf("agent shares this process's group %d", own)
	}
	r.stdin.Close()
}

func TestWaitConcurrent(t *testing.T) {
	r := start(t, Config{}, "exit", "9")
	var wg sync.WaitGroup
	exits := make([]Exit, 4)
	for i := range exits {
		wg.Go(func() { exits[i] = r.wait(t) })
	}
	wg.Wait()
	for i, exit := range exits {
		if want := (Exit{Code: 9}); exit != want {
			t.Errorf("Wait %d: got %v, want %v", i, exit, want)
		}
	}
}

func TestDir(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(dir, "agent")); err != nil {
		t.Fatal(err)
	}
	out := newCollector(t)
	s, err := Start(Config{Argv: []string{"./agent", "pwd"}, Dir: dir, Env: helperEnviron(), Stdin: strings.NewReader(""), Stdout: out.w})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if exit, err := s.Wait(); err != nil || exit != (Exit{}) {
		t.Fatalf("Wait: got %v, %v; want %v, nil", exit, err, Exit{})
	}
	want, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out.bytes())); got != want {
		t.Errorf("agent's working directory: got %q, want %q", got, want)
	}
}

func TestEnvDefault(t *testing.T) {
	t.Setenv(helperEnv, "1")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	value := fmt.Sprintf("probe-%d", rand.Uint64())
	t.Setenv("STDIOTAP_TEST_PROBE", value)
	out := newCollector(t)
	s, err := Start(Config{Argv: helperArgv(t, "getenv", "STDIOTAP_TEST_PROBE"), Stdin: strings.NewReader(""), Stdout: out.w})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out.bytes())); got != value {
		t.Errorf("agent's STDIOTAP_TEST_PROBE: got %q, want %q", got, value)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		cfg      Config
		is       error  // wanted in the chain
		mentions string // wanted in the message
	}{
		{"no command", Config{}, ErrNoCommand, ""},
		{"empty argv", Config{Argv: []string{}}, ErrNoCommand, ""},
		{"not in PATH", Config{Argv: []string{"acptap-no-such-agent", "--acp"}}, ErrNotFound, "acptap-no-such-agent"},
		{"relative to Dir", Config{Argv: []string{"./missing-agent"}, Dir: dir}, ErrNotFound, "missing-agent"},
		{"absolute", Config{Argv: []string{filepath.Join(dir, "gone")}}, ErrNotFound, "gone"},
		{"not executable", Config{Argv: []string{"./plain-file"}, Dir: dir}, ErrNotFound, "plain-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, "plain-file"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Start(tc.cfg)
			if err == nil {
				s.Wait()
				t.Fatalf("Start: got no error, want %v", tc.is)
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("got %v, want an error wrapping %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.mentions) {
				t.Errorf("got %q, want it to name %q", err, tc.mentions)
			}
		})
	}

	t.Run("missing Dir", func(t *testing.T) {
		argv := helperArgv(t, "exit", "0")
		s, err := Start(Config{Argv: argv, Dir: filepath.Join(dir, "nonexistent")})
		if err == nil {
			s.Wait()
			t.Fatal("Start: got no error")
		}
		if errors.Is(err, ErrNotFound) {
			t.Errorf("got %v, want an error not wrapping ErrNotFound: the command exists", err)
		}
		if !strings.Contains(err.Error(), argv[0]) {
			t.Errorf("got %q, want it to name %q", err, argv[0])
		}
	})
}

func TestStreamString(t *testing.T) {
	for st, want := range map[Stream]string{Stdin: "stdin", Stdout: "stdout", Stderr: "stderr", 7: "stream(7)"} {
		if got := st.String(); got != want {
			t.Errorf("Stream(%d).String() = %q, want %q", st, got, want)
		}
	}
}

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && len(stat) > i+2 && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// TestSessionEndsGroup checks that what the agent left running in its
// process group ends with the session: SIGTERM, then SIGKILL for a
// process that ignores it.
func TestSessionEndsGroup(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the agent's group is ended at its exit only on Linux")
	}
	for _, mode := range []string{"plain", "stubborn"} {
		t.Run(mode, func(t *testing.T) {
			r := start(t, Config{Grace: 100 * time.Millisecond}, "background", mode)
			r.wait(t)
			var pid int
			if _, err := fmt.Sscanf(string(r.stdout.bytes()), "background %d\n", &pid); err != nil {
				t.Fatalf("agent output %q: %v", r.stdout.bytes(), err)
			}
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			// The group is ended before Wait returns; a killed process
			// may take a moment to be reaped by its new parent.
			deadline := time.Now().Add(10 * time.Second)
			for alive(pid) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if alive(pid) {
				t.Errorf("the agent's background process %d outlived the session", pid)
			}
		})
	}
}

// TestThen: a Then called once a line has gone both ways (the editor
// has read the agent's echo, so both reads returned) calls back after
// OnLine has had both lines, from the framing goroutine, in Stamp order
// with them; once the session is over, at once. The Lines' Stamps grow in
// the order OnLine gets them, across the streams.
func TestThen(t *testing.T) {
	out, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	defer outW.Close()
	r := start(t, Config{Stdout: outW}, "echo", "1")
	echoed := bufio.NewReader(out)
	type seen struct{ stdin, stdout int }
	called := make(chan seen, 1)
	const n = 20
	for i := range n {
		line := fmt.Sprintf("line %d", i)
		if _, err := io.WriteString(r.stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if got, err := echoed.ReadString('\n'); err != nil || got != line+"\n" {
			t.Fatalf("echo %d: %q, %v", i, got, err)
		}
		r.Then(func() { called <- seen{len(r.log.get(Stdin)), len(r.log.get(Stdout))} })
		if got := <-called; got.stdin != i+1 || got.stdout != i+1 {
			t.Fatalf("Then after line %d went both ways: OnLine had %d stdin and %d stdout lines, want %d of each", i, got.stdin, got.stdout, i+1)
		}
	}
	r.stdin.Close()
	if _, err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	done := false
	r.Then(func() { done = true })
	if !done {
		t.Error("Then after Wait did not call back at once")
	}
	in, outLines := r.log.get(Stdin), r.log.get(Stdout)
	for i := range n {
		if in[i].Stamp >= outLines[i].Stamp {
			t.Errorf("line %d: stdin's Stamp %#x, stdout's echo %#x: want the echo later", i, in[i].Stamp, outLines[i].Stamp)
		}
		if i > 0 && (in[i].Stamp <= outLines[i-1].Stamp || !in[i].At.After(outLines[i-1].At)) {
			t.Errorf("line %d: stdin's Stamp %#x (%v), the echo before it %#x (%v): want it later", i, in[i].Stamp, in[i].At, outLines[i-1].Stamp, outLines[i-1].At)
		}
	}
}

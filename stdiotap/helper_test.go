package stdiotap

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// helperEnv, when set, makes the test binary act as a helper process
// (an agent, or a parent running a Session) instead of running tests.
const helperEnv = "STDIOTAP_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// helperArgv returns the command line that runs the test binary as a
// helper with args.
func helperArgv(t testing.TB, args ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe}, args...)
}

// helperEnviron returns the environment of a helper process. Under the
// race detector a process exiting with status 0 sleeps a second first,
// unless told not to.
func helperEnviron() []string {
	return append(os.Environ(), helperEnv+"=1", "GORACE=atexit_sleep_ms=0")
}

// helperMain runs the helper mode args[0] and returns its exit status.
func helperMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "helper: no mode")
		return 2
	}
	mode, args := args[0], args[1:]
	argInt := func(i int) int {
		n, err := strconv.Atoi(args[i])
		if err != nil {
			fmt.Fprintf(os.Stderr, "helper %s: %v\n", mode, err)
			os.Exit(2)
		}
		return n
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", mode, err)
		return 2
	}
	switch mode {
	case "echo": // echo SEED: copy stdin to stdout in random writes
		rng := rand.New(rand.NewPCG(uint64(argInt(0)), 1))
		if err := copyChunked(os.Stdout, os.Stdin, rng); err != nil {
			return fail(err)
		}
		return 0

	case "cat": // cat FILE SEED stdout|stderr: write FILE in random writes
		data, err := os.ReadFile(args[0])
		if err != nil {
			return fail(err)
		}
		dst := os.Stdout
		if args[2] == "stderr" {
			dst = os.Stderr
		}
		if err := writeChunked(dst, data, rand.New(rand.NewPCG(uint64(argInt(1)), 2))); err != nil {
			return fail(err)
		}
		return 0

	case "exit": // exit N
		return argInt(0)

	case "kill": // kill SIGNUM: kill itself
		// Not any signal: the Go runtime ignores some, like SIGUSR1.
		syscall.Kill(os.Getpid(), syscall.Signal(argInt(0)))
		sleepForever()

	case "linger", "stubborn": // say ready, read stdin to EOF, say eof, never exit
		if mode == "stubborn" {
			signal.Ignore(syscall.SIGTERM)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		fmt.Println("eof")
		sleepForever()

	case "readn": // readn N CODE: read N bytes of stdin, exit CODE
		if _, err := io.ReadFull(os.Stdin, make([]byte, argInt(0))); err != nil {
			return fail(err)
		}
		return argInt(1)

	case "closein": // closein N: read N bytes, close stdin, say closed, never exit
		if _, err := io.ReadFull(os.Stdin, make([]byte, argInt(0))); err != nil {
			return fail(err)
		}
		os.Stdin.Close()
		fmt.Println("closed")
		sleepForever()

	case "trap": // trap CODE: say ready, report the first signal, exit CODE
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		fmt.Println("ready")
		sig := <-c
		fmt.Printf("got %s\n", SignalName(sig.(syscall.Signal)))
		return argInt(0)

	case "fifo": // fifo PATH: hold PATH open for writing, never exit
		f, err := os.OpenFile(args[0], os.O_WRONLY, 0)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		fmt.Println("ready")
		sleepForever()

	case "sleeper": // never exit
		sleepForever()

	case "ready-sleeper": // say ready, never exit
		fmt.Println("ready")
		sleepForever()

	case "orphan": // start a sleeper sharing stdout and stderr, print its pid, exit
		cmd := exec.Command(os.Args[0], "sleeper")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return fail(err)
		}
		fmt.Printf("grandchild %d\n", cmd.Process.Pid)
		return 0

	case "background": // background plain|stubborn: start a sleeper in the agent's group, detached from its stdio, print its pid, exit
		mode := "ready-sleeper"
		if len(args) > 0 && args[0] == "stubborn" {
			mode = "stubborn-sleeper"
		}
		cmd := exec.Command(os.Args[0], mode)
		out, err := cmd.StdoutPipe()
		if err != nil {
			return fail(err)
		}
		if err := cmd.Start(); err != nil {
			return fail(err)
		}
		// Exit only once the sleeper is ready (its signals set up).
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			return fail(err)
		}
		fmt.Printf("background %d\n", cmd.Process.Pid)
		return 0

	case "stubborn-sleeper": // ignore SIGTERM, say ready, never exit
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		sleepForever()

	case "pwd":
		wd, err := os.Getwd()
		if err != nil {
			return fail(err)
		}
		fmt.Println(wd)
		return 0

	case "getenv": // getenv NAME
		fmt.Println(os.Getenv(args[0]))
		return 0

	case "parent": // parent forward|plain AGENT-ARGS...: run a Session with default stdio
		return parentMain(args[0] == "forward", args[1:])
	}
	return fail(fmt.Errorf("unknown mode"))
}

// parentMain runs the test binary as an agent with args in a Session on
// this process's own stdio, reports on stderr how many bytes of stdout
// it framed, and exits with the agent's status.
func parentMain(forward bool, args []string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var framed atomic.Int64
	s, err := Start(Config{
		Argv:           append([]string{exe}, args...),
		ForwardSignals: forward,
		OnLine: func(l Line) {
			if l.Stream == Stdout {
				n := len(l.Data)
				if !l.NoNewline && !l.Continued {
					n++
				}
				framed.Add(int64(n))
			}
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	exit, err := s.Wait()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Fprintf(os.Stderr, "framed %d\n", framed.Load())
	return exit.Code
}

func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// writeChunked writes data to w in writes of random sizes: a few bytes,
// a few KiB, or whatever is left.
func writeChunked(w io.Writer, data []byte, rng *rand.Rand) error {
	for len(data) > 0 {
		var n int
		switch rng.IntN(3) {
		case 0:
			n = 1 + rng.IntN(16)
		case 1:
			n = 1 + rng.IntN(8<<10)
		default:
			n = 1 + rng.IntN(len(data))
		}
		n = min(n, len(data))
		if _, err := w.Write(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// copyChunked copies r to w, writing what each read returns with
// writeChunked.
func copyChunked(w io.Writer, r io.Reader, rng *rand.Rand) error {
	buf := make([]byte, 128<<10)
	for {
		n, err := r.Read(buf)
		if werr := writeChunked(w, buf[:n], rng); werr != nil {
			return werr
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The benchmarks below compare, in one run, a bare pipe to an agent with
// the same agent behind `acptap record`, behind a relay that only copies
// both ways in a process of its own (the fair anchor: the least a process
// in acptap's place costs, in Go as relay and, when a C compiler is
// installed, in C as relay-c), and behind a Python line tee that appends
// every line of both directions to a file (a recorder that frames lines;
// skipped without python3). The agent is cat(1): it echoes each line, so
// every byte crosses acptap twice (editor→agent, agent→editor) and is
// recorded twice. scripts/bench prints the ratios.

// stdioPaths are the ways to the echo agent, in the order they run.
var stdioPaths = []string{"pipe", "acptap", "relay", "relay-c", "python-tee"}

// inRoundOrder returns paths rotated by the round that $ACPTAP_BENCH_ROUND
// names (scripts/bench sets it; 1 or unset leaves them as they are), so
// that over the rounds every path runs as often in each place of a round.
// In a fixed order one path would always run first, right after the
// machine was idle, and another always last, right after the others'
// processes ended: a difference of place that the round-by-round
// comparison with the anchor would take for one of code.
func inRoundOrder(paths []string) []string {
	round, err := strconv.Atoi(os.Getenv("ACPTAP_BENCH_ROUND"))
	if err != nil || round < 1 {
		return paths
	}
	k := (round - 1) % len(paths)
	return append(slices.Clone(paths[k:]), paths[:k]...)
}

// relayMain is the "relay" command of the test binary: it runs its
// arguments as a child and copies its stdin to the child's and the
// child's stdout to its own, as acptap's forwarding does, recording
// nothing.
func relayMain() {
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	var out io.ReadCloser
	if err == nil {
		out, err = cmd.StdoutPipe()
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
	go func() {
		io.Copy(in, os.Stdin)
		in.Close()
	}()
	io.Copy(os.Stdout, out)
	if err := cmd.Wait(); err != nil {
		os.Exit(1)
	}
}

// cRelay compiles testdata/bench/relay.c into a temporary directory of b
// and returns the program; the error says why it cannot (no C compiler).
func cRelay(b *testing.B) (string, error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(b.TempDir(), "relay")
	if out, err := exec.Command(cc, "-O2", "-pthread", "-o", bin, filepath.Join("testdata", "bench", "relay.c")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v: %s", err, out)
	}
	return bin, nil
}

// pythonTee runs its arguments as a child and copies its stdin to the
// child's and the child's stdout to its own, a line at a time, appending
// each line to the file $TEE_FILE first.
const pythonTee = `
import os, subprocess, sys, threading
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
log = open(os.environ["TEE_FILE"], "ab", buffering=0)
lock = threading.Lock()
def copy(src, dst, tag):
    for line in iter(src.readline, b""):
        with lock:
            log.write(tag + line)
        dst.write(line)
        dst.flush()
    dst.close()
up = threading.Thread(target=copy, args=(sys.stdin.buffer, child.stdin, b">"))
up.start()
copy(child.stdout, sys.stdout.buffer, b"<")
up.join()
sys.exit(child.wait())
`

// stdioTarget starts the echo agent by path.
func stdioTarget(b *testing.B, path string) *stdioChild {
	b.Helper()
	var cmd *exec.Cmd
	switch path {
	case "acptap":
		db := filepath.Join(b.TempDir(), "bench.db")
		cmd = exec.Command("acptap", "record", "--store", db, "--name", "bench", "--grace", "5s", "--", "cat")
	case "relay":
		cmd = exec.Command("relay", "cat")
	case "relay-c":
		bin, err := cRelay(b)
		if err != nil {
			b.Skipf("relay-c: %v", err)
		}
		cmd = exec.Command(bin, "cat")
	case "python-tee":
		python, err := exec.LookPath("python3")
		if err != nil {
			b.Skip("python-tee: python3 is not installed")
		}
		cmd = exec.Command(python, "-c", pythonTee, "cat")
		cmd.Env = append(os.Environ(), "TEE_FILE="+filepath.Join(b.TempDir(), "tee.log"))
	default:
		cmd = exec.Command("cat")
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return &stdioChild{b: b, cmd: cmd, stdin: stdin, stdout: bufio.NewReaderSize(stdout, 64<<10), raw: stdout}
}

// stdioChild is the process of a stdio path: the echo agent, or what runs
// it.
type stdioChild struct {
	b        *testing.B
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stdout   *bufio.Reader
	raw      io.Reader
	startCPU time.Duration // the process's CPU time when the timing started
}

// start notes the CPU time the process and its children (acptap's tap
// process) have taken so far, their start-up,
// to leave out of cpu-ns/op; without /proc it notes nothing, and the
// start-up counts.
func (c *stdioChild) start() {
	start, _ := treeCPU(c.cmd.Process.Pid)
	c.startCPU = start.total
}

// stop closes the process's stdin, reads its stdout to the end and waits
// for it, and reports the CPU time it and the children it waited for (the
// echo agent) took since start, per op, as cpu-ns/op: what the path costs
// in CPU, the recording of what fell behind included.
func (c *stdioChild) stop() {
	c.stdin.Close()
	io.Copy(io.Discard, c.raw)
	if err := c.cmd.Wait(); err != nil {
		c.b.Errorf("%v: %v", c.cmd.Args, err)
		return
	}
	if ru, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && c.b.N > 0 {
		total := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		c.b.ReportMetric(float64(total-c.startCPU)/float64(c.b.N), "cpu-ns/op")
	}
}

func benchmarkThroughput(b *testing.B, path string) {
	line := append(bytes.Repeat([]byte("x"), 1023), '\n')
	child := stdioTarget(b, path)
	stdin, stdout := child.stdin, child.stdout
	var start time.Time
	defer func() {
		// MB/s is what was forwarded; recorded-MB/s counts until the
		// process has exited, having recorded what fell behind.
		child.stop()
		b.ReportMetric(float64(b.N*len(line))/time.Since(start).Seconds()/1e6, "recorded-MB/s")
	}()
	b.SetBytes(int64(len(line)))
	child.start()
	b.ResetTimer()
	start = time.Now()
	errc := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(stdin, 64<<10)
		for range b.N {
			if _, err := w.Write(line); err != nil {
				errc <- err
				return
			}
		}
		errc <- w.Flush()
	}()
	buf := make([]byte, 64<<10)
	for remaining := b.N * len(line); remaining > 0; {
		n, err := stdout.Read(buf[:min(len(buf), remaining)])
		if err != nil {
			b.Fatal(err)
		}
		remaining -= n
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}

// BenchmarkStdioThroughput moves 1 KiB lines through the echo agent.
func BenchmarkStdioThroughput(b *testing.B) {
	for _, path := range inRoundOrder(stdioPaths) {
		b.Run(path, func(b *testing.B) { benchmarkThroughput(b, path) })
	}
}

func benchmarkPingPong(b *testing.B, path string) {
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"sess_0123456789","prompt":[{"type":"text","text":"hello"}]}}` + "\n")
	child := stdioTarget(b, path)
	stdin, stdout := child.stdin, child.stdout
	defer child.stop()
	rtts := make([]time.Duration, 0, b.N)
	child.start()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := stdin.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := stdout.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
		rtts = append(rtts, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(rtts)
	b.ReportMetric(float64(rtts[len(rtts)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(rtts[len(rtts)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkStdioPingPong measures the round trip of one request line and
// its echo, one at a time.
func BenchmarkStdioPingPong(b *testing.B) {
	for _, path := range inRoundOrder(stdioPaths) {
		b.Run(path, func(b *testing.B) { benchmarkPingPong(b, path) })
	}
}

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/proxy"
)

// The benchmarks below put acptap's LLM tap side by side with its peers,
// each in a process of its own as acptap is: the client and the upstream
// are the benchmark's, the path between them is a child process. The
// paths are: direct (no process between), acptap (acptap record's
// base-URL route, in its tap process, recording into a store in acptap
// record's), tap-unrecorded (the same tap,
// proxy.Tap with a base-URL route, in a process that records nothing: what
// forwarding costs apart from recording), reverseproxy (Go's
// httputil.ReverseProxy flushing at once, in a child process: the fair
// anchor, the least a Go proxy in acptap's layout costs), and, when
// mitmdump is installed, mitmproxy in reverse mode, streaming bodies
// (mitmproxy-stream) and by default, buffering them (mitmproxy).
// scripts/bench runs them, -count rounds interleaving the paths, and
// prints medians and ratios against direct.

// tapPaths are the paths of the tap benchmarks, in the order they run.
var tapPaths = []string{"direct", "acptap", "tap-unrecorded", "reverseproxy", "mitmproxy-stream", "mitmproxy"}

// reverseProxyMain is the "reverseproxy" command of the test binary: an
// httputil.ReverseProxy to $UPSTREAM on a loopback port, whose URL it
// prints, serving until its stdin closes.
func reverseProxyMain() {
	u, err := url.Parse(os.Getenv("UPSTREAM"))
	if err != nil || u.Host == "" {
		fmt.Fprintf(os.Stderr, "reverseproxy: UPSTREAM=%q: want an http URL\n", os.Getenv("UPSTREAM"))
		os.Exit(2)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		FlushInterval: -1,
		Transport:     &http.Transport{MaxIdleConns: 100, MaxIdleConnsPerHost: 64, DisableCompression: true},
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "reverseproxy:", err)
		os.Exit(1)
	}
	fmt.Printf("http://%s\n", l.Addr())
	stop := childProfile() // the anchor's profile, beside acptap's
	go http.Serve(l, rp)
	io.Copy(io.Discard, os.Stdin)
	stop()
}

// tapUnrecordedMain is the "tapunrecorded" command of the test binary:
// acptap's tap with a base-URL route to $UPSTREAM and no Recorder, whose
// URL it prints, serving until its stdin closes.
func tapUnrecordedMain() {
	tap, err := proxy.New(proxy.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "tapunrecorded:", err)
		os.Exit(1)
	}
	u, err := tap.AddBaseURL("OPENAI_BASE_URL", os.Getenv("UPSTREAM"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tapunrecorded:", err)
		os.Exit(2)
	}
	fmt.Println(u)
	stop := childProfile()
	io.Copy(io.Discard, os.Stdin)
	stop()
	if err := tap.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "tapunrecorded:", err)
		os.Exit(1)
	}
}

// urlAgentMain is the "urlagent" command of the test binary, an agent for
// acptap record that prints the base URL it was given and waits for its
// stdin to close.
func urlAgentMain() {
	fmt.Println(os.Getenv("OPENAI_BASE_URL"))
	io.Copy(io.Discard, os.Stdin)
}

// startPath starts the process of path between the benchmark and
// upstream and returns the URL that reaches upstream through it and the
// process's PID (0 for direct); ok is false when the path cannot run here
// (mitmdump not installed).
func startPath(b *testing.B, path, upstream string) (u string, pid int, ok bool) {
	b.Helper()
	var cmd *exec.Cmd
	switch path {
	case "direct":
		return upstream, 0, true
	case "acptap":
		db := filepath.Join(b.TempDir(), "bench.db")
		cmd = exec.Command("acptap", "record", "--store", db, "--name", "bench", "--no-proxy-env",
			"--base-url", "OPENAI_BASE_URL="+upstream, "--", "urlagent")
	case "tap-unrecorded":
		cmd = exec.Command("tapunrecorded")
		cmd.Env = append(os.Environ(), "UPSTREAM="+upstream)
	case "reverseproxy":
		cmd = exec.Command("reverseproxy")
		cmd.Env = append(os.Environ(), "UPSTREAM="+upstream)
	case "mitmproxy-stream", "mitmproxy":
		mitm, err := exec.LookPath("mitmdump")
		if err != nil {
			return "", 0, false
		}
		port := freePort(b)
		args := []string{"--mode", "reverse:" + upstream, "--listen-host", "127.0.0.1", "--listen-port", port, "-q"}
		if path == "mitmproxy-stream" {
			args = append(args, "--set", "stream_large_bodies=1")
		}
		cmd = exec.Command(mitm, args...)
		cmd.Env = append(os.Environ(), "HOME="+b.TempDir())
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		u = "http://127.0.0.1:" + port
		waitListening(b, "127.0.0.1:"+port)
		return u, cmd.Process.Pid, true
	default:
		b.Fatalf("unknown path %q", path)
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
	b.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("%s: %v", path, err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("%s: reading its URL: %v", path, err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid, true
}

// reportCPU starts measuring the CPU time that process pid and its
// descendants take (acptap record's tap process among them), and returns
// what reports it per op, as cpu-ns/op: the cost of the path on a machine
// whose CPUs are wanted by others, which unlike its latency hardly depends
// on how idle the CPUs are. Of acptap record it also reports the tap
// process's share, as tap-cpu-ns/op: what forwarding costs, apart from
// recording. It is the time on CPU of every thread (/proc/PID/task/*/schedstat),
// so it needs Linux; threads that end meanwhile take theirs with them,
// which Go's rarely do. A pid of 0 (the direct path) reports nothing.
func reportCPU(b *testing.B, pid int) (report func()) {
	if pid == 0 {
		return func() {}
	}
	start, err := treeCPU(pid)
	if err != nil {
		b.Logf("not measuring the CPU of process %d: %v", pid, err)
		return func() {}
	}
	return func() {
		end, err := treeCPU(pid)
		if err != nil {
			b.Logf("not measuring the CPU of process %d: %v", pid, err)
			return
		}
		b.ReportMetric(float64(end.total-start.total)/float64(b.N), "cpu-ns/op")
		if end.tapPID != 0 && end.tapPID == start.tapPID {
			b.ReportMetric(float64(end.tap-start.tap)/float64(b.N), "tap-cpu-ns/op")
		}
	}
}

// cpuOfTree is the CPU time of a process and its descendants.
type cpuOfTree struct {
	total  time.Duration
	tapPID int           // of the tap process among them (tapProcessCommand), or 0
	tap    time.Duration // its share of total
}

// treeCPU returns the time that the live threads of process pid and of its
// descendants have spent on a CPU.
func treeCPU(pid int) (cpuOfTree, error) {
	var c cpuOfTree
	pids := append([]int{pid}, descendants(pid)...)
	for i, p := range pids {
		t, err := processCPU(p)
		if err != nil {
			if i == 0 {
				return c, err
			}
			continue // it ended
		}
		c.total += t
		if isTapProcess(p) {
			c.tapPID, c.tap = p, t
		}
	}
	return c, nil
}

// tapProcessOf returns the pid of the tap process of acptap record pid,
// or 0 if it has none (yet).
func tapProcessOf(pid int) int {
	for _, p := range descendants(pid) {
		if isTapProcess(p) {
			return p
		}
	}
	return 0
}

// isTapProcess reports whether process pid is an acptap record's tap
// process, by its command line.
func isTapProcess(pid int) bool {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return bytes.HasSuffix(cmdline, []byte("\x00"+tapProcessCommand+"\x00"))
}

// descendants returns the processes below pid, by the parents that
// /proc/*/stat names.
func descendants(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := map[int][]int{}
	for _, name := range stats {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		var p, ppid int
		var state string
		if _, err := fmt.Sscan(string(data), &p); err != nil {
			continue
		}
		if _, err := fmt.Sscan(string(data[i+1:]), &state, &ppid); err != nil {
			continue
		}
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// processCPU returns the time that the live threads of process pid have
// spent on a CPU.
func processCPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no /proc/%d/task/*/schedstat", pid)
	}
	var total time.Duration
	for _, name := range tasks {
		data, err := os.ReadFile(name)
		if err != nil {
			continue // the thread ended
		}
		var ns int64
		if _, err := fmt.Sscan(string(data), &ns); err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// freePort returns a loopback port nothing listens on, for a program that
// wants one named.
func freePort(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// waitListening waits for a program to listen on addr.
func waitListening(b *testing.B, addr string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("nothing listens on %s after 30s", addr)
}

// BenchmarkTapSSE measures an SSE stream's time to first event and its
// per-event latency through each path, by round trip (testkit.SSEBench).
// One op is one event. A buffering path (mitmproxy by default) holds the
// stream until it ends: it gets timed streams, and only its time to
// first event is reported.
func BenchmarkTapSSE(b *testing.B) {
	upstream := testkit.NewSSEBench()
	defer upstream.Close()
	for _, path := range inRoundOrder(tapPaths) {
		b.Run(path, func(b *testing.B) {
			base, pid, ok := startPath(b, path, upstream.URL)
			if !ok {
				b.Skipf("%s: mitmdump is not installed", path)
			}
			report := reportCPU(b, pid)
			upstream.Measure(b, benchHTTPClient(b), base+"/v1/chat/completions", path == "mitmproxy")
			report()
		})
	}
}

// BenchmarkTapRequests measures 1 KiB JSON POSTs answered with 1 KiB, 32
// at a time, through each path.
func BenchmarkTapRequests(b *testing.B) {
	reqBody := []byte(`{"model":"gpt-5-mini","messages":[{"role":"user","content":"` + strings.Repeat("x", 960) + `"}]}`)
	respBody := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("y", 900) + `"},"finish_reason":"stop"}]}`)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(respBody)))
		w.Write(respBody)
	}))
	defer upstream.Close()
	for _, path := range inRoundOrder(tapPaths) {
		b.Run(path, func(b *testing.B) {
			base, pid, ok := startPath(b, path, upstream.URL)
			if !ok {
				b.Skipf("%s: mitmdump is not installed", path)
			}
			report := reportCPU(b, pid)
			defer report()
			testkit.PostParallel(b, benchHTTPClient(b), base+"/v1/chat/completions", reqBody, len(respBody))
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// benchHTTPClient is a keep-alive client with room for concurrent
// requests.
func benchHTTPClient(b *testing.B) *http.Client {
	tr := &http.Transport{MaxIdleConns: 100, MaxIdleConnsPerHost: 64, DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// childProfile starts a CPU profile of the process, as
// $ACPTAP_CHILD_PROFILE/PID.cpu, when that variable names a directory, and
// with ACPTAP_CHILD_TRACE=1 an execution trace as PID.trace instead (a
// trace slows the process down, so the two are not taken together), so
// that the tap in an acptap record child of the benchmarks can be profiled
// where it runs, and the reverseproxy anchor beside it. It returns what
// stops them, to call before the process exits.
func childProfile() (stop func()) {
	dir := os.Getenv("ACPTAP_CHILD_PROFILE")
	if dir == "" {
		return func() {}
	}
	tracing := os.Getenv("ACPTAP_CHILD_TRACE") == "1"
	name := filepath.Join(dir, fmt.Sprint(os.Getpid(), ".cpu"))
	if tracing {
		name = filepath.Join(dir, fmt.Sprint(os.Getpid(), ".trace"))
	}
	f, err := os.Create(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return func() {}
	}
	if tracing {
		err = trace.Start(f)
	} else {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		f.Close()
		return func() {}
	}
	return func() {
		if tracing {
			trace.Stop()
		} else {
			pprof.StopCPUProfile()
		}
		f.Close()
	}
}

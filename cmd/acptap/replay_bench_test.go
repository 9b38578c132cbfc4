package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The replay benchmarks replay long LLM sessions: the test agent in LLM
// mode, driven by the scripted editor through a number of prompts, each
// answered by a fake Chat Completions upstream in benchChunks streamed
// deltas. A turn is then about 10 ACP frames (the prompt, a chunk per
// delta, the response) and one LLM exchange: for 1,000 prompts, some
// 10,000 frames and 1,000 exchanges. As in a real session, each request
// carries the whole conversation so far.
const (
	benchPrompts = 1000
	benchChunks  = 8
)

// benchSession is the recording a replay benchmark replays, and what it
// takes to run the same session live.
type benchSession struct {
	dir       string // the workspace, which holds the store
	db        string
	upstream  string // the fake upstream's base URL, ".../v1"
	prompts   []string
	frames    int
	exchanges int
}

// newReplayBenchSession records a session of n prompts into a new
// directory, s.dir, which the caller removes.
func newReplayBenchSession(n int) (*benchSession, error) {
	dir, err := os.MkdirTemp("", "acptap-bench-replay-")
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(streamingChat(benchChunks))
	s := &benchSession{dir: dir, db: filepath.Join(dir, "bench.db"), upstream: srv.URL + "/v1"}
	for i := range n {
		s.prompts = append(s.prompts, fmt.Sprintf("question %d: what changed in step %d of the build?", i+1, i+1))
	}
	record := []string{"acptap", "record", "--store", s.db, "--name", "long",
		"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + s.upstream, "--", "testagent"}
	if _, err := s.edit(record); err != nil {
		return nil, fmt.Errorf("recording the session: %w", err)
	}
	out, err := exec.Command("acptap", "show", "--store", s.db, "--json").Output()
	if err != nil {
		return nil, fmt.Errorf("show --json: %w", err)
	}
	var rec recordingJSON
	if err := json.Unmarshal(bytes.TrimSpace(out), &rec); err != nil {
		return nil, fmt.Errorf("show --json: %w", err)
	}
	s.frames, s.exchanges = rec.Frames, rec.Exchanges
	if rec.Exchanges != n {
		return nil, fmt.Errorf("the recording has %d LLM exchanges, want %d", rec.Exchanges, n)
	}
	return s, nil
}

// edit runs the scripted editor through the session's prompts against
// agent in the session's workspace, and returns the CPU time (user and
// system) of the editor and the agent.
func (s *benchSession) edit(agent []string) (time.Duration, error) {
	args := []string{"--timeout", "0"}
	for _, p := range s.prompts {
		args = append(args, "--prompt", p)
	}
	cmd := exec.Command("testeditor", append(append(args, "--"), agent...)...)
	cmd.Dir = s.dir
	cmd.Env = agentEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%v\n%s", err, stderr.Bytes())
	}
	return cpuTime(cmd.ProcessState), nil
}

// cpuTime returns the user and system time of a process that exited, with
// that of the children it waited for (wait4 reports both).
func cpuTime(ps *os.ProcessState) time.Duration { return ps.UserTime() + ps.SystemTime() }

// streamingChat is a fake OpenAI Chat Completions upstream that answers
// every request with a stream of n content deltas, each flushed on its
// own, then the finish reason, the usage and [DONE].
func streamingChat(n int) http.Handler {
	var body bytes.Buffer
	event := func(choices, usage string) {
		fmt.Fprintf(&body, `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1782321902,"model":"test-model","choices":[%s],"usage":%s}`+"\n\n", choices, usage)
	}
	var events [][]byte
	for i := range n {
		event(fmt.Sprintf(`{"index":0,"delta":{"content":"part %d of the answer. "},"finish_reason":null}`, i+1), "null")
		events = append(events, bytes.Clone(body.Bytes()))
		body.Reset()
	}
	event(`{"index":0,"delta":{},"finish_reason":"stop"}`, "null")
	event("", `{"prompt_tokens":20,"completion_tokens":40,"total_tokens":60}`)
	body.WriteString("data: [DONE]\n\n")
	events = append(events, bytes.Clone(body.Bytes()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f, _ := w.(http.Flusher)
		for _, e := range events {
			w.Write(e)
			if f != nil {
				f.Flush()
			}
		}
	})
}

// BenchmarkReplay1000Exchanges measures, per op, a whole session of 1,000
// prompts:
//
//   - live: the scripted editor and the agent against the fake upstream,
//     without acptap: the agent's own time;
//   - replay: acptap replay of the recorded session, which must pass;
//   - replay-requests-ignore: the same without comparing each LLM request
//     with its recorded twin (--requests ignore).
//
// The replays report overhead-ns/exchange, (replay − live) / 1,000, and
// overhead-cpu-ns/exchange, the same of the CPU time (user and system) of
// acptap and the agent against that of the editor and the agent, which a
// busy machine changes less. The recording is made once per run of the
// benchmark, outside the timings, and removed after it.
func BenchmarkReplay1000Exchanges(b *testing.B) { benchmarkReplaySession(b, benchPrompts) }

// BenchmarkReplaySessions is BenchmarkReplay1000Exchanges for sessions of
// 10, 100 and 1,000 prompts: the overhead per exchange of replay is flat
// when what it costs grows linearly with the session.
func BenchmarkReplaySessions(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("exchanges=%d", n), func(b *testing.B) { benchmarkReplaySession(b, n) })
	}
}

// sessionTimes are one live session's wall and CPU time, from the live
// sub-benchmark, for the replays' overhead per exchange.
type sessionTimes struct{ wall, cpu float64 }

func benchmarkReplaySession(b *testing.B, n int) {
	s, err := newReplayBenchSession(n)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(s.dir) })
	b.Logf("recording: %d frames, %d LLM exchanges", s.frames, s.exchanges)
	var live sessionTimes
	b.Run("live", func(b *testing.B) {
		var cpu time.Duration
		for b.Loop() {
			c, err := s.edit([]string{"testagent", "--llm", s.upstream})
			if err != nil {
				b.Fatalf("live session: %v", err)
			}
			cpu += c
		}
		live = sessionTimes{float64(b.Elapsed().Nanoseconds()) / float64(b.N), float64(cpu.Nanoseconds()) / float64(b.N)}
		b.ReportMetric(live.cpu, "cpu-ns/op")
	})
	b.Run("replay", func(b *testing.B) { benchmarkReplay(b, s, live) })
	b.Run("replay-requests-ignore", func(b *testing.B) { benchmarkReplay(b, s, live, "--requests", "ignore") })
}

// benchmarkReplay replays the session with acptap replay and flags.
func benchmarkReplay(b *testing.B, s *benchSession, live sessionTimes, flags ...string) {
	args := append(append([]string{"replay", "--store", s.db}, flags...), "long")
	dir := b.TempDir()
	var cpu time.Duration
	for b.Loop() {
		cmd := exec.Command("acptap", args...)
		cmd.Dir = dir
		cmd.Env = agentEnv()
		if out, err := cmd.CombinedOutput(); err != nil || !bytes.HasPrefix(out, []byte("PASS long")) {
			b.Fatalf("acptap %v: %v\n%.2000s", args, err, out)
		}
		cpu += cpuTime(cmd.ProcessState)
	}
	replayCPU := float64(cpu.Nanoseconds()) / float64(b.N)
	b.ReportMetric(replayCPU, "cpu-ns/op")
	if live.wall > 0 {
		replayNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric((replayNs-live.wall)/float64(s.exchanges), "overhead-ns/exchange")
		b.ReportMetric((replayCPU-live.cpu)/float64(s.exchanges), "overhead-cpu-ns/exchange")
	}
}

// BenchmarkReplayPeakMemory reports the peak anonymous memory (RssAnon,
// sampled from /proc every 50 ms) and peak RSS of acptap replay of a
// session of 1,000 prompts, whose requests, each carrying the
// conversation so far, add up to some 140 MiB: a replay that held every
// recorded exchange would hold them all. Not a timing: run it with
// -benchtime 1x (scripts/bench-bigstore does).
func BenchmarkReplayPeakMemory(b *testing.B) {
	s, err := newReplayBenchSession(benchPrompts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(s.dir) })
	args := []string{"replay", "--store", s.db, "long"}
	dir := b.TempDir()
	var peak memoryPeak
	for b.Loop() {
		cmd := exec.Command("acptap", args...)
		cmd.Dir = dir
		cmd.Env = agentEnv()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		stop := sampleMemory(cmd.Process.Pid)
		err := cmd.Wait()
		p := stop()
		if err != nil || !bytes.HasPrefix(out.Bytes(), []byte("PASS long")) {
			b.Fatalf("acptap %v: %v\n%.2000s", args, err, out.Bytes())
		}
		peak.rss, peak.anon = max(peak.rss, p.rss), max(peak.anon, p.anon)
	}
	b.ReportMetric(float64(peak.anon)/(1<<20), "peak-rssanon-MiB")
	b.ReportMetric(float64(peak.rss)/(1<<20), "peak-rss-MiB")
}

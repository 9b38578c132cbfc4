package main

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// parallelBenchRecordings is how many demo-size recordings (two prompts,
// two streamed LLM exchanges each) BenchmarkReplayAllParallel replays.
const parallelBenchRecordings = 16

// BenchmarkReplayAllParallel replays every recording of a store of 16
// demo-size sessions with `acptap replay --all --parallel N`, for N = 1
// (one after another, the baseline), 2 and 4: the wall time of the whole
// run.
func BenchmarkReplayAllParallel(b *testing.B) {
	dir, err := os.MkdirTemp("", "acptap-bench-parallel-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	db := filepath.Join(dir, "bench.db")
	srv := httptest.NewServer(streamingChat(benchChunks))
	for i := range parallelBenchRecordings {
		args := []string{"--prompt", "fix the typo", "--prompt", "thanks", "--",
			"acptap", "record", "--store", db, "--name", fmt.Sprintf("session-%02d", i),
			"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + srv.URL + "/v1", "--", "testagent"}
		cmd := exec.Command("testeditor", args...)
		cmd.Dir = dir
		cmd.Env = agentEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			srv.Close()
			b.Fatalf("recording %d: %v\n%s", i, err, out)
		}
	}
	srv.Close()
	want := []byte(fmt.Sprintf("%d passed, 0 failed\n", parallelBenchRecordings))
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("parallel-%d", n), func(b *testing.B) {
			work := b.TempDir()
			for b.Loop() {
				cmd := exec.Command("acptap", "replay", "--store", db, "--all", "--parallel", fmt.Sprint(n))
				cmd.Dir = work
				cmd.Env = agentEnv()
				out, err := cmd.CombinedOutput()
				if err != nil || !bytes.HasSuffix(out, want) {
					b.Fatalf("replay --all --parallel %d: %v\n%.3000s", n, err, out)
				}
			}
		})
	}
}

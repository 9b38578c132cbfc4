package replay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/internal/testing/testkit"
)

// BenchmarkRunSession measures Run, in this process, on sessions of the
// test agent in LLM mode of 10, 100 and 1,000 prompts (one LLM exchange
// each, every request carrying the conversation so far), next to the same
// session run live against the fake upstream: overhead-ns/exchange is
// (replay − live) / prompts. Being in-process, it is the one to profile
// (go test -cpuprofile, -memprofile); the command's own benchmark is
// cmd/acptap's BenchmarkReplaySessions.
func BenchmarkRunSession(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("exchanges=%d", n), func(b *testing.B) {
			prompts := make([]string, n)
			for i := range prompts {
				prompts[i] = fmt.Sprintf("question %d: what changed in step %d of the build?", i+1, i+1)
			}
			st := openStore(b)
			recordSession(b, st, "long", session{llm: true, prompts: prompts})
			var liveNs float64
			b.Run("live", func(b *testing.B) {
				upstream := newFakeLLM(b)
				argv := testkit.SelfArgv(b)
				env := append(recordEnv(), "OPENAI_BASE_URL="+upstream.srv.URL+"/v1", "OPENAI_API_KEY=sk-test-0123456789")
				dir := b.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("Teh quick brown fox\n"), 0o644); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := testeditor.Run(context.Background(), testeditor.Options{Argv: argv, Dir: dir, Env: env, Cwd: dir, Prompts: prompts, Stderr: os.Stderr}); err != nil {
						b.Fatal(err)
					}
				}
				liveNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			})
			for _, mode := range []RequestMode{RequestsWarn, RequestsIgnore} {
				name := "replay"
				if mode == RequestsIgnore {
					name = "replay-requests-ignore"
				}
				b.Run(name, func(b *testing.B) {
					opts := Options{Env: replayEnv(), CA: testCA(b), Requests: mode}
					for b.Loop() {
						res, err := Run(context.Background(), st, "long", opts)
						if err != nil {
							b.Fatal(err)
						}
						if !res.Equal() || len(res.Warnings) != 0 {
							b.Fatalf("replay: divergences %v, warnings %v", res.Divergences, res.Warnings)
						}
					}
					if liveNs > 0 {
						ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
						b.ReportMetric((ns-liveNs)/float64(n), "overhead-ns/exchange")
					}
				})
			}
		})
	}
}

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The benchmarks below run 1, 2 and 8 `acptap record -- cat` processes
// into one store at once. scripts/bench prints them next to the variant
// of one recorder.

// recorderProc is one acptap record -- cat of a benchmark.
type recorderProc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *bufio.Reader
	started time.Duration // from exec to the "recording" notice: Create returned, the agent starts next
}

func startRecorder(b *testing.B, db, name string) *recorderProc {
	b.Helper()
	cmd := exec.Command("acptap", "record", "--store", db, "--name", name, "--grace", "5s", "--", "cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || !strings.Contains(line, "recording") {
		b.Fatalf("acptap record said %q, %v", line, err)
	}
	return &recorderProc{cmd: cmd, stdin: stdin, stdout: bufio.NewReaderSize(stdout, 64<<10), started: time.Since(start)}
}

func (r *recorderProc) stop(b *testing.B) {
	r.stdin.Close()
	io.Copy(io.Discard, r.stdout)
	if err := r.cmd.Wait(); err != nil {
		b.Errorf("%v: %v", r.cmd.Args, err)
	}
}

// pump writes n copies of line and reads their echoes.
func (r *recorderProc) pump(line []byte, n int) error {
	errc := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(r.stdin, 64<<10)
		for range n {
			if _, err := w.Write(line); err != nil {
				errc <- err
				return
			}
		}
		errc <- w.Flush()
	}()
	buf := make([]byte, 64<<10)
	for remaining := n * len(line); remaining > 0; {
		k, err := r.stdout.Read(buf[:min(len(buf), remaining)])
		if err != nil {
			return err
		}
		remaining -= k
	}
	return <-errc
}

// BenchmarkRecordConcurrent moves 1 KiB lines through 1, 2 and 8 echo
// agents, each under its own acptap record into one store, at once; MB/s
// is all recorders' together. start-ms is the longest time a recorder
// took from exec to its agent's start (its recording created), with the
// recorders before it already busy.
func BenchmarkRecordConcurrent(b *testing.B) {
	for _, n := range []int{1, 2, 8} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			db := filepath.Join(b.TempDir(), "bench.db")
			line := append(bytes.Repeat([]byte("x"), 1023), '\n')
			procs := make([]*recorderProc, n)
			var slowest time.Duration
			for i := range procs {
				procs[i] = startRecorder(b, db, fmt.Sprint("r", i))
				slowest = max(slowest, procs[i].started)
			}
			b.SetBytes(int64(n * len(line)))
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, p := range procs {
				wg.Go(func() {
					if err := p.pump(line, b.N); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
			// Until every recorder has committed its last frame and
			// exited: the figure is what the store took in.
			for _, p := range procs {
				p.stop(b)
			}
			b.StopTimer()
			b.ReportMetric(float64(slowest.Microseconds())/1000, "start-ms")
		})
	}
}

// BenchmarkFollowLatency measures how long after the agent wrote a line
// `acptap show --follow --json` prints it: the followed recording gets
// one line at a time, while 0, 1 or 7 other recorders into the same store
// each move 2,000 lines of 1 KiB a second (2 MB/s, a hundred times what
// an ACP agent writes; at full speed their queues would grow without
// bound, the store taking in less than acptap forwards).
func BenchmarkFollowLatency(b *testing.B) {
	for _, n := range []int{1, 2, 8} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			db := filepath.Join(b.TempDir(), "bench.db")
			followed := startRecorder(b, db, "followed")
			// Busy neighbours, until the end.
			done := make(chan struct{})
			var wg sync.WaitGroup
			line := append(bytes.Repeat([]byte("x"), 1023), '\n')
			var others []*recorderProc
			for i := 1; i < n; i++ {
				p := startRecorder(b, db, fmt.Sprint("busy", i))
				others = append(others, p)
				wg.Go(func() {
					tick := time.NewTicker(10 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-done:
							return
						case <-tick.C:
						}
						if err := p.pump(line, 20); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			show := exec.Command("acptap", "show", "--store", db, "--follow", "--json", "followed")
			showOut, err := show.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			var showErr bytes.Buffer
			show.Stderr = &showErr
			if err := show.Start(); err != nil {
				b.Fatal(err)
			}
			follow := bufio.NewReader(showOut)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				marker := fmt.Sprintf("mark-%d-", i)
				msg := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"m":"` + marker + `"}}` + "\n")
				start := time.Now()
				if _, err := followed.stdin.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := followed.stdout.ReadSlice('\n'); err != nil {
					b.Fatal(err)
				}
				// The editor lane's frame, then the agent's: the agent's
				// is the one its write made.
				for seen := 0; seen < 2; {
					l, err := follow.ReadString('\n')
					if err != nil {
						show.Wait()
						b.Fatalf("show --follow: %v: %s", err, showErr.Bytes())
					}
					if strings.Contains(l, marker) {
						seen++
					}
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			close(done)
			wg.Wait()
			for _, p := range others {
				p.stop(b)
			}
			followed.stop(b)
			if err := show.Wait(); err != nil {
				b.Errorf("show --follow: %v", err)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

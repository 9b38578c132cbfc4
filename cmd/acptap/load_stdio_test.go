package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/bytesize"
	"github.com/acptap/acptap/store"
)

// floodLine is line i of recorder name's flood: about 1 KiB of JSON-RPC,
// deterministic, so that the echo and the store can be checked without
// keeping what was sent.
func floodLine(name string, i int) []byte {
	sum := sha256.Sum256([]byte(name + "/" + strconv.Itoa(i)))
	pad := bytes.Repeat([]byte(hex.EncodeToString(sum[:])), 15)
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"rec":%q,"i":%d,"pad":"%s"}}`, name, i, pad)
}

// TestLoadStdioFlood runs 8 recorders of cat into one store at once, each
// fed ACPTAP_LOAD_FLOOD (default 64MiB) of 1 KiB lines as fast as it takes
// them, while its echoes are read and checked. Then every recording must
// hold every line of both lanes, in order, with contiguous sequence
// numbers. It reports the throughput and each recorder's peak RssAnon.
// Loads the machine: scripts/load runs it.
func TestLoadStdioFlood(t *testing.T) {
	if os.Getenv(loadEnv) != "1" {
		t.Skipf("set %s=1 to run the load test (scripts/load)", loadEnv)
	}
	size := int64(64 << 20)
	if v := os.Getenv("ACPTAP_LOAD_FLOOD"); v != "" {
		n, err := bytesize.Parse(v)
		if err != nil {
			t.Fatalf("ACPTAP_LOAD_FLOOD=%q: %v", v, err)
		}
		size = n
	}
	const recorders = 8
	lines := int(size / int64(len(floodLine("rec0", 0))+1))
	db := filepath.Join(t.TempDir(), "flood.db")
	start := time.Now()
	var wg sync.WaitGroup
	peaks := make([]memoryPeak, recorders)
	for r := range recorders {
		name := fmt.Sprint("rec", r)
		cmd, stdin, stdout := startRecording(t, db, name)
		peak := sampleMemory(cmd.Process.Pid)
		wg.Go(func() {
			errc := make(chan error, 1)
			go func() {
				w := bufio.NewWriterSize(stdin, 64<<10)
				for i := range lines {
					w.Write(floodLine(name, i))
					if err := w.WriteByte('\n'); err != nil {
						errc <- err
						return
					}
				}
				errc <- w.Flush()
			}()
			for i := range lines {
				got, err := stdout.ReadBytes('\n')
				if err != nil {
					t.Errorf("%s: echo %d: %v", name, i, err)
					break
				}
				if want := floodLine(name, i); !bytes.Equal(bytes.TrimSuffix(got, []byte("\n")), want) {
					t.Errorf("%s: echo %d differs from the line sent", name, i)
					break
				}
			}
			if err := <-errc; err != nil {
				t.Errorf("%s: writing: %v", name, err)
			}
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			peaks[r] = peak()
		})
	}
	wg.Wait()
	took := time.Since(start)

	st, err := store.Open(db, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for r := range recorders {
		name := fmt.Sprint("rec", r)
		next := map[store.Lane]int{}
		var seq uint64
		err := st.Events(name, func(e store.Event) error {
			seq++
			if e.Seq != seq {
				return fmt.Errorf("event seq %d, want %d", e.Seq, seq)
			}
			if e.Lane != store.LaneEditor && e.Lane != store.LaneAgent {
				return nil
			}
			i := next[e.Lane]
			if want := floodLine(name, i); !bytes.Equal(e.Data, want) {
				return fmt.Errorf("%v frame %d (seq %d) differs from the line sent", e.Lane, i, e.Seq)
			}
			next[e.Lane] = i + 1
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if next[store.LaneEditor] != lines || next[store.LaneAgent] != lines {
			t.Errorf("%s: %d editor and %d agent frames recorded, want %d of each", name, next[store.LaneEditor], next[store.LaneAgent], lines)
		}
	}
	fi, _ := os.Stat(db)
	total := float64(recorders) * float64(lines) * float64(len(floodLine("rec0", 0))+1)
	t.Logf("%d recorders into one store, %d lines (%.0f MiB) each way each, in %v: %.1f MB/s forwarded each way in all; store %.0f MiB",
		recorders, lines, total/recorders/(1<<20), took.Round(time.Millisecond), total/took.Seconds()/1e6, float64(fi.Size())/(1<<20))
	for r, p := range peaks {
		t.Logf("rec%d: peak RSS %.1f MiB, peak RssAnon %.1f MiB", r, float64(p.rss)/(1<<20), float64(p.anon)/(1<<20))
	}
}

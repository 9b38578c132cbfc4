package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/bytesize"
	"github.com/acptap/acptap/record"
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

// gibLine writes line i of TestLoadStdioGiB into line, a template of 1 KiB
// ending in '\n': its number, in 16 digits after the prefix.
func gibLine(line []byte, i int) {
	const prefix = len(`{"jsonrpc":"2.0","method":"session/update","params":{"i":`)
	n := uint64(i)
	for j := prefix + 15; j >= prefix; j-- {
		line[j] = byte('0' + n%10)
		n /= 10
	}
}

// gibTemplate returns the 1 KiB template of TestLoadStdioGiB's lines.
func gibTemplate() []byte {
	line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"i":0000000000000000,"pad":"`)
	line = append(line, bytes.Repeat([]byte("x"), 1024-len(line)-4)...)
	return append(line, `"}}`+"\n"...)
}

// TestLoadStdioGiB pushes ACPTAP_LOAD_GIB (default 1GiB) of 1 KiB lines
// through one `acptap record -- cat` as fast as it takes them, reading and
// checking the echo as it comes, and reports the throughput, the
// recorder's peak RSS and RssAnon against record.DefaultMaxBacklog, what
// it said on stderr (that recording fell behind, and caught up), and how
// long after the last echo it took to finish recording. Every line of both
// lanes must then be in the store, in order. With ACPTAP_LOAD_PROFILE set,
// the recorder writes its CPU profile there (scripts/load summarizes it).
func TestLoadStdioGiB(t *testing.T) {
	if os.Getenv(loadEnv) != "1" {
		t.Skipf("set %s=1 to run the load test (scripts/load)", loadEnv)
	}
	size := int64(1 << 30)
	if v := os.Getenv("ACPTAP_LOAD_GIB"); v != "" {
		n, err := bytesize.Parse(v)
		if err != nil {
			t.Fatalf("ACPTAP_LOAD_GIB=%q: %v", v, err)
		}
		size = n
	}
	tmpl := gibTemplate()
	lines := int(size / int64(len(tmpl)))
	db := filepath.Join(t.TempDir(), "gib.db")
	cmd := exec.Command("acptap", "record", "--store", db, "--name", "gib", "--grace", "10m", "--", "cat")
	profile := os.Getenv("ACPTAP_LOAD_PROFILE")
	profileDir := t.TempDir()
	if profile != "" {
		cmd.Env = append(os.Environ(), "ACPTAP_CHILD_PROFILE="+profileDir)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	peak := sampleMemory(cmd.Process.Pid)
	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(stdin, 64<<10)
		line := slices.Clone(tmpl)
		for i := range lines {
			gibLine(line, i)
			if _, err := w.Write(line); err != nil {
				errc <- err
				return
			}
		}
		errc <- w.Flush()
	}()
	r := bufio.NewReaderSize(stdout, 64<<10)
	want := slices.Clone(tmpl)
	for i := range lines {
		got, err := r.ReadSlice('\n')
		if err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
		gibLine(want, i)
		if !bytes.Equal(got, want) {
			t.Fatalf("echo %d differs from the line sent", i)
		}
	}
	forwarded := time.Since(start)
	if err := <-errc; err != nil {
		t.Fatalf("writing: %v", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("record: %v\nstderr:\n%s", err, stderr.String())
	}
	took := time.Since(start)
	mem := peak()
	if profile != "" {
		// childProfile names it by the recorder's pid.
		if err := os.Rename(filepath.Join(profileDir, fmt.Sprint(cmd.Process.Pid, ".cpu")), profile); err != nil {
			t.Errorf("the recorder's CPU profile: %v", err)
		}
	}

	st, err := store.Open(db, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	next := map[store.Lane]int{}
	err = st.Events("gib", func(e store.Event) error {
		i := next[e.Lane]
		gibLine(want, i)
		if !bytes.Equal(e.Data, want[:len(want)-1]) {
			return fmt.Errorf("%v frame %d (seq %d) differs from the line sent", e.Lane, i, e.Seq)
		}
		next[e.Lane] = i + 1
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if next[store.LaneEditor] != lines || next[store.LaneAgent] != lines {
		t.Errorf("%d editor and %d agent frames recorded, want %d of each", next[store.LaneEditor], next[store.LaneAgent], lines)
	}
	mb := float64(lines) * float64(len(tmpl))
	t.Logf("%d lines (%.0f MiB) each way through acptap record -- cat: forwarded in %v (%.1f MB/s), recorded %v later (%.1f MB/s each way in all)",
		lines, mb/(1<<20), forwarded.Round(time.Millisecond), mb/forwarded.Seconds()/1e6, (took - forwarded).Round(time.Millisecond), mb/took.Seconds()/1e6)
	t.Logf("recorder peak RSS %.1f MiB, peak RssAnon %.1f MiB; the backlog's bound (record.DefaultMaxBacklog) %d MiB; its CPU time %v user, %v system",
		float64(mem.rss)/(1<<20), float64(mem.anon)/(1<<20), record.DefaultMaxBacklog>>20,
		cmd.ProcessState.UserTime().Round(time.Millisecond), cmd.ProcessState.SystemTime().Round(time.Millisecond))
	for line := range strings.Lines(stderr.String()) {
		t.Logf("record said: %s", strings.TrimSpace(line))
	}
}

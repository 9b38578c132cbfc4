package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// durations are the times in replay reports, which differ between runs.
var durations = regexp.MustCompile(`, [0-9.]+(ms|s|µs)\)`)

func TestReplayParallelSameReports(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	for i := range 8 {
		var args []string
		switch {
		case i == 0:
			// The first in order ends last: its answer comes slowly.
			args = []string{"--chunk-delay", "40ms"}
		case i%2 == 1:
			args = []string{"--message", fmt.Sprintf("Fixed %d.", i)}
		}
		recordSession(t, dir, db, fmt.Sprintf("r%d", i), agentEnv(), nil, args...)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		sum  string
	}{
		{"as recorded", nil, 0, "8 passed, 0 failed\n"},
		// The recorded commands but for the odd ones' messages.
		{"changed agent", []string{"--", "testagent"}, ExitDiverged, "4 passed, 4 failed\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var outs []string
			for _, n := range []string{"1", "4"} {
				args := append([]string{"replay", "--store", db, "--all", "--parallel", n}, tc.args...)
				out, stderr, code := runAcptap(t, dir, agentEnv(), args...)
				if code != tc.code || !strings.HasSuffix(out, tc.sum) {
					t.Fatalf("replay --parallel %s: exit %d, want %d and a summary %q:\n%s%s", n, code, tc.code, tc.sum, out, stderr)
				}
				if stderr != "" {
					t.Errorf("replay --parallel %s off a terminal wrote to stderr (no progress line there): %q", n, stderr)
				}
				outs = append(outs, durations.ReplaceAllString(out, ", <duration>)"))
			}
			if outs[0] != outs[1] {
				t.Errorf("--parallel 4 reports differ from --parallel 1:\n--- 1\n%s--- 4\n%s", outs[0], outs[1])
			}
			// Whole reports, in name order.
			var order []string
			for _, m := range regexp.MustCompile(`(?m)^(PASS|FAIL) (r\d)`).FindAllStringSubmatch(outs[1], -1) {
				order = append(order, m[2])
			}
			if got, want := strings.Join(order, " "), "r0 r1 r2 r3 r4 r5 r6 r7"; got != want {
				t.Errorf("reports in the order %s, want %s", got, want)
			}
		})
	}
}

func TestReplayAllRunsInParallel(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	var running, peak atomic.Int32
	var emitted []string
	inOrder(names, 3, func(name string) outcome {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		// Later names end first.
		time.Sleep(time.Duration(len(names)-strings.Index("abcdef", name)) * 5 * time.Millisecond)
		running.Add(-1)
		return outcome{name: name}
	}, func(o outcome) bool {
		emitted = append(emitted, o.name)
		return true
	})
	if got, want := strings.Join(emitted, ""), "abcdef"; got != want {
		t.Errorf("emitted %s, want %s", got, want)
	}
	if p := peak.Load(); p < 2 || p > 3 {
		t.Errorf("%d replays ran at once, want 2 or 3 (parallel 3)", p)
	}
}

func TestReplayAllStops(t *testing.T) {
	var mu sync.Mutex
	ran := map[string]bool{}
	var emitted []string
	inOrder([]string{"a", "b", "c", "d", "e"}, 1, func(name string) outcome {
		mu.Lock()
		ran[name] = true
		mu.Unlock()
		return outcome{name: name}
	}, func(o outcome) bool {
		emitted = append(emitted, o.name)
		return o.name != "b"
	})
	if got := strings.Join(emitted, ""); got != "ab" {
		t.Errorf("emitted %s, want ab (nothing after the one emit refused)", got)
	}
	if ran["d"] || ran["e"] {
		t.Errorf("replays started after emit refused: %v", ran)
	}
}

func TestProgressLine(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	p := newProgress(&buf, 5, false, false)
	p.stopped = false // drawn by hand below, without the ticker
	p.now = func() time.Time { return now }
	p.started("slow")
	now = now.Add(2 * time.Second)
	p.started("fast")
	now = now.Add(1500 * time.Millisecond)
	if got, want := p.line(now), "replaying: 0/5 done · slowest running: slow (3.5s)"; got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
	p.draw()
	p.report("fast", true, func() { buf.WriteString("FAIL fast: ...\n") })
	want := "\r\x1b[Kreplaying: 0/5 done · slowest running: slow (3.5s)" + // drawn
		"\r\x1b[K" + "FAIL fast: ...\n" + // erased, then the report
		"\r\x1b[Kreplaying: 1/5 done, 1 failed · slowest running: slow (3.5s)" // drawn again
	if got := buf.String(); got != want {
		t.Errorf("terminal got %q\nwant %q", got, want)
	}
	buf.Reset()
	p.stop()
	p.stop() // idempotent
	if got := buf.String(); got != "\r\x1b[K" {
		t.Errorf("stop wrote %q, want the line erased once", got)
	}
}

func TestProgressOff(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, 2, false, true)
	p.started("a")
	printed := false
	p.report("a", false, func() { printed = true })
	p.stop()
	if !printed || buf.Len() != 0 {
		t.Errorf("off: printed %v, wrote %q; want the report printed and nothing drawn", printed, buf.String())
	}
}

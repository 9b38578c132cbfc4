package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loadEnv opts into TestLoadSSE (scripts/load): it loads the machine, so it
// is not part of the normal run.
const loadEnv = "ACPTAP_LOAD"

// The load agent's settings, from its environment.
const (
	loadURLEnv      = "LOAD_URL"      // the upstream's stream URL
	loadStreamsEnv  = "LOAD_STREAMS"  // concurrent streams
	loadDurationEnv = "LOAD_DURATION" // how long to keep them going
)

// loadEvents and loadPad shape each stream: loadEvents SSE events of
// about loadPad bytes, loadGap apart.
const (
	loadEvents = 40
	loadPad    = 200
	loadGap    = 5 * time.Millisecond
)

// loadEvent is the SSE event seq of stream id: a deterministic text the
// agent checks and the store must hold byte for byte.
func loadEvent(id string, seq int) string {
	sum := sha256.Sum256([]byte(id + "/" + strconv.Itoa(seq)))
	pad := strings.Repeat(hex.EncodeToString(sum[:]), loadPad/64+1)[:loadPad]
	return fmt.Sprintf("data: {\"id\":%q,\"seq\":%d,\"pad\":%q}\n\n", id, seq, pad)
}

// loadStream is the whole response body of stream id.
func loadStream(id string) string {
	var b strings.Builder
	for i := range loadEvents {
		b.WriteString(loadEvent(id, i))
	}
	return b.String()
}

// loadAgent keeps LOAD_STREAMS SSE streams going through the tap's proxy
// (HTTPS_PROXY, trusting the interception CA of SSL_CERT_FILE) for
// LOAD_DURATION, checks that every stream arrives intact and in order,
// and prints what it did as JSON on stderr. It speaks no ACP.
func loadAgent() {
	n, _ := strconv.Atoi(os.Getenv(loadStreamsEnv))
	d, _ := time.ParseDuration(os.Getenv(loadDurationEnv))
	proxy, err := url.Parse(os.Getenv("HTTPS_PROXY"))
	if err != nil || n < 1 || d <= 0 {
		fmt.Fprintf(os.Stderr, "loadagent: bad settings: HTTPS_PROXY %q (%v), %s=%d, %s=%v\n", os.Getenv("HTTPS_PROXY"), err, loadStreamsEnv, n, loadDurationEnv, d)
		os.Exit(2)
	}
	// Go never proxies loopback on its own: the proxy is named here.
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy), MaxIdleConnsPerHost: n, ForceAttemptHTTP2: true}}
	var streams, bytes atomic.Int64
	var mu sync.Mutex
	var problems []string
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for k := 0; time.Now().Before(deadline); k++ {
				id := fmt.Sprintf("w%d-s%d", w, k)
				got, err := fetchStream(client, os.Getenv(loadURLEnv)+"?id="+id)
				if err == nil && got != loadStream(id) {
					err = fmt.Errorf("stream %s: %d bytes differ from the %d sent", id, len(got), len(loadStream(id)))
				}
				if err != nil {
					mu.Lock()
					problems = append(problems, err.Error())
					mu.Unlock()
					return
				}
				streams.Add(1)
				bytes.Add(int64(len(got)))
			}
		})
	}
	wg.Wait()
	json.NewEncoder(os.Stderr).Encode(map[string]any{"streams": streams.Load(), "bytes": bytes.Load(), "problems": problems})
	if len(problems) > 0 {
		os.Exit(1)
	}
}

// fetchStream reads a stream event by event, checking each arrives in
// order as it comes.
func fetchStream(client *http.Client, u string) (string, error) {
	resp, err := client.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", u, resp.Status)
	}
	var b strings.Builder
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			break
		}
	}
	return b.String(), nil
}

// loadUpstream streams loadStream(id) event by event, loadGap apart.
func loadUpstream() *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := range loadEvents {
			if _, err := w.Write([]byte(loadEvent(id, i))); err != nil {
				return
			}
			f.Flush()
			time.Sleep(loadGap)
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	return srv
}

// TestLoadSSE records the load agent keeping ACPTAP_LOAD_STREAMS (default
// 200) SSE streams going through the tap for ACPTAP_LOAD_DURATION
// (default 60s): every byte must arrive intact and in order, every stream
// must be recorded whole, and the recorder's peak memory is reported.
func TestLoadSSE(t *testing.T) {
	if os.Getenv(loadEnv) != "1" {
		t.Skipf("set %s=1 to run the load test (scripts/load)", loadEnv)
	}
	streams, duration := "200", "60s"
	if v := os.Getenv("ACPTAP_LOAD_STREAMS"); v != "" {
		streams = v
	}
	if v := os.Getenv("ACPTAP_LOAD_DURATION"); v != "" {
		duration = v
	}
	srv := loadUpstream()
	defer srv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "load.db")
	cmd := exec.Command("acptap", "record", "--store", db, "--name", "load", "--proxy-loopback", "--upstream-ca", caFile(t, srv), "--", "loadagent")
	cmd.Dir = dir
	cmd.Env = agentEnv(loadURLEnv+"="+srv.URL+"/stream", loadStreamsEnv+"="+streams, loadDurationEnv+"="+duration)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := sampleMemory(cmd.Process.Pid)
	err = cmd.Wait()
	stdin.Close()
	mem := peak()
	took := time.Since(start)
	var report struct {
		Streams, Bytes int64
		Problems       []string
	}
	for line := range strings.Lines(stderr.String()) {
		json.Unmarshal([]byte(line), &report)
	}
	if err != nil || len(report.Problems) > 0 || report.Streams == 0 {
		t.Fatalf("record: %v; the agent: %+v\nstderr:\n%.3000s", err, report, stderr.String())
	}

	// Every stream recorded whole.
	out, err := exec.Command("acptap", "show", "--store", db, "--json", "load").Output()
	if err != nil {
		t.Fatalf("show --json: %v", err)
	}
	var recorded, intact int64
	for line := range strings.Lines(string(out)) {
		var e struct {
			Lane, URL, ResponseBody, Error string
		}
		var raw map[string]any
		json.Unmarshal([]byte(line), &raw)
		if raw["lane"] != "llm" {
			continue
		}
		e.URL, _ = raw["url"].(string)
		e.ResponseBody, _ = raw["response_body"].(string)
		e.Error, _ = raw["error"].(string)
		recorded++
		u, err := url.Parse(e.URL)
		if err == nil && e.Error == "" && e.ResponseBody == loadStream(u.Query().Get("id")) {
			intact++
		}
	}
	t.Logf("%s streams for %s: %d streams (%d bytes) through the tap in %v; %d exchanges recorded, %d intact; recorder peak RSS %.1f MiB, peak RssAnon %.1f MiB",
		streams, duration, report.Streams, report.Bytes, took.Round(time.Millisecond), recorded, intact, float64(mem.rss)/(1<<20), float64(mem.anon)/(1<<20))
	if recorded != report.Streams || intact != report.Streams {
		t.Errorf("%d streams went through, %d were recorded, %d of them whole; want all %d", report.Streams, recorded, intact, report.Streams)
	}
}

// memoryPeak is the largest RSS and RssAnon seen, in bytes.
type memoryPeak struct{ rss, anon int64 }

// sampleMemory samples /proc/PID/status every 50ms until the returned
// function is called, which returns the peaks. Of acptap record they are
// the peaks of the sums of its process's and its tap process's, sampled
// together.
func sampleMemory(pid int) func() memoryPeak {
	var mu sync.Mutex
	var peak memoryPeak
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		// acptap record starts its tap process before its agent, so it is
		// looked for in the first second only: a process without one
		// (replay) is not made to scan /proc 20 times a second while it
		// is measured.
		tapPID, looks := 0, 20
		for {
			if tapPID == 0 && looks > 0 {
				tapPID = tapProcessOf(pid)
				looks--
			}
			var now memoryPeak
			for _, p := range []int{pid, tapPID} {
				if p == 0 {
					continue
				}
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
				if err != nil {
					continue
				}
				for line := range strings.Lines(string(b)) {
					f := strings.Fields(line)
					if len(f) < 2 {
						continue
					}
					kb, _ := strconv.ParseInt(f[1], 10, 64)
					switch f[0] {
					case "VmRSS:":
						now.rss += kb << 10
					case "RssAnon:":
						now.anon += kb << 10
					}
				}
			}
			mu.Lock()
			peak.rss, peak.anon = max(peak.rss, now.rss), max(peak.anon, now.anon)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() memoryPeak {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

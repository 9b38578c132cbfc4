package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/acptap/acptap/internal/demollm"
	"github.com/acptap/acptap/record/causal"
	"github.com/acptap/acptap/store"
	"github.com/acptap/acptap/timeline"
)

// The tests of this file check that a recording's Seq order is the order
// in which acptap record saw its events (issue 24): a frame read before an
// LLM request reached the tap comes before the exchange, one read after it
// after it, and times never go back along the Seqs. They check it by
// causality that no scheduling can reverse, under full CPU load, with the
// tap in its own process, for lines of any length, and with several
// recorders into one store.

// readRecorded reads recording name of the store at db, and fails the
// test for what must hold of every recording: Seqs without a gap, times
// that never go back along them.
func readRecorded(t *testing.T, db, name string) *causal.Recording {
	t.Helper()
	st, err := store.Open(db, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, vs, err := causal.Read(st, name)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		if i == 5 {
			t.Errorf("%s: %d violations in all", name, len(vs))
			break
		}
		t.Errorf("%s: %v", name, v)
	}
	return r
}

// causalAgent is an agent whose every LLM call follows a line that the
// recorder has read for sure, and precedes one: for each `go N SIZE` line
// on stdin it writes `sending N` padded to SIZE bytes on stdout, waits
// for `ok N` on stdin (which the editor sends once it has read `sending
// N`, so the recorder had read it too), calls the LLM at $OPENAI_BASE_URL
// with N in the body, writes a line on stderr, and `got N` with the answer
// on stdout once the answer is whole. The `go` lines are handled
// concurrently, so that exchanges and frames of several of them race.
// It exits once stdin ends and every call is done.
func causalAgent() {
	var outMu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	write := func(w io.Writer, s string) {
		outMu.Lock()
		defer outMu.Unlock()
		if w == os.Stdout {
			out.WriteString(s)
			out.Flush()
			return
		}
		io.WriteString(w, s)
	}
	var mu sync.Mutex
	acks := map[int]chan struct{}{}
	ack := func(n int) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if acks[n] == nil {
			acks[n] = make(chan struct{})
		}
		return acks[n]
	}
	var wg sync.WaitGroup
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadString('\n')
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "go":
			n, _ := strconv.Atoi(f[1])
			size, _ := strconv.Atoi(f[2])
			wg.Go(func() {
				msg := fmt.Sprintf("sending %d ", n)
				write(os.Stdout, msg+strings.Repeat("x", max(size-len(msg), 0))+"\n")
				<-ack(n)
				resp, err := http.Post(os.Getenv("OPENAI_BASE_URL")+"/chat/completions", "application/json",
					strings.NewReader(fmt.Sprintf(`{"model":"m","stream":true,"n":%d,"messages":[{"role":"user","content":"call %d"}]}`, n, n)))
				if err != nil {
					write(os.Stdout, fmt.Sprintf("got %d error %q\n", n, err))
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				write(os.Stderr, fmt.Sprintf("called %d\n", n))
				write(os.Stdout, fmt.Sprintf("got %d %d bytes\n", n, len(body)))
			})
		case len(f) == 2 && f[0] == "ok":
			n, _ := strconv.Atoi(f[1])
			close(ack(n))
		}
		if err != nil {
			break
		}
	}
	wg.Wait()
	os.Exit(0)
}

// cpuLoad keeps every CPU busy with a spinning shell, each in a process
// group of its own, killed whole when the test ends.
func cpuLoad(t *testing.T) {
	t.Helper()
	for range runtime.NumCPU() {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		})
	}
}

// recordCausal records causalAgent through acptap record, the tap in its
// own process, with calls N in 1..calls, racing `workers` at a time, the
// `sending` lines of the sizes given in turn, and checks the recording.
func recordCausal(t *testing.T, db, name, upstream string, calls, workers int, sizes []int) {
	t.Helper()
	cmd := exec.Command("acptap", "record", "--store", db, "--name", name, "--no-proxy-env",
		"--base-url", "OPENAI_BASE_URL="+upstream+"/v1", "--", "causalagent")
	cmd.Env = agentEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var inMu sync.Mutex
	send := func(s string) {
		inMu.Lock()
		defer inMu.Unlock()
		io.WriteString(stdin, s)
	}
	// The editor: `go` for up to workers calls at a time, `ok` for each
	// `sending` read, the next `go` for each `got`.
	next := 1
	goNext := func() {
		if next <= calls {
			send(fmt.Sprintf("go %d %d\n", next, sizes[next%len(sizes)]))
			next++
		}
	}
	for range workers {
		goNext()
	}
	r := bufio.NewReaderSize(stdout, 1<<20)
	for got := 0; got < calls; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: reading the agent: %v after %d answers\n%s", name, err, got, stderr.String())
		}
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "sending":
			send("ok " + f[1] + "\n")
		case len(f) >= 2 && f[0] == "got":
			if f[2] == "error" {
				t.Fatalf("%s: %s", name, line)
			}
			got++
			goNext()
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: acptap record: %v\n%s", name, err, stderr.String())
	}
	checkCausal(t, readRecorded(t, db, name), name, calls)
}

// checkCausal checks the order of causalAgent's recording: for each call
// N, `go N` < `sending N` < `ok N` < the exchange < `got N`, each pair
// ordered by causality (the agent writes `sending N` once it has read `go
// N`; the editor writes `ok N` once it has read `sending N`; the agent
// calls the LLM once it has read `ok N`, and writes `got N` once the
// answer has come).
func checkCausal(t *testing.T, r *causal.Recording, name string, calls int) {
	t.Helper()
	line := func(lane store.Lane, prefix string) func(causal.Event) bool {
		return func(e causal.Event) bool { return e.Lane == lane && bytes.HasPrefix(e.Line, []byte(prefix)) }
	}
	bad := 0
	for n := 1; n <= calls; n++ {
		call := fmt.Sprintf(`"n":%d,`, n)
		steps := []struct {
			what string
			seq  uint64
		}{
			{fmt.Sprintf("editor's go %d", n), r.First(line(store.LaneEditor, fmt.Sprintf("go %d ", n)))},
			{fmt.Sprintf("agent's sending %d", n), r.First(line(store.LaneAgent, fmt.Sprintf("sending %d ", n)))},
			{fmt.Sprintf("editor's ok %d", n), r.First(line(store.LaneEditor, fmt.Sprintf("ok %d", n)))},
			{fmt.Sprintf("LLM call %d", n), r.First(func(e causal.Event) bool {
				return e.X != nil && bytes.Contains(e.X.RequestBody, []byte(call))
			})},
			{fmt.Sprintf("agent's got %d", n), r.First(line(store.LaneAgent, fmt.Sprintf("got %d ", n)))},
		}
		for i, s := range steps {
			if s.seq == 0 {
				t.Fatalf("%s: no %s in the recording", name, s.what)
			}
			if i > 0 && s.seq <= steps[i-1].seq {
				bad++
				if bad <= 5 {
					t.Errorf("%s: %s has Seq %d, before %s at %d, which caused it", name, s.what, s.seq, steps[i-1].what, steps[i-1].seq)
				}
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d events in all before what caused them", name, bad)
	}
}

// chatUpstreamN answers causalAgent's calls with a short SSE stream.
func chatUpstreamN(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"part %d\"}}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCausalOrderUnderLoad records causalAgent with every CPU busy: 200
// calls, four racing at a time, with `sending` lines from a few bytes to
// 1 MiB (many reads each); then three recorders at once into one store.
func TestCausalOrderUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("records 500 LLM calls under load")
	}
	up := chatUpstreamN(t)
	cpuLoad(t)
	sizes := []int{20, 300, 5000, 70000, 20, 1 << 20, 100}
	t.Run("one", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "s.db")
		recordCausal(t, db, "causal", up.URL, 200, 4, sizes)
	})
	t.Run("three-into-one-store", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "s.db")
		for i := range 3 {
			name := fmt.Sprintf("causal-%d", i)
			t.Run(name, func(t *testing.T) {
				t.Parallel() // the three record at once
				recordCausal(t, db, name, up.URL, 100, 3, sizes)
			})
		}
	})
}

// TestCausalOrderConversations records the bundled demo agent and the
// test agent with its concurrent updates, each calling an LLM through the
// tap in its own process with every CPU busy, and checks each recording's
// order by what caused what.
func TestCausalOrderConversations(t *testing.T) {
	if testing.Short() {
		t.Skip("records under load")
	}
	llm := httptest.NewServer(demollm.Handler())
	t.Cleanup(llm.Close)
	tlsLLM := httptest.NewTLSServer(demollm.Handler())
	t.Cleanup(tlsLLM.Close)
	baseURL := []string{"--base-url", "OPENAI_BASE_URL=" + llm.URL + "/v1"}
	cpuLoad(t)
	editor := []string{"--prompt", "Fix the typo in notes.txt", "--prompt", "Thanks!"}
	for _, tc := range []struct {
		name   string
		record []string
		agent  []string
	}{
		{"demo", baseURL, []string{"acptap", "demo-agent", "--title-call"}},
		{"concurrent-updates", baseURL, []string{"testagent", "--concurrent-updates", "timed", "--title-call"}},
		// Through the forward proxy, intercepting TLS: the fake LLM is on
		// loopback, which only --proxy-loopback sends through the tap.
		{"concurrent-updates-proxy", []string{"--proxy-loopback", "--upstream-ca", caFile(t, tlsLLM)},
			[]string{"testagent", "--llm", tlsLLM.URL + "/v1", "--concurrent-updates", "timed", "--title-call"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := workspace(t)
			db := filepath.Join(dir, "s.db")
			for i := range 5 {
				name := fmt.Sprintf("%s-%d", tc.name, i)
				args := append(append([]string{}, editor...), "--", "acptap", "record", "--store", db, "--name", name)
				args = append(append(args, tc.record...), "--")
				cmd := exec.Command("testeditor", append(args, tc.agent...)...)
				cmd.Dir = dir
				cmd.Env = agentEnv()
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("recording %s: %v\n%s", name, err, out)
				}
				n, vs := readRecorded(t, db, name).Conversation()
				for _, v := range vs {
					t.Errorf("%s: %v", name, v)
				}
				if n < 4 {
					t.Errorf("%s: checked %d causal pairs, want at least 4", name, n)
				}
				checkPage(t, db, name)
			}
		})
	}
}

// checkPage checks what the HTML page makes of a recording's order: every
// turn has the LLM exchanges its prompt caused, and each tool's result is
// carried by an exchange after the tool call began, whose request holds a
// tool result.
func checkPage(t *testing.T, db, name string) {
	t.Helper()
	st, err := store.Open(db, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := timeline.Recording(st, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Turns) < 2 {
		t.Fatalf("%s: the page has %d turns, want 2", name, len(p.Turns))
	}
	for i, turn := range p.Turns {
		if len(turn.LLM) == 0 {
			t.Errorf("%s: the page lists no LLM exchange in turn %d", name, i+1)
		}
		for _, x := range turn.LLM {
			if p.Events[x].Turn != i+1 {
				t.Errorf("%s: turn %d lists exchange %d, of turn %d", name, i+1, x, p.Events[x].Turn)
			}
		}
	}
	for _, tool := range p.Tools {
		if tool.Result < 0 {
			continue
		}
		// The tool call's last update may come later (the test agent's
		// concurrent updates send it late), its first event not.
		if first := tool.Events[0]; tool.Result < first || tool.Result < tool.Cause {
			t.Errorf("%s: tool %s's result is carried by event %d, before the tool's first event %d or the exchange that asked for it, %d", name, tool.ID, tool.Result, first, tool.Cause)
		}
		if !bytes.Contains(p.Events[tool.Result].Exchange.RequestBody, []byte(`"role":"tool"`)) {
			t.Errorf("%s: tool %s's result is carried by event %d, whose request holds no tool result", name, tool.ID, tool.Result)
		}
	}
}

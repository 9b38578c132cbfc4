package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acptap/acptap/store"
)

// trialsEnv sets the number of TestRecordSIGKILLTrials's trials:
// scripts/sigkill-trials runs 100; the normal suite a few.
const trialsEnv = "ACPTAP_SIGKILL_TRIALS"

// busyAgent echoes its stdin lines to stdout as fast as they come, like
// cat, while it makes streaming chat completion requests to
// $OPENAI_BASE_URL one after another, until stdin ends.
func busyAgent() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"go on"}]}`
		for {
			select {
			case <-done:
				return
			default:
			}
			resp, err := http.Post(os.Getenv("OPENAI_BASE_URL")+"/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				return // the tap is gone
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	for {
		line, err := in.ReadSlice('\n')
		if len(line) > 0 {
			if _, werr := out.Write(line); werr != nil {
				os.Exit(1)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if in.Buffered() == 0 || err != nil {
			if out.Flush() != nil {
				os.Exit(1)
			}
		}
		if err != nil {
			break
		}
	}
	close(done)
	wg.Wait()
	os.Exit(0)
}

// streamingUpstream streams every chat completion as 30 chunks 1ms apart,
// counting the requests of each recording by the last element of the
// base URL's path.
func streamingUpstream(t *testing.T) (*httptest.Server, func(name string) int) {
	var mu sync.Mutex
	counts := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/"), "/chat/completions")
		mu.Lock()
		counts[name]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := range 30 {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok%d \"}}]}\n\n", i)
			f.Flush()
			time.Sleep(time.Millisecond)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return counts[name]
	}
}

// busyRecording is acptap record of busyagent, fed lines at full speed.
type busyRecording struct {
	name    string
	cmd     *exec.Cmd
	stop    chan struct{} // closed to stop feeding
	echoed  chan struct{} // closed when the first echo arrives: the agent runs
	fed     sync.WaitGroup
	sent    []string    // lines written to acptap's stdin, when fed is done
	echoes  []string    // lines read from acptap's stdout, when fed is done
	partial bool        // the last of echoes came without its newline: acptap died in the middle of it
	arrived []time.Time // when each echo was read
}

func startBusy(t *testing.T, db, upstream, name string) *busyRecording {
	t.Helper()
	cmd := exec.Command("acptap", "record", "--store", db, "--name", name, "--grace", "5s",
		"--no-proxy-env", "--base-url", "OPENAI_BASE_URL="+upstream+"/v1/"+name, "--", "busyagent")
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
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	b := &busyRecording{name: name, cmd: cmd, stop: make(chan struct{}), echoed: make(chan struct{})}
	b.fed.Go(func() {
		w := bufio.NewWriterSize(stdin, 4096)
		for i := 0; ; i++ {
			select {
			case <-b.stop:
				w.Flush()
				stdin.Close()
				return
			default:
			}
			l := fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"rec":%q,"i":%d,"pad":"%s"}}`, name, i, strings.Repeat("y", i%211))
			if _, err := w.WriteString(l + "\n"); err != nil {
				stdin.Close()
				return // acptap is gone
			}
			b.sent = append(b.sent, l)
		}
	})
	b.fed.Go(func() {
		r := bufio.NewReaderSize(stdout, 64<<10)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				if l != "" {
					// The agent, or acptap, died in the middle of a
					// line.
					b.echoes = append(b.echoes, l)
					b.arrived = append(b.arrived, time.Now())
					b.partial = true
				}
				return
			}
			b.echoes = append(b.echoes, strings.TrimSuffix(l, "\n"))
			b.arrived = append(b.arrived, time.Now())
			if len(b.echoes) == 1 {
				close(b.echoed)
			}
		}
	})
	return b
}

// trialLoss is what a killed recording lacks of what its agent wrote.
type trialLoss struct {
	frames int           // agent lines the editor got that the store lacks
	window time.Duration // from the arrival of the last agent line the store has to the kill
}

// TestRecordSIGKILLTrials kills one of two busy recorders writing one
// store at a random moment, trial after trial, into the same store: the
// store opens every time; the killed recording is listed as interrupted
// and holds a gapless prefix of each lane; the other recording is
// complete; and no recording of an earlier trial changed.
func TestRecordSIGKILLTrials(t *testing.T) {
	trials := 4
	if s := os.Getenv(trialsEnv); s != "" {
		var err error
		if trials, err = strconv.Atoi(s); err != nil {
			t.Fatalf("%s=%q: %v", trialsEnv, s, err)
		}
	}
	db := filepath.Join(t.TempDir(), "s.db")
	up, requests := streamingUpstream(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	digests := map[string]string{} // recording -> its show --json, as its trial left it
	var metas map[string]string    // recording -> its line of show --json, as the last trial left it
	var losses []trialLoss
	opened := 0
	for trial := range trials {
		a := startBusy(t, db, up.URL, fmt.Sprintf("t%03d-a", trial))
		b := startBusy(t, db, up.URL, fmt.Sprintf("t%03d-b", trial))
		killed, kept := a, b
		if trial%2 == 1 {
			killed, kept = b, a
		}
		// A random moment once both agents run.
		for _, r := range []*busyRecording{a, b} {
			select {
			case <-r.echoed:
			case <-time.After(time.Minute):
				t.Fatalf("trial %d: %s echoed nothing in a minute", trial, r.name)
			}
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killedAt := time.Now()
		killed.cmd.Wait()
		close(killed.stop)
		killed.fed.Wait()
		close(kept.stop)
		kept.fed.Wait()
		if err := kept.cmd.Wait(); err != nil {
			t.Fatalf("trial %d: %s: %v", trial, kept.name, err)
		}

		st, err := store.Open(db, &store.Options{ReadOnly: true})
		if err != nil {
			t.Errorf("trial %d: the store does not open after SIGKILL: %v", trial, err)
			continue
		}
		opened++
		st.Close()
		states := listState(t, db)
		// The kernel drops the live lock when the last descriptor of
		// it closes: a SIGKILL that lands while acptap forks its agent
		// leaves a copy in the child until the child dies, a moment
		// later.
		for wait := 0; states[killed.name] == "recording" && wait < 100; wait++ {
			time.Sleep(10 * time.Millisecond)
			states = listState(t, db)
			if states[killed.name] != "recording" {
				t.Logf("trial %d: %s listed as interrupted %d ms after acptap's death", trial, killed.name, 10*(wait+1))
			}
		}
		if _, ok := states[killed.name]; !ok {
			// Killed before it created its recording: nothing to check
			// of it but that the store holds no part of it.
			t.Logf("trial %d: %s killed before it created its recording", trial, killed.name)
			killed.name = ""
		}
		if killed.name != "" && states[killed.name] != "interrupted" || states[kept.name] != "done" {
			t.Errorf("trial %d: states %s=%s %s=%s, want interrupted and done", trial, killed.name, states[killed.name], kept.name, states[kept.name])
		}

		// The kept recording: every line both ways, every exchange.
		events := showJSON(t, db, kept.name)
		if got := laneData(t, events, "editor"); !slices.Equal(got, kept.sent) {
			t.Errorf("trial %d: %s: editor lane has %d frames, sent %d", trial, kept.name, len(got), len(kept.sent))
		}
		if got := laneData(t, events, "agent"); !slices.Equal(got, kept.echoes) {
			t.Errorf("trial %d: %s: agent lane has %d frames, the editor got %d", trial, kept.name, len(got), len(kept.echoes))
		}
		if got, want := laneCount(events, "llm"), requests(kept.name); got != want || got == 0 {
			t.Errorf("trial %d: %s: %d exchanges recorded, the upstream answered %d", trial, kept.name, got, want)
		}

		if killed.name == "" {
			checkUnchanged(t, db, trial, metas)
			metas = listMeta(t, db)
			digests[kept.name] = showDigest(t, db, kept.name)
			continue
		}

		// The killed one: a prefix of each lane, in seq order.
		events = showJSON(t, db, killed.name)
		editor, agent := laneData(t, events, "editor"), laneData(t, events, "agent")
		if len(editor) > len(killed.sent) || !slices.Equal(editor, killed.sent[:len(editor)]) {
			t.Errorf("trial %d: %s: the %d editor frames are not a prefix of the %d lines sent", trial, killed.name, len(editor), len(killed.sent))
		}
		// The editor may have read fewer lines than the agent wrote (and
		// the store has), never different ones. A line the editor got
		// part of, as acptap died forwarding it, is the agent's whole.
		echoes := killed.echoes
		if killed.partial {
			echoes = echoes[:len(echoes)-1]
		}
		n := min(len(agent), len(echoes))
		if i := firstDiff(agent[:n], echoes[:n]); i >= 0 {
			t.Errorf("trial %d: %s: agent frame %d = %.80q, the editor got %.80q", trial, killed.name, i, agent[i], echoes[i])
		}
		if len(agent) > len(killed.sent) {
			t.Errorf("trial %d: %s: %d agent frames, %d lines sent", trial, killed.name, len(agent), len(killed.sent))
		} else if i := firstDiff(agent, killed.sent[:len(agent)]); i >= 0 {
			t.Errorf("trial %d: %s: agent frame %d = %.80q, sent %.80q", trial, killed.name, i, agent[i], killed.sent[i])
		}
		for i := 1; i < len(events); i++ {
			if events[i].Seq <= events[i-1].Seq {
				t.Errorf("trial %d: %s: seq %d after %d", trial, killed.name, events[i].Seq, events[i-1].Seq)
			}
		}
		loss := trialLoss{frames: max(len(echoes)-len(agent), 0)}
		if len(agent) > 0 && len(agent) <= len(killed.arrived) {
			loss.window = killedAt.Sub(killed.arrived[len(agent)-1])
		} else if len(agent) == 0 {
			loss.window = -1 // nothing committed to measure from
		}
		losses = append(losses, loss)
		t.Logf("trial %d: killed %s after %d agent lines reached the editor; the store has %d (lost %d, the last %.1f ms before the kill), %d exchanges; %s complete with %d frames",
			trial, killed.name, len(killed.echoes), len(agent), loss.frames, float64(loss.window.Microseconds())/1000, laneCount(events, "llm"), kept.name, len(kept.sent)+len(kept.echoes))

		// No other recording changed: their metadata now, their events
		// at the end.
		checkUnchanged(t, db, trial, metas)
		metas = listMeta(t, db)
		digests[killed.name] = showDigest(t, db, killed.name)
		digests[kept.name] = showDigest(t, db, kept.name)
	}
	for name, want := range digests {
		if got := showDigest(t, db, name); got != want {
			t.Errorf("after the trials: recording %s changed after its trial", name)
		}
	}
	summarizeLosses(t, trials, opened, losses)
}

// listMeta returns show --json's line of each recording.
func listMeta(t *testing.T, db string) map[string]string {
	t.Helper()
	out, errOut, code := run(t, "show", "--store", db, "--json")
	if code != 0 {
		t.Fatalf("show --json: exit %d: %s", code, errOut)
	}
	metas := map[string]string{}
	for _, l := range strings.SplitAfter(out, "\n") {
		if name, ok := strings.CutPrefix(l, `{"name":"`); ok {
			name, _, _ = strings.Cut(name, `"`)
			metas[name] = l
		}
	}
	return metas
}

// checkUnchanged checks that the recordings of metas are listed as they
// were.
func checkUnchanged(t *testing.T, db string, trial int, metas map[string]string) {
	t.Helper()
	now := listMeta(t, db)
	for name, want := range metas {
		if now[name] != want {
			t.Errorf("trial %d: recording %s of an earlier trial changed: %s, was %s", trial, name, now[name], want)
		}
	}
}

// firstDiff returns the first index where a and b, of one length, differ,
// or -1.
func firstDiff(a, b []string) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func laneCount(events []showEvent, name string) int {
	n := 0
	for _, e := range events {
		if e.Lane == name {
			n++
		}
	}
	return n
}

// showDigest is show --json of a recording.
func showDigest(t *testing.T, db, name string) string {
	t.Helper()
	out, errOut, code := run(t, "show", "--store", db, "--json", name)
	if code != 0 {
		t.Fatalf("show --json %s: exit %d: %s", name, code, errOut)
	}
	return out
}

// summarizeLosses logs the loss window over the trials, for
// scripts/sigkill-trials and docs/recording.md.
func summarizeLosses(t *testing.T, trials, opened int, losses []trialLoss) {
	frames := make([]int, 0, len(losses))
	var windows []time.Duration
	for _, l := range losses {
		frames = append(frames, l.frames)
		if l.window >= 0 {
			windows = append(windows, l.window)
		}
	}
	slices.Sort(frames)
	slices.Sort(windows)
	if len(frames) == 0 || len(windows) == 0 {
		return
	}
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) }
	t.Logf("SUMMARY %d trials: store opened %d/%d; agent lines lost per kill: median %d, max %d; last committed line before the kill: median %s ms, max %s ms",
		trials, opened, trials, frames[len(frames)/2], frames[len(frames)-1], ms(windows[len(windows)/2]), ms(windows[len(windows)-1]))
}

// TestRecordSIGTERMCommitsAll stops a busy recording with SIGTERM, which
// acptap passes on to its agent: the recording is done and holds every
// line the agent wrote and every exchange the upstream answered, while a
// second recorder goes on into the same store.
func TestRecordSIGTERMCommitsAll(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	up, requests := streamingUpstream(t)
	stopped := startBusy(t, db, up.URL, "stopped")
	other := startBusy(t, db, up.URL, "other")
	// Traffic first: a SIGTERM before acptap has started recording (its
	// handlers not yet installed, under load) tests nothing of this.
	for _, b := range []*busyRecording{stopped, other} {
		select {
		case <-b.echoed:
		case <-time.After(time.Minute):
			t.Fatalf("%s echoed nothing in a minute", b.name)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if err := stopped.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := stopped.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGTERM) && ee.ExitCode() != 128+int(syscall.SIGPIPE) {
		t.Errorf("acptap record after SIGTERM: %v, want the agent's death by signal", err)
	}
	close(stopped.stop)
	stopped.fed.Wait()
	close(other.stop)
	other.fed.Wait()
	if err := other.cmd.Wait(); err != nil {
		t.Fatalf("the other recorder: %v", err)
	}
	if got := listState(t, db); got["stopped"] != "done" || got["other"] != "done" {
		t.Errorf("states = %v, want both done", got)
	}
	for _, b := range []*busyRecording{stopped, other} {
		events := showJSON(t, db, b.name)
		if got := laneData(t, events, "agent"); !slices.Equal(got, b.echoes) {
			t.Errorf("%s: agent lane has %d frames, the editor got %d from the agent", b.name, len(got), len(b.echoes))
		}
		// The last frame of the editor's lane may be the part of a line
		// acptap had read when the agent died.
		editor := laneData(t, events, "editor")
		if n := len(editor); n > 0 && n <= len(b.sent) && editor[n-1] != b.sent[n-1] && strings.HasPrefix(b.sent[n-1], editor[n-1]) {
			editor[n-1] = b.sent[n-1]
		}
		if len(editor) < len(b.echoes) || len(editor) > len(b.sent) || !slices.Equal(editor, b.sent[:len(editor)]) {
			t.Errorf("%s: editor lane has %d frames, not a prefix of the %d sent holding the %d echoed", b.name, len(editor), len(b.sent), len(b.echoes))
		}
		if got, want := laneCount(events, "llm"), requests(b.name); got != want || got == 0 {
			t.Errorf("%s: %d exchanges recorded, the upstream answered %d", b.name, got, want)
		}
		t.Logf("%s: %d lines sent, %d echoed, all recorded", b.name, len(b.sent), len(b.echoes))
	}
}

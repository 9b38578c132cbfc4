package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/browsertest"
	"github.com/acptap/acptap/store"
)

// startLive starts acptap show --html --follow with args and returns it
// and the URL it printed.
func startLive(t *testing.T, env []string, args ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command("acptap", append([]string{"show", "--html", "--follow"}, args...)...)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("show --html --follow printed %q: %v; stderr %q", line, err, stderr.String())
	}
	u := strings.TrimSpace(line)
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/[0-9a-f]{32}/$`).MatchString(u) {
		t.Fatalf("show --html --follow printed %q, want the page's URL on 127.0.0.1", u)
	}
	go io.Copy(io.Discard, stdout)
	return cmd, u, &stderr
}

// waitExit waits for cmd to exit, at most d.
func waitExit(t *testing.T, cmd *exec.Cmd, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v still runs after %v", cmd.Args, d)
		return nil
	}
}

// checkClosed checks that nothing listens at u's address any more.
func checkClosed(t *testing.T, u string) {
	t.Helper()
	pu, _ := url.Parse(u)
	if c, err := net.DialTimeout("tcp", pu.Host, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still listens after show ended", pu.Host)
	}
}

// until evaluates a JavaScript condition in the page until it holds,
// for at most 30 seconds.
func until(t *testing.T, pg *browsertest.Page, cond string) {
	t.Helper()
	ok := browsertest.Eval[bool](pg, `new Promise(done => { const end = Date.now() + 30000; const poll = () => { let v = false; try { v = !!(`+cond+`); } catch (e) {} if (v) done(true); else if (Date.now() > end) done(false); else setTimeout(poll, 25); }; poll(); })`)
	if !ok {
		t.Fatalf("the page never came to %s", cond)
	}
}

// TestShowHTMLFollowInBrowser: show --html --follow serves the page of a
// recording in progress on 127.0.0.1 and prints its URL; an LLM exchange
// that ends after the page opened comes into it without a reload, the
// selection kept; when the recording ends the page says so and is
// complete, and show exits, its port closed.
func TestShowHTMLFollowInBrowser(t *testing.T) {
	browsertest.Require(t)
	body := chatSSE(t)
	release := make(chan struct{})
	var n atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		// The second turn's answer waits for the test: the page is open
		// before that exchange ends.
		if n.Add(1) == 2 {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	t.Cleanup(upstream.Close)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	rec := exec.Command("testeditor", "--prompt", "first", "--prompt", "second", "--", "acptap", "record", "--store", db, "--name", "live",
		"--no-proxy-env", "--base-url", "OPENAI_BASE_URL="+upstream.URL+"/v1", "--", "testagent")
	rec.Dir, rec.Env = dir, agentEnv()
	var recOut bytes.Buffer
	rec.Stdout, rec.Stderr = &recOut, &recOut
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if rec.ProcessState == nil {
			rec.Process.Kill()
			rec.Wait()
		}
	})
	waitLive(t, db, "live")
	tmp := t.TempDir()
	show, u, stderr := startLive(t, agentEnv("TMPDIR="+tmp), "--store", db, "live")
	pg := browsertest.OpenURL(t, u)
	until(t, pg, `[...document.querySelectorAll('#spacer .row[data-lane=llm] b')].some(b => b.textContent === 'llm #1')`)
	if n := browsertest.Eval[int](pg, `[...document.querySelectorAll('#spacer .row[data-lane=llm] b')].filter(b => b.textContent === 'llm #2').length`); n != 0 {
		t.Fatalf("llm #2 is on the page before its exchange ended")
	}
	if s := browsertest.Eval[string](pg, `document.getElementById('live-status').textContent`); !strings.Contains(s, "Live") {
		t.Errorf("the live page says %q", s)
	}
	// The first prompt selected; a reload would forget the marker.
	prompt := browsertest.Eval[string](pg, `(() => { window.notReloaded = true; const r = document.querySelector('#spacer .row[data-lane=editor]:nth-child(3)') || document.querySelector('#spacer .row[data-lane=editor]'); r.click(); return document.querySelector('#detail h2').textContent; })()`)

	released = true
	close(release)
	until(t, pg, `/ended/.test(document.getElementById('live-status').textContent)`)
	if !browsertest.Eval[bool](pg, `window.notReloaded === true`) {
		t.Errorf("the page reloaded")
	}
	if n := browsertest.Eval[int](pg, `[...document.querySelectorAll('#spacer .row[data-lane=llm] b')].filter(b => b.textContent === 'llm #2').length`); n != 1 {
		t.Errorf("the second exchange is not on the page")
	}
	if got := browsertest.Eval[string](pg, `document.querySelector('#detail h2').textContent`); got != prompt {
		t.Errorf("the detail shows %q after the update, want the row selected before, %q", got, prompt)
	}
	if info := browsertest.Eval[string](pg, `document.querySelector('header').innerText`); !strings.Contains(info, "exit 0") {
		t.Errorf("the header of the ended recording says\n%s", info)
	}
	if err := rec.Wait(); err != nil {
		t.Fatalf("the recording: %v\n%s", err, recOut.String())
	}
	if err := waitExit(t, show, 10*time.Second); err != nil {
		t.Errorf("show --html --follow: %v; stderr %q", err, stderr.String())
	}
	checkClosed(t, u)
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("show left %v in the temp directory", left)
	}
	// The page, once served, has the recording's page: as show --html's.
	want, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "--html", "live")
	got := browsertest.Eval[string](pg, `JSON.stringify(JSON.parse(document.getElementById('acptap-data').textContent).title)`)
	if !strings.Contains(want, `"title":`+got) {
		t.Errorf("the live page's title %s is not the recording's", got)
	}
}

// waitLive waits until recording name of the store at path is being
// recorded.
func waitLive(t *testing.T, path, name string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if st, err := store.Open(path, &store.Options{ReadOnly: true}); err == nil {
			rec, err := st.Get(name)
			st.Close()
			if err == nil && (rec.Live || rec.Done) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in %s is not being recorded after a minute", name, path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShowHTMLFollowKeepsView: --open opens the live page; as frames
// come into it, a view scrolled into the rows stays on the rows it shows,
// and a view at the end follows the end; SIGINT stops show, its port
// closed.
func TestShowHTMLFollowKeepsView(t *testing.T) {
	browsertest.Require(t)
	db := filepath.Join(t.TempDir(), "s.db")
	rec, stdin, stdout := startRecording(t, db, "cat")
	lines := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf(`{"jsonrpc":"2.0","method":"note/%d","params":{}}`, i))
		}
		return out
	}
	pumpLines(t, stdin, stdout, lines(0, 150))
	pathEnv, opened := fakeOpener(t)
	show, u, _ := startLive(t, agentEnv(pathEnv), "--open", "--store", db, "cat")
	// The URL is printed first, then opened.
	var got []byte
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && len(got) == 0; time.Sleep(10 * time.Millisecond) {
		got, _ = os.ReadFile(opened)
	}
	if string(got) != u+"\n" {
		t.Errorf("--open opened %q, want the page's URL %q", got, u)
	}
	pg := browsertest.OpenURL(t, u)
	// Each line is two rows: the editor's and the agent's echo.
	rowCount := func(n int) string {
		return fmt.Sprintf(`document.getElementById('count').textContent.startsWith('%d rows')`, n)
	}
	until(t, pg, rowCount(300))
	type view struct {
		Top    float64
		TopSeq int
		Sel    string
	}
	look := `(() => { const l = document.getElementById('list'), r = [...document.querySelectorAll('#spacer .row')].find(r => r.getBoundingClientRect().top >= l.getBoundingClientRect().top); const d = document.querySelector('#detail h2'); return {Top: l.scrollTop, TopSeq: +r.querySelector('.n').textContent, Sel: d ? d.textContent : ''}; })()`
	browsertest.Eval[bool](pg, `new Promise(done => { window.notReloaded = true; document.getElementById('list').scrollTop = 40 * 22; const poll = () => { const r = document.querySelector('#spacer .row[data-r="45"]'); if (r) { r.click(); done(true); } else setTimeout(poll, 20); }; poll(); })`)
	was := browsertest.Eval[view](pg, look)
	pumpLines(t, stdin, stdout, lines(150, 200))
	until(t, pg, rowCount(400))
	now := browsertest.Eval[view](pg, look)
	if now != was {
		t.Errorf("the view moved as rows came: %+v, was %+v", now, was)
	}
	// At the end, the view follows the end.
	browsertest.Eval[bool](pg, `new Promise(done => { const l = document.getElementById('list'); l.scrollTop = l.scrollHeight; setTimeout(() => done(true), 50); })`)
	pumpLines(t, stdin, stdout, lines(200, 210))
	until(t, pg, rowCount(420))
	if !browsertest.Eval[bool](pg, `(() => { const l = document.getElementById('list'); return l.scrollTop + l.clientHeight >= l.scrollHeight - 22; })()`) {
		t.Errorf("a view at the end stayed behind as rows came")
	}
	if !browsertest.Eval[bool](pg, `window.notReloaded === true`) {
		t.Errorf("the page reloaded")
	}
	// The page closed first: one whose server went away says so, which
	// a browser logs as a failed request.
	pg.Close()
	show.Process.Signal(os.Interrupt)
	err := waitExit(t, show, 5*time.Second)
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
		t.Errorf("show --html --follow after SIGINT: %v, want killed by SIGINT", err)
	}
	checkClosed(t, u)
	stdin.Close()
	rec.Wait()
}

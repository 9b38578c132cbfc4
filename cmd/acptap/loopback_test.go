package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/store"
)

// localLLM is an OpenAI endpoint on 127.0.0.1, as a local Ollama or LM
// Studio is, which streams the captured answer an event every 20 ms, as
// an LLM does.
func localLLM(t *testing.T) (srv *httptest.Server, port string) {
	t.Helper()
	events := bytes.SplitAfter(chatSSE(t), []byte("\n\n"))
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			w.Write(e)
			w.(http.Flusher).Flush()
			time.Sleep(20 * time.Millisecond)
		}
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return srv, u.Port()
}

// recordTwoPrompts records the test agent, driven by the scripted editor with
// two prompts, in dir, and returns acptap's stderr (and the agent's).
func recordTwoPrompts(t *testing.T, dir string, env []string, recordArgs []string, agentArgs ...string) string {
	t.Helper()
	args := append([]string{"--prompt", "hello", "--prompt", "again", "--", "acptap", "record"}, recordArgs...)
	args = append(append(args, "--", "testagent"), agentArgs...)
	cmd := exec.Command("testeditor", args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("testeditor %v: %v\nstderr:\n%s", args, err, stderr.String())
	}
	return stderr.String()
}

// listedLoopback returns the loopback of recording name in show --json's
// list.
func listedLoopback(t *testing.T, db, name string) *store.Loopback {
	t.Helper()
	out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "show", "--store", db, "--json")
	if code != 0 {
		t.Fatalf("show --json: exit %d: %s", code, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			Name     string          `json:"name"`
			Loopback *store.Loopback `json:"loopback"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("show --json line %q: %v", line, err)
		}
		if r.Name == name {
			return r.Loopback
		}
	}
	t.Fatalf("show --json lists no %s:\n%s", name, out)
	return nil
}

// TestRecordLoopbackLLM records an agent whose LLM is on loopback, which
// goes around the tap, without --base-url: the recording has no LLM
// exchange, and acptap says so at its end, in show's header and before a
// replay, naming the LLM's port (not the port of the agent's own server,
// which it calls too) and the fix: --base-url with the variable that
// holds the LLM's URL, else --proxy-loopback. Recorded again with that
// fix, the LLM is recorded and nothing is said.
func TestRecordLoopbackLLM(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the agent's sockets are watched on Linux")
	}
	llm, port := localLLM(t)
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	own := []string{"--own-server", "127.0.0.1:0"}
	cases := []struct {
		name      string
		env       []string // the agent's, besides agentEnv's
		agentArgs []string
		fix       string // the notice's fix
		fixFlags  []string
	}{
		{
			name:      "by-variable",
			env:       []string{"OPENAI_BASE_URL=" + llm.URL + "/v1"},
			agentArgs: own,
			fix:       "--base-url OPENAI_BASE_URL (OPENAI_BASE_URL holds its URL)",
			fixFlags:  []string{"--base-url", "OPENAI_BASE_URL"},
		},
		{
			name: "by-flag",
			// The URL is on the agent's command line: no variable
			// names it.
			agentArgs: append([]string{"--llm", llm.URL + "/v1"}, own...),
			fix:       "--proxy-loopback",
			fixFlags:  []string{"--proxy-loopback"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := agentEnv(append([]string{"OPENAI_API_KEY=sk-test-0123456789"}, c.env...)...)
			stderr := recordTwoPrompts(t, dir, env, []string{"--store", db, "--name", c.name}, c.agentArgs...)
			notice := fmt.Sprintf("no LLM exchange, but the agent connected to loopback port %s, which went around the tap: if that is its LLM, record it with %s", port, c.fix)
			if want := fmt.Sprintf("acptap: recording %q has %s\n", c.name, notice); strings.Count(stderr, want) != 1 || strings.Count(stderr, "LLM exchange") != 1 {
				t.Errorf("record's stderr:\n%s\nwant once: %s", stderr, want)
			}
			if n := llmClassCount(t, db, c.name); n != 0 {
				t.Fatalf("%d LLM exchanges recorded around the tap", n)
			}
			l := listedLoopback(t, db, c.name)
			if l == nil || len(l.Ports) != 1 || fmt.Sprint(l.Ports[0].Port) != port || len(l.Own) != 1 || fmt.Sprint(l.Own[0]) == port {
				t.Errorf("show --json's loopback: %+v, want the LLM's port %s and one port of the agent's own server", l, port)
			}
			out, _, code := runAcptap(t, dir, agentEnv(), "show", "--store", db, c.name)
			if code != 0 || !strings.Contains(out, "\n  "+notice+"\n") {
				t.Errorf("show's header (exit %d) lacks the notice:\n%s", code, out)
			}

			// Before the replay runs, acptap says the same (where the
			// agent's LLM calls fail, or reach the live LLM, as this
			// one's given its URL on its command line does).
			out, errOut, _ := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, c.name)
			if want := fmt.Sprintf("acptap: replay %s: the recording has %s\n", c.name, notice); !strings.HasPrefix(errOut, want) {
				t.Errorf("replay's stderr:\n%s\nwant first: %s\nstdout:\n%s", errOut, want, out)
			}

			// The fix records the LLM, and nothing is said.
			fixed := c.name + "-fixed"
			stderr = recordTwoPrompts(t, dir, env, append([]string{"--store", db, "--name", fixed}, c.fixFlags...), c.agentArgs...)
			if strings.Contains(stderr, "LLM exchange") {
				t.Errorf("record %v says:\n%s", c.fixFlags, stderr)
			}
			if n := llmClassCount(t, db, fixed); n != 2 {
				t.Errorf("record %v: %d LLM exchanges, want the 2 turns'", c.fixFlags, n)
			}
			out, _, _ = runAcptap(t, dir, agentEnv(), "show", "--store", db, fixed)
			if strings.Contains(out, "no LLM exchange") {
				t.Errorf("show of %s:\n%s", fixed, out)
			}
		})
	}
}

// TestRecordOwnServerNotLLM records an agent whose only loopback traffic
// is with its own server: the watch sees the connections, and says
// nothing of an LLM at the end of the recording, in show's header or
// before a replay.
func TestRecordOwnServerNotLLM(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the agent's sockets are watched on Linux")
	}
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	// A turn takes a while: one byte every 10 ms.
	stderr := recordTwoPrompts(t, dir, agentEnv(), []string{"--store", db, "--name", "own"},
		"--own-server", "127.0.0.1:0", "--chunk-size", "1", "--chunk-delay", "10ms")
	if strings.Contains(stderr, "LLM exchange") || strings.Contains(stderr, "loopback port") {
		t.Errorf("record's stderr:\n%s", stderr)
	}
	if l := listedLoopback(t, db, "own"); l == nil || len(l.Own) != 1 || len(l.Ports) != 0 {
		t.Errorf("show --json's loopback: %+v, want the port of the agent's own server alone", l)
	}
	out, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "own")
	if strings.Contains(out, "LLM exchange, but") || strings.Contains(out, "loopback port") {
		t.Errorf("show's header:\n%s", out)
	}
	out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "own")
	if code != 0 || errOut != "" {
		t.Errorf("replay: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// llmClassCount counts the exchanges of class llm of recording name (its
// own server's calls through the proxy are http).
func llmClassCount(t *testing.T, db, name string) int {
	t.Helper()
	n := 0
	for _, e := range llmEvents(t, db, name) {
		if e["class"] == "llm" {
			n++
		}
	}
	return n
}

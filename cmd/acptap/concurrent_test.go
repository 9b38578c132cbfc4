package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// pumpLines writes lines to a recording cat agent at full speed while it
// reads their echoes, and returns the echoes.
func pumpLines(t *testing.T, stdin io.Writer, stdout *bufio.Reader, lines []string) []string {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(stdin)
		for _, l := range lines {
			if _, err := w.WriteString(l + "\n"); err != nil {
				errc <- err
				return
			}
		}
		errc <- w.Flush()
	}()
	var echoes []string
	for range lines {
		l, err := stdout.ReadString('\n')
		if err != nil {
			t.Errorf("echo %d: %v", len(echoes), err)
			break
		}
		echoes = append(echoes, strings.TrimSuffix(l, "\n"))
	}
	if err := <-errc; err != nil {
		t.Error(err)
	}
	return echoes
}

// numbered returns n distinct ACP-like lines of a recording.
func numbered(name string, n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"rec":%q,"i":%d,"pad":"%s"}}`, name, i, strings.Repeat("x", i%97))
	}
	return lines
}

// laneData returns the data of the frames of one lane of show --json.
func laneData(t *testing.T, events []showEvent, name string) []string {
	t.Helper()
	var got []string
	for _, e := range events {
		if e.Lane == name {
			got = append(got, string(e.bytes(t)))
		}
	}
	return got
}

// run runs acptap with args and returns its stdout, stderr and exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runAcptap(t, "", nil, args...)
}

// listState returns the state show --json gives each recording.
func listState(t *testing.T, db string) map[string]string {
	t.Helper()
	out, errOut, code := run(t, "show", "--store", db, "--json")
	if code != 0 {
		t.Fatalf("show --json: exit %d: %s", code, errOut)
	}
	states := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r struct{ Name, State string }
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		states[r.Name] = r.State
	}
	return states
}

// TestEightRecorders records 8 cat agents into one store at once, each
// fed at full speed, and checks every recording complete and intact.
func TestEightRecorders(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	const recorders, n = 8, 2000
	var wg sync.WaitGroup
	for i := range recorders {
		name := fmt.Sprint("rec", i)
		cmd, stdin, stdout := startRecording(t, db, name)
		wg.Go(func() {
			lines := numbered(name, n)
			echoes := pumpLines(t, stdin, stdout, lines)
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if !slices.Equal(echoes, lines) {
				t.Errorf("%s: the agent's output reached the editor changed", name)
			}
		})
	}
	wg.Wait()
	states := listState(t, db)
	for i := range recorders {
		name := fmt.Sprint("rec", i)
		if states[name] != "done" {
			t.Errorf("%s: state %q, want done", name, states[name])
		}
		events := showJSON(t, db, name)
		want := numbered(name, n)
		for _, l := range []string{"editor", "agent"} {
			if got := laneData(t, events, l); !slices.Equal(got, want) {
				t.Errorf("%s: %s lane has %d frames, want the %d sent, in order", name, l, len(got), n)
			}
		}
		for k, e := range events {
			if e.Seq != uint64(k+1) {
				t.Fatalf("%s: event %d has seq %d, want %d", name, k, e.Seq, k+1)
			}
		}
	}
}

// TestWhileRecording checks what works while a recording runs: listing
// it as recording, showing what it committed, recording a second one,
// replaying and deleting other recordings; and what is refused: deleting
// it, or recording over it.
func TestWhileRecording(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "done1", agentEnv(), nil, "--read", "notes.txt")
	recordSession(t, dir, db, "done2", agentEnv(), nil, "--read", "notes.txt")

	holder, stdin, stdout := startRecording(t, db, "holder")
	lines := numbered("holder", 100)
	pumpLines(t, stdin, stdout, lines)
	// A second recording at the same time.
	second, stdin2, stdout2 := startRecording(t, db, "second")
	pumpLines(t, stdin2, stdout2, numbered("second", 10))

	if got := listState(t, db); got["holder"] != "recording" || got["second"] != "recording" || got["done1"] != "done" {
		t.Errorf("states while recording = %v, want holder and second recording, done1 done", got)
	}
	out, errOut, code := run(t, "show", "--store", db)
	if code != 0 || !regexpMatch(`(?m)^holder .* recording$`, out) {
		t.Errorf("show while recording: exit %d, %q %q; want holder listed as recording", code, out, errOut)
	}
	// What the holder's recorder has committed; it commits the first
	// frame at once, and every frame within milliseconds, but show may
	// come first: read until it has them all.
	for {
		got := laneData(t, showJSON(t, db, "holder"), "agent")
		if !slices.Equal(got, lines[:len(got)]) {
			t.Fatalf("show --json holder while recording: agent frames %q are not a prefix of those sent", got)
		}
		if len(got) == len(lines) {
			break
		}
	}
	out, errOut, code = run(t, "show", "--store", db, "holder")
	if code != 0 || !strings.Contains(out, ", recording\n") || !strings.Contains(out, `"i":99`) && !strings.Contains(out, "notify   session/update") {
		t.Errorf("show holder while recording: exit %d, %q %q", code, out, errOut)
	}
	out, errOut, code = runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "done1")
	if code != 0 || !strings.HasPrefix(out, "PASS done1") {
		t.Errorf("replay of another recording while recording: exit %d, %q %q", code, out, errOut)
	}
	if _, errOut, code := run(t, "rm", "--store", db, "done2"); code != 0 {
		t.Errorf("rm of another recording while recording: exit %d, %q", code, errOut)
	}
	for _, args := range [][]string{
		{"rm", "--store", db, "holder"},
		{"rm", "--store", db, "done1", "holder"},
		{"record", "--store", db, "--name", "holder", "--", "cat"},
		{"record", "--store", db, "--name", "holder", "--force", "--", "cat"},
	} {
		out, errOut, code := run(t, args...)
		if code != ExitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "holder") ||
			!strings.Contains(errOut, "being recorded") && !strings.Contains(errOut, "being written") {
			t.Errorf("acptap %v while holder records: exit %d, stdout %q, stderr %q; want exit 2 and one line saying it is being recorded", args, code, out, errOut)
		}
	}
	stdin2.Close()
	stdin.Close()
	for _, c := range []*exec.Cmd{holder, second} {
		if err := c.Wait(); err != nil {
			t.Errorf("%v: %v", c.Args, err)
		}
	}
	got := listState(t, db)
	want := map[string]string{"holder": "done", "second": "done", "done1": "done"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("states after = %v, want %v (done2 deleted, done1 kept by the refused rm)", got, want)
	}
	if got := laneData(t, showJSON(t, db, "holder"), "editor"); !slices.Equal(got, lines) {
		t.Errorf("holder's editor lane after = %d frames, want the %d sent", len(got), len(lines))
	}
}

// followCmd starts acptap show --follow.
func followCmd(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command("acptap", append([]string{"show", "--follow"}, args...)...)
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
		if stderr.Len() > 0 {
			t.Errorf("%v: stderr %q", cmd.Args, stderr.String())
		}
	})
	return cmd, bufio.NewReader(stdout)
}

// readUntil reads lines until one contains want, and returns them all.
func readUntil(t *testing.T, r *bufio.Reader, want string) []string {
	t.Helper()
	var lines []string
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading until %q: %v after %q", want, err, lines)
		}
		lines = append(lines, l)
		if strings.Contains(l, want) {
			return lines
		}
	}
}

// TestShowFollow follows a live recording, in text and JSON: a frame the
// agent writes after show --follow started is printed, and show returns
// when the recording ends; following a finished recording prints it as
// show does and returns.
func TestShowFollow(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprint("json=", asJSON), func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.db")
			rec, stdin, stdout := startRecording(t, db, "live")
			pumpLines(t, stdin, stdout, []string{`{"jsonrpc":"2.0","method":"before"}`})
			args := []string{"--store", db, "live"}
			if asJSON {
				args = append([]string{"--json"}, args...)
			}
			follow, fout := followCmd(t, args...)
			before := readUntil(t, fout, "before")
			pumpLines(t, stdin, stdout, []string{`{"jsonrpc":"2.0","method":"after"}`})
			after := readUntil(t, fout, "after")
			stdin.Close()
			if err := rec.Wait(); err != nil {
				t.Fatal(err)
			}
			rest, err := io.ReadAll(fout)
			if err != nil {
				t.Fatal(err)
			}
			if err := follow.Wait(); err != nil {
				t.Fatalf("show --follow after the recording ended: %v", err)
			}
			all := strings.Join(before, "") + strings.Join(after, "")
			if asJSON {
				for _, l := range append(append(before, after...), strings.SplitAfter(string(rest), "\n")...) {
					var e showEvent
					if l != "" && json.Unmarshal([]byte(l), &e) != nil {
						t.Errorf("show --follow --json printed %q, not a JSON event", l)
					}
				}
			} else {
				if !strings.HasPrefix(all, "recording live: cat\n") || !strings.Contains(all, ", recording\n") {
					t.Errorf("show --follow printed %q, want the header of a recording being recorded", all)
				}
				if !strings.Contains(string(rest), "recording live ended: 4 frames, 0 LLM exchanges") || !strings.HasSuffix(string(rest), "exit 0\n") {
					t.Errorf("show --follow ended with %q, want the end of the recording", rest)
				}
			}
			// A finished recording: as show prints it.
			want, _, _ := run(t, append([]string{"show"}, args...)...)
			got, errOut, code := run(t, append([]string{"show", "--follow"}, args...)...)
			if code != 0 || got != want {
				t.Errorf("show --follow of a finished recording: exit %d, %q\n%q\nwant as show:\n%q", code, errOut, got, want)
			}
		})
	}
}

func regexpMatch(re, s string) bool {
	return regexp.MustCompile(re).MatchString(s)
}

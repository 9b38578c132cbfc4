package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/store"
)

// showEvent is the part of a `show --json` line the tests read.
type showEvent struct {
	Seq       uint64  `json:"seq"`
	TMs       int64   `json:"t_ms"`
	Lane      string  `json:"lane"`
	Raw       *string `json:"raw"`
	RawB64    string  `json:"raw_b64"`
	Newline   *bool   `json:"newline"`
	Continued bool    `json:"continued"`
	Method    string  `json:"method"`
	Server    string  `json:"server"` // of an MCP server's line or exchange
	Dir       string  `json:"dir"`
	Class     string  `json:"class"` // of an exchange
	Status    int     `json:"status"`
	Error     string  `json:"error"`
	Summary   string  `json:"summary"` // of an MCP server's exchange
}

func (e showEvent) bytes(t *testing.T) []byte {
	t.Helper()
	if e.Raw != nil {
		return []byte(*e.Raw)
	}
	b, err := base64.StdEncoding.DecodeString(e.RawB64)
	if err != nil {
		t.Fatalf("event %d: raw_b64: %v", e.Seq, err)
	}
	return b
}

// showJSON runs `acptap show --json NAME` as a real process.
func showJSON(t *testing.T, db, name string) []showEvent {
	t.Helper()
	return showJSONOf(t, "acptap", db, name)
}

// showJSONOf is showJSON with the acptap binary bin.
func showJSONOf(t *testing.T, bin, db, name string) []showEvent {
	t.Helper()
	cmd := exec.Command(bin, "show", "--store", db, "--json", name)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("acptap show --json %s: %v: %s", name, err, stderr.String())
	}
	var events []showEvent
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 256<<20)
	for sc.Scan() {
		var e showEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("show --json line %q: %v", truncate(sc.Text(), 200), err)
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}

// laneBytes reassembles the bytes of one lane from its frames.
func laneBytes(t *testing.T, events []showEvent, lane string) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, e := range events {
		if e.Lane != lane {
			continue
		}
		b.Write(e.bytes(t))
		if !e.Continued && (e.Newline == nil || *e.Newline) {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// TestRecordPassesBytesThroughAndShowsThem runs acptap built without the
// race detector: instrumented, its 64 MiB through record and then show
// took 50 to 75 s of the suite's CPU, where the rest of the suite watches
// the same paths for races with lines of kilobytes to megabytes
// (TestExportImportRawBytes: 2 MiB).
func TestRecordPassesBytesThroughAndShowsThem(t *testing.T) {
	acptap := buildAcptap(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	// Its big frame is longer than stdiotap.MaxRewrite and a store
	// commit (32 MiB): held whole nowhere on its way.
	agentOut := tapPayload(1, 32<<20)
	editorIn := tapPayload(2, 32<<20)
	outFile := filepath.Join(dir, "agent-out")
	inFile := filepath.Join(dir, "agent-in")
	if err := os.WriteFile(outFile, agentOut, 0o644); err != nil {
		t.Fatal(err)
	}

	// The agent ends once it has written its output and read all its
	// input, which takes a while on a busy machine: a long grace, so
	// that acptap does not stop it first (exit 143).
	cmd := exec.Command(acptap, "record", "--store", db, "--name", "bytes", "--grace", "1m", "--", "rawagent", outFile, inFile)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		writeChunked(stdin, editorIn, rand.New(rand.NewPCG(3, 4)))
		stdin.Close()
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("acptap record: %v; stderr:\n%s", err, stderr.String())
	}

	if !bytes.Equal(stdout.Bytes(), agentOut) {
		t.Errorf("editor received %d bytes that differ from the %d the agent wrote", stdout.Len(), len(agentOut))
	}
	gotIn, err := os.ReadFile(inFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotIn, editorIn) {
		t.Errorf("agent received %d bytes that differ from the %d the editor wrote", len(gotIn), len(editorIn))
	}
	if !strings.Contains(stderr.String(), "rawagent: wrote stdout") {
		t.Errorf("agent stderr not passed through; stderr = %q", stderr.String())
	}

	events := showJSONOf(t, acptap, db, "bytes")
	for i, e := range events {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d, want %d", i, e.Seq, i+1)
		}
		if i > 0 && e.TMs < events[i-1].TMs && e.Lane == events[i-1].Lane {
			t.Errorf("event %d: t_ms %d goes back from %d in lane %s", e.Seq, e.TMs, events[i-1].TMs, e.Lane)
		}
	}
	if got := laneBytes(t, events, "agent"); !bytes.Equal(got, agentOut) {
		t.Errorf("agent lane of show --json: %d bytes, differs from the %d the agent wrote", len(got), len(agentOut))
	}
	if got := laneBytes(t, events, "editor"); !bytes.Equal(got, editorIn) {
		t.Errorf("editor lane of show --json: %d bytes, differs from the %d the editor wrote", len(got), len(editorIn))
	}
	if got, want := string(laneBytes(t, events, "stderr")), "rawagent: wrote stdout\n"; got != want {
		t.Errorf("stderr lane = %q, want %q", got, want)
	}
	var sawB64, sawNoNewline bool
	for _, e := range events {
		sawB64 = sawB64 || e.RawB64 != ""
		sawNoNewline = sawNoNewline || (e.Newline != nil && !*e.Newline)
	}
	if !sawB64 || !sawNoNewline {
		t.Errorf("show --json: raw_b64 seen %v, newline:false seen %v; want both", sawB64, sawNoNewline)
	}
}

// startRecording starts `acptap record -- cat` as a real process, holding the
// store, and returns once acptap says it is recording.
func startRecording(t *testing.T, db, name string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd, stdin, stdout, _ := startCat(t, db, name)
	return cmd, stdin, stdout
}

// startCat is startRecording with more flags for acptap record, and the
// rest of its stderr.
func startCat(t *testing.T, db, name string, flags ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader, *bufio.Reader) {
	t.Helper()
	args := append([]string{"record", "--store", db, "--name", name, "--grace", "1s"}, flags...)
	cmd := exec.Command("acptap", append(args, "--", "cat")...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	errs := bufio.NewReader(stderr)
	line, err := errs.ReadString('\n')
	if err != nil || !strings.Contains(line, "recording") {
		t.Fatalf("acptap record said %q, %v; want the recording line", line, err)
	}
	return cmd, stdin, bufio.NewReader(stdout), errs
}

func TestRecordSurvivesSIGKILL(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	cmd, stdin, stdout := startRecording(t, db, "killed")
	const n = 200
	var sent []string
	for i := range n {
		line := `{"jsonrpc":"2.0","method":"session/update","params":{"i":` + strings.Repeat("1", i%7+1) + `}}`
		sent = append(sent, line)
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
		echo, err := stdout.ReadString('\n')
		if err != nil || echo != line+"\n" {
			t.Fatalf("echo %d = %q, %v; want %q", i, echo, err, line)
		}
	}
	// Give the writer a moment to commit what it has, then kill acptap
	// without any chance to clean up.
	time.Sleep(500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	st, err := store.Open(db, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	defer st.Close()
	rec, err := st.Get("killed")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Done {
		t.Errorf("recording killed mid-way has Done = true, want false")
	}
	lanes := map[store.Lane][]string{}
	var frames int
	err = st.Events("killed", func(e store.Event) error {
		frames++
		lanes[e.Lane] = append(lanes[e.Lane], string(e.Data))
		return nil
	})
	if err != nil {
		t.Fatalf("events after SIGKILL: %v", err)
	}
	if frames != rec.Frames {
		t.Errorf("metadata counts %d frames, the recording holds %d", rec.Frames, frames)
	}
	if frames == 0 {
		t.Fatalf("no frames survived; want the committed ones")
	}
	for _, lane := range []store.Lane{store.LaneEditor, store.LaneAgent} {
		got := lanes[lane]
		if len(got) > n {
			t.Fatalf("%s lane has %d frames, sent %d", lane, len(got), n)
		}
		for i, l := range got {
			if l != sent[i] {
				t.Fatalf("%s frame %d = %q, want %q", lane, i, l, sent[i])
			}
		}
	}
	out, err := exec.Command("acptap", "show", "--store", db).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "incomplete") {
		t.Errorf("show after SIGKILL = %q, %v; want the recording listed as incomplete", out, err)
	}
}

// TestRecordKeepsCausalOrder checks that a response is never sequenced
// before the request it answers, in either direction, over several real
// sessions with permission requests and file reads.
func TestRecordKeepsCausalOrder(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		name := "causal" + strconv.Itoa(i)
		cmd := exec.Command("testeditor", "--prompt", "one", "--prompt", "two", "--",
			"acptap", "record", "--store", db, "--name", name, "--", "testagent", "--read", "notes.txt", "--string-ids")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("session %d: %v\n%s", i, err, out)
		}
		requested := map[string]map[string]bool{"editor": {}, "agent": {}}
		responses := 0
		for _, e := range showJSON(t, db, name) {
			if e.Lane != "editor" && e.Lane != "agent" {
				continue
			}
			m := acp.Parse(e.bytes(t))
			switch m.Kind {
			case acp.Request:
				requested[e.Lane][acp.IDKey(m.ID)] = true
			case acp.Response, acp.Error:
				other := "agent"
				if e.Lane == "agent" {
					other = "editor"
				}
				if !requested[other][acp.IDKey(m.ID)] {
					t.Errorf("session %d: %s response id %s at seq %d comes before the %s request it answers", i, e.Lane, m.ID, e.Seq, other)
				}
				responses++
			}
		}
		if responses < 8 {
			t.Errorf("session %d: %d responses recorded, want at least 8", i, responses)
		}
	}
}

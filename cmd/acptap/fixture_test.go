package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acptap/acptap/fixture"
	"github.com/acptap/acptap/store"
)

// recordingContents is what a store keeps of a recording.
type recordingContents struct {
	meta   store.Recording
	events []store.Event
	blobs  []fixture.Blob
}

// readRecording reads the named recording of the store file db.
func readRecording(t *testing.T, db, name string) recordingContents {
	t.Helper()
	st, err := store.Open(db, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	src, err := fixture.FromStore(st, name)
	if err != nil {
		t.Fatal(err)
	}
	c := recordingContents{meta: src.Meta()}
	err = src.Events(func(e store.Event) error {
		e.Data = bytes.Clone(e.Data)
		c.events = append(c.events, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.blobs, err = src.Blobs(); err != nil {
		t.Fatal(err)
	}
	return c
}

// sameRecording compares two recordings event by event, field by field;
// the names may differ.
func sameRecording(t *testing.T, got, want recordingContents) {
	t.Helper()
	gm, wm := got.meta, want.meta
	if !gm.Created.Equal(wm.Created) || !gm.Updated.Equal(wm.Updated) {
		t.Errorf("times: got %v, %v; want %v, %v", gm.Created, gm.Updated, wm.Created, wm.Updated)
	}
	gm.Name, gm.Created, gm.Updated = "", time.Time{}, time.Time{}
	wm.Name, wm.Created, wm.Updated = "", time.Time{}, time.Time{}
	if !reflect.DeepEqual(gm, wm) {
		t.Errorf("metadata:\ngot  %+v\nwant %+v", gm, wm)
	}
	if len(got.events) != len(want.events) {
		t.Fatalf("%d events, want %d", len(got.events), len(want.events))
	}
	for i, g := range got.events {
		w := want.events[i]
		if g.Seq != w.Seq || g.Kind != w.Kind || g.Lane != w.Lane || g.Offset != w.Offset || g.Flags != w.Flags || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("event %d:\ngot  %d %v %v %v %v %q\nwant %d %v %v %v %v %q", i,
				g.Seq, g.Kind, g.Lane, g.Offset, g.Flags, g.Data, w.Seq, w.Kind, w.Lane, w.Offset, w.Flags, w.Data)
		}
	}
	if !reflect.DeepEqual(got.blobs, want.blobs) {
		t.Errorf("blobs differ: got %d, want %d", len(got.blobs), len(want.blobs))
	}
}

// files returns the contents of the files under dir by relative path.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// acptapOK runs acptap in dir and fails t unless it exits 0.
func acptapOK(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	out, errOut, code := runAcptap(t, dir, env, args...)
	if code != 0 {
		t.Fatalf("acptap %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// llmRecording records the LLM-backed test agent (an SSE stream per
// exchange, a junk line, a title call racing the turn) with a workspace
// snapshot into db as name, in a workspace of its own.
func llmRecording(t *testing.T, db, name string) (ws string) {
	t.Helper()
	upstream, _ := chatUpstream(t, false)
	ws = workspace(t)
	recordSession(t, ws, db, name, agentEnv(), []string{"--snapshot", "--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"},
		"--title-call", "--junk", "--read", "notes.txt")
	return ws
}

// TestExportImportExact records a session with LLM exchanges (SSE), a
// snapshot and calibrated rules, exports it, calibrates and replays the
// export as a store, imports it, and wants the import to be the recording
// exactly: event by event, in show --json, in a second export, and in a
// replay.
func TestExportImportExact(t *testing.T) {
	root := t.TempDir()
	db := filepath.Join(root, "s.db")
	ws := llmRecording(t, db, "chat")
	env := agentEnv()
	want := readRecording(t, db, "chat")
	if want.meta.Exchanges != 3 || !want.meta.Snapshot {
		t.Fatalf("the recording has %d exchanges and snapshot %v; want 3 and a snapshot", want.meta.Exchanges, want.meta.Snapshot)
	}

	fx := filepath.Join(root, "fixtures")
	acptapOK(t, ws, env, "export", "--store", db, "--dir", fx, "chat")
	first := files(t, filepath.Join(fx, "chat"))
	for _, f := range []string{"meta.json", "events.ndjson", "llm/0001/exchange.json", "llm/0001/request.json", "llm/0001/response.sse", "llm/0001/chunks.tsv", "llm/0003/response.sse", "blobs/workspace.b64"} {
		if _, ok := first[f]; !ok {
			t.Errorf("the export lacks %s", f)
		}
	}
	if strings.Contains(strings.Join(mapValues(first), ""), "sk-") {
		t.Error("the export holds a key")
	}
	// Exporting twice gives the same bytes.
	again := filepath.Join(root, "again")
	acptapOK(t, ws, env, "export", "--store", db, "--dir", again, "chat")
	if a := files(t, filepath.Join(again, "chat")); !reflect.DeepEqual(a, first) {
		t.Error("two exports of one recording differ")
	}

	// Calibrated against the directory: the rules land in its files.
	out := acptapOK(t, ws, env, "calibrate", "--store", fx, "--runs", "1", "chat")
	if !strings.HasPrefix(out, "CALIBRATED chat") {
		t.Errorf("calibrate printed %q", out)
	}
	calibrated := files(t, filepath.Join(fx, "chat"))
	if _, ok := calibrated["blobs/rules.txt"]; !ok {
		t.Fatalf("calibrate --store DIR wrote no blobs/rules.txt; files: %v", mapKeys(calibrated))
	}
	for name, b := range first {
		if calibrated[name] != b {
			t.Errorf("calibrate changed %s", name)
		}
	}
	// The store's recording gets the same rules, for the comparison.
	acptapOK(t, ws, env, "calibrate", "--store", db, "--runs", "1", "chat")
	want = readRecording(t, db, "chat")
	if len(want.blobs) != 2 {
		t.Fatalf("the recording has %d blobs, want the rules and the snapshot", len(want.blobs))
	}

	// Import, and the import is the recording.
	db2 := filepath.Join(root, "imported.db")
	acptapOK(t, ws, env, "import", "--store", db2, filepath.Join(fx, "chat"))
	got := readRecording(t, db2, "chat")
	sameRecording(t, got, want)
	if a, b := acptapOK(t, ws, env, "show", "--json", "--store", db, "chat"), acptapOK(t, ws, env, "show", "--json", "--store", db2, "chat"); a != b {
		t.Errorf("show --json differs between the recording and its import:\n%s\n%s", a, b)
	}
	if a, b := acptapOK(t, ws, env, "show", "--json", "--store", db, "chat"), acptapOK(t, ws, env, "show", "--json", "--store", fx, "chat"); a != b {
		t.Errorf("show --json differs between the recording and its export:\n%s\n%s", a, b)
	}
	second := filepath.Join(root, "second")
	acptapOK(t, ws, env, "export", "--store", db2, "--dir", second, "chat")
	if a, b := files(t, filepath.Join(second, "chat")), files(t, filepath.Join(fx, "chat")); !reflect.DeepEqual(a, b) {
		t.Error("export → import → export changed the files")
	}

	// Replays: of the import, of the directory, of a directory of them.
	other := t.TempDir()
	for _, args := range [][]string{
		{"replay", "--store", db2, "chat"},
		{"replay", "--store", filepath.Join(fx, "chat"), "chat"},
		{"replay", "--store", fx, "--all"},
	} {
		if out := acptapOK(t, other, env, args...); !strings.HasPrefix(out, "PASS chat (") || !strings.Contains(out, "3 LLM exchanges served") {
			t.Errorf("acptap %s printed:\n%s", strings.Join(args, " "), out)
		}
	}
}

func mapKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestReplayUpdateDirectory rewrites an exported recording with replay
// --update against its directory: the lines of the agent stream that
// changed change, and nothing else.
func TestReplayUpdateDirectory(t *testing.T) {
	root := t.TempDir()
	db := filepath.Join(root, "s.db")
	ws := llmRecording(t, db, "chat")
	recordSession(t, ws, db, "plain", agentEnv(), nil)
	tmp := t.TempDir() // acptap's TMPDIR: what the directory's store leaves
	env := agentEnv("TMPDIR=" + tmp)
	fx := filepath.Join(root, "fixtures")
	acptapOK(t, ws, env, "export", "--store", db, "--dir", fx, "chat", "plain")
	before := files(t, fx)
	inodesBefore := inodesUnder(t, fx)

	// The agent no longer prints its junk line.
	changed := []string{"--title-call", "--read", "notes.txt"}
	out, _, code := runAcptap(t, ws, env, append([]string{"replay", "--store", fx, "chat", "--", "testagent"}, changed...)...)
	if code != ExitDiverged || !strings.HasPrefix(out, "FAIL chat: agent output differs") {
		t.Fatalf("changed agent: exit %d, want %d and FAIL:\n%s", code, ExitDiverged, out)
	}
	if !reflect.DeepEqual(files(t, fx), before) {
		t.Fatal("a replay without --update changed the files")
	}
	out = acptapOK(t, ws, env, append([]string{"replay", "--store", fx, "--update", "chat", "--", "testagent"}, changed...)...)
	if !strings.HasPrefix(out, "UPDATED chat (") {
		t.Errorf("--update printed:\n%s", out)
	}
	after := files(t, fx)
	inodesAfter := inodesUnder(t, fx)
	for name, b := range after {
		want := name == "chat/events.ndjson" || name == "chat/meta.json"
		if (before[name] != b) != want || (inodesBefore[name] != inodesAfter[name]) != want {
			t.Errorf("%s: changed %v, rewritten %v, want %v", name, before[name] != b, inodesBefore[name] != inodesAfter[name], want)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d files after --update, %d before", len(after), len(before))
	}
	oldLines, newLines := strings.Split(before["chat/events.ndjson"], "\n"), strings.Split(after["chat/events.ndjson"], "\n")
	var oldOthers, newOthers []string
	agentChanged := 0
	for _, l := range oldLines {
		if !strings.Contains(l, `"lane":"agent"`) {
			oldOthers = append(oldOthers, l)
		} else if !contains(newLines, l) {
			agentChanged++
		}
	}
	for _, l := range newLines {
		if !strings.Contains(l, `"lane":"agent"`) {
			newOthers = append(newOthers, l)
		}
	}
	if !reflect.DeepEqual(oldOthers, newOthers) {
		t.Errorf("--update changed lines of other lanes than the agent's")
	}
	if agentChanged == 0 || agentChanged == countLines(oldLines, `"lane":"agent"`) {
		t.Errorf("%d of %d agent lines changed; want some, not all", agentChanged, countLines(oldLines, `"lane":"agent"`))
	}
	// The junk line is gone. (replay.Update gives the frames after it
	// the recorded times by position: the first one takes the junk
	// line's time, and so changes too.)
	if strings.Contains(after["chat/events.ndjson"], "not JSON-RPC") || countLines(newLines, `"lane":"agent"`) != countLines(oldLines, `"lane":"agent"`)-1 || agentChanged > 2 {
		t.Errorf("%d agent lines changed, want the junk line gone and at most one more line moved in time:\n%s\n---\n%s",
			agentChanged, before["chat/events.ndjson"], after["chat/events.ndjson"])
	}
	if !strings.Contains(after["chat/meta.json"], `"updated": "`) {
		t.Error("meta.json does not say when the recording was updated")
	}
	// The directory replays green with the changed agent now.
	if out := acptapOK(t, t.TempDir(), env, append([]string{"replay", "--store", fx, "chat", "--", "testagent"}, changed...)...); !strings.HasPrefix(out, "PASS chat") {
		t.Errorf("after --update: %s", out)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("TMPDIR holds %q after the commands", names)
	}
	// Nothing left next to the recordings' directories either.
	if entries, _ := os.ReadDir(fx); len(entries) != 2 {
		t.Errorf("%s holds %d entries, want chat and plain", fx, len(entries))
	}
}

func contains(lines []string, l string) bool {
	for _, x := range lines {
		if x == l {
			return true
		}
	}
	return false
}

func countLines(lines []string, sub string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

// inodesUnder returns the inode of every file under dir by relative path.
func inodesUnder(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			rel, _ := filepath.Rel(dir, path)
			out[filepath.ToSlash(rel)] = fi.Sys().(*syscall.Stat_t).Ino
		}
		return err
	})
	return out
}

func TestCpAndMv(t *testing.T) {
	root := t.TempDir()
	db := filepath.Join(root, "s.db")
	ws := llmRecording(t, db, "chat")
	env := agentEnv()
	want := readRecording(t, db, "chat")

	dst := filepath.Join(root, "other.db")
	acptapOK(t, ws, env, "cp", "--store", db, "--to", dst, "chat")
	sameRecording(t, readRecording(t, dst, "chat"), want)

	acptapOK(t, ws, env, "mv", "--store", dst, "chat", "renamed")
	sameRecording(t, readRecording(t, dst, "renamed"), want)
	if out := acptapOK(t, ws, env, "show", "--store", dst); strings.Contains(out, "chat ") || !strings.Contains(out, "renamed ") {
		t.Errorf("after mv, show lists:\n%s", out)
	}
	if out := acptapOK(t, t.TempDir(), env, "replay", "--store", dst, "renamed"); !strings.HasPrefix(out, "PASS renamed") {
		t.Errorf("replay of the renamed recording: %s", out)
	}

	// --force replaces: cp of another recording over renamed.
	recordSession(t, ws, db, "plain", env, nil)
	acptapOK(t, ws, env, "mv", "--store", db, "plain", "renamed")
	acptapOK(t, ws, env, "cp", "--store", db, "--to", dst, "--force", "renamed")
	sameRecording(t, readRecording(t, dst, "renamed"), readRecording(t, db, "renamed"))
	// mv --force over an existing name.
	acptapOK(t, ws, env, "mv", "--store", db, "--force", "chat", "renamed")
	sameRecording(t, readRecording(t, db, "renamed"), want)
}

// TestDirectoryStoreRemovedOnSignal interrupts a replay from a directory
// while its agent runs: replay stops as it does for a store (exit 128+n),
// and the temporary store is gone.
func TestDirectoryStoreRemovedOnSignal(t *testing.T) {
	root := t.TempDir()
	db := filepath.Join(root, "s.db")
	ws := workspace(t)
	recordSession(t, ws, db, "plain", agentEnv(), nil)
	fx := filepath.Join(root, "fixtures")
	acptapOK(t, ws, agentEnv(), "export", "--store", db, "--dir", fx, "plain")
	tmp := t.TempDir()
	mark := filepath.Join(root, "started")
	// An agent that says nothing: the replay waits for it.
	cmd := exec.Command("acptap", "replay", "--store", fx, "--env", "MARK="+mark, "plain", "--", "sh", "-c", `touch "$MARK"; exec sleep 60`)
	cmd.Env = agentEnv("TMPDIR=" + tmp)
	cmd.Dir = ws
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the agent never started; stderr:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !hasEntry(tmp, "acptap-fixtures-") {
		t.Error("no temporary store while the replay runs")
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGINT) {
		t.Errorf("acptap ended with %v, want exit 130 (128+SIGINT); stderr:\n%s", err, stderr.String())
	}
	if hasEntry(tmp, "acptap-fixtures-") {
		t.Error("the temporary store is left after SIGINT")
	}
}

// hasEntry reports whether dir has an entry whose name starts with prefix.
func hasEntry(dir, prefix string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			return true
		}
	}
	return false
}

// TestExportImportRawBytes exports a recording of every kind of line an
// agent and an editor can write (junk, a blank line, invalid UTF-8, CRLF,
// a 2 MiB line, stored in blob chunks of 1 MiB, a last line without
// newline) and wants the import to hold the same bytes. Lines longer than
// a store commit are TestRecordPassesBytesThroughAndShowsThem's.
func TestExportImportRawBytes(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	outFile := filepath.Join(dir, "agent-out")
	if err := os.WriteFile(outFile, tapPayload(5, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("acptap", "record", "--store", db, "--name", "bytes", "--", "rawagent", outFile, filepath.Join(dir, "agent-in"))
	cmd.Stdin = bytes.NewReader(tapPayload(6, 2<<20))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("acptap record: %v\n%s", err, out)
	}
	want := readRecording(t, db, "bytes")
	fx := filepath.Join(dir, "fx")
	acptapOK(t, dir, agentEnv(), "export", "--store", db, "--dir", fx, "bytes")
	events, err := os.ReadFile(filepath.Join(fx, "bytes", "events.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{`"text":"line with CRLF\r"`, `"no_newline":true,"text":"last line without newline"`, `"b64":"`, `"text":""`, `"frame":{"jsonrpc":"2.0","id":1,"result":{"content":"`} {
		if !bytes.Contains(events, []byte(l)) {
			t.Errorf("events.ndjson lacks %s", l)
		}
	}
	db2 := filepath.Join(dir, "imported.db")
	acptapOK(t, dir, agentEnv(), "import", "--store", db2, filepath.Join(fx, "bytes"))
	sameRecording(t, readRecording(t, db2, "bytes"), want)
}

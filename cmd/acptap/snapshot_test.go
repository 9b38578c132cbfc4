package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/snapshot"
	"github.com/acptap/acptap/store"
)

// inspectWorkspace is an agent command for replay: it describes entries
// of its working directory on stderr (shown by replay -v), then runs the
// test agent as recorded.
const inspectWorkspace = `for f in notes.txt run.sh sub/data.txt link config.txt debug.log s.db; do
	if [ -L "$f" ]; then echo "ws: link $f -> $(readlink "$f")"
	elif [ -x "$f" ]; then echo "ws: exec $f"
	elif [ -f "$f" ]; then echo "ws: file $f: $(cat "$f")"
	else echo "ws: none $f"; fi
done >&2
exec testagent --read notes.txt`

// snapshotWorkspace is workspace(t) with an ignored file, an executable,
// a subdirectory, a symlink and a file holding a secret of the agent's
// environment.
func snapshotWorkspace(t *testing.T) string {
	t.Helper()
	dir := workspace(t)
	for name, content := range map[string]string{
		".gitignore":   "*.log\n",
		"debug.log":    "ignored",
		"run.sh":       "#!/bin/sh\n",
		"sub/data.txt": "data",
		"config.txt":   "key=sk-snapshot-secret-0123",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("notes.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// wsLines returns the "ws: " lines of inspectWorkspace in stderr.
func wsLines(stderr string) []string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "ws: ") {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestSnapshotRecordedAndRestoredByReplay(t *testing.T) {
	dir := snapshotWorkspace(t)
	db := filepath.Join(dir, "s.db") // inside the snapshot's directory: left out
	env := agentEnv("MY_API_KEY=sk-snapshot-secret-0123")
	recordSession(t, dir, db, "snap", env, []string{"--snapshot"}, "--read", "notes.txt")
	recordSession(t, dir, db, "plain", env, nil, "--read", "notes.txt")

	st, err := store.Open(db, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"snap": true, "plain": false} {
		rec, err := st.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Blob(name, store.SnapshotBlob)
		if rec.Snapshot != want || (err == nil) != want {
			t.Errorf("recording %s: Snapshot = %v, blob error %v; want a snapshot: %v", name, rec.Snapshot, err, want)
		}
		if !want && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("recording %s: blob error %v, want ErrNotFound", name, err)
		}
	}
	st.Close()

	// Replays run elsewhere, in sandboxes: the snapshot is all they see
	// of the recorded workspace.
	other := t.TempDir()
	replay := func(name string, flags ...string) []string {
		t.Helper()
		args := append(append([]string{"replay", "-v", "--store", db}, flags...), name)
		out, errOut, code := runAcptap(t, other, agentEnv(), append(args, "--", "sh", "-c", inspectWorkspace)...)
		if code != 0 || !strings.HasPrefix(out, "PASS "+name) {
			t.Fatalf("replay %s: exit %d, stdout %q, stderr %q; want PASS and exit 0", name, code, out, errOut)
		}
		return wsLines(errOut)
	}
	got := replay("snap")
	want := []string{
		"ws: file notes.txt: Teh quick brown fox",
		"ws: exec run.sh",
		"ws: file sub/data.txt: data",
		"ws: link link -> notes.txt",
		"ws: file config.txt: key=[REDACTED:MY_API_KEY]",
		"ws: none debug.log",
		"ws: none s.db",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the replay's workspace from the snapshot:\ngot\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// --workspace wins over the snapshot; without a snapshot the
	// workspace is empty.
	seed := t.TempDir()
	if err := os.WriteFile(filepath.Join(seed, "notes.txt"), []byte("from --workspace"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := replay("snap", "--workspace", seed); len(got) == 0 || got[0] != "ws: file notes.txt: from --workspace" || got[1] != "ws: none run.sh" {
		t.Errorf("replay --workspace of a recording with a snapshot: %q, want the --workspace files only", got)
	}
	for _, l := range replay("plain") {
		if !strings.HasPrefix(l, "ws: none ") {
			t.Errorf("replay of a recording without snapshot: %q, want an empty workspace", l)
		}
	}
}

func TestSnapshotUsageErrors(t *testing.T) {
	dir := snapshotWorkspace(t)
	db := filepath.Join(t.TempDir(), "s.db")
	tests := []struct {
		flags []string
		want  []string
	}{
		{[]string{"--snapshot", "--snapshot-max", "10"}, []string{
			"acptap: record: --snapshot: snapshot " + dir + ": file contents over the limit of 10 B at ",
			"add what the agent does not need to .gitignore, or raise --snapshot-max\n",
		}},
		{[]string{"--snapshot", "--snapshot-max-files", "2"}, []string{
			"acptap: record: --snapshot: snapshot " + dir + ": too many entries: more than 2 (the limit) at ",
			"raise --snapshot-max-files\n",
		}},
		{[]string{"--snapshot", "--snapshot-max", "lots"}, []string{
			`acptap: record: invalid value "lots" for flag -snapshot-max: size "lots": want bytes or a number with a unit`,
		}},
	}
	for _, tt := range tests {
		args := append(append([]string{"record", "--store", db, "--name", "r"}, tt.flags...), "--", "testagent")
		_, stderr, code := runAcptap(t, dir, agentEnv(), args...)
		if code != ExitUsage || strings.Count(stderr, "\n") != 1 {
			t.Errorf("record %v: exit %d, stderr %q; want exit %d and one line", tt.flags, code, stderr, ExitUsage)
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("record %v: stderr %q lacks %q", tt.flags, stderr, w)
			}
		}
		// Nothing recorded: the store was not even created.
		if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("record %v: the store exists after a snapshot error (%v)", tt.flags, err)
		}
	}
}

// TestSnapshotMaxDefault: the size parser's own cases are in
// internal/bytesize; here, the flag shows its default as the flag takes
// it.
func TestSnapshotMaxDefault(t *testing.T) {
	if (&sizeValue{snapshot.DefaultMaxBytes}).String() != "64MiB" {
		t.Errorf("the default --snapshot-max shows as %q", (&sizeValue{snapshot.DefaultMaxBytes}).String())
	}
}

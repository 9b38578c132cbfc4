package store

import (
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// recordA finishes a recording "a" of one agent frame data, replacing
// one if force.
func recordA(t *testing.T, s *Store, data string, force bool) *Writer {
	t.Helper()
	w, err := s.Create(Recording{Name: "a", Argv: []string{data}}, force)
	if err != nil {
		t.Fatalf("Create(a, force %v): %v", force, err)
	}
	w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Data: []byte(data)})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return w
}

// framesOfA returns the data of the frames of "a".
func framesOfA(t *testing.T, s *Store) []string {
	t.Helper()
	var got []string
	for _, e := range readEvents(t, s, "a") {
		got = append(got, string(e.Data))
	}
	return got
}

// TestForceReplacesOnFinish: a recording replaced by Create with force is
// the old one again when the new one is discarded (its agent never ran),
// metadata and events, and gone when the new one finishes.
func TestForceReplacesOnFinish(t *testing.T) {
	s := openTestStore(t)
	if err := recordA(t, s, "old", false).Finish(); err != nil {
		t.Fatal(err)
	}
	old := mustGet(t, s, "a")

	w := recordA(t, s, "discarded", true)
	if got := framesOfA(t, s); !slices.Equal(got, []string{"discarded"}) {
		t.Errorf("frames of a while it is recorded again: %q, want the new recording's", got)
	}
	if err := w.Discard(); err != nil {
		t.Fatalf("Discard: %v", err)
	}
	if got, rec := framesOfA(t, s), mustGet(t, s, "a"); !slices.Equal(got, []string{"old"}) || !reflect.DeepEqual(rec, old) {
		t.Errorf("after the replacement was discarded: frames %q, metadata %+v; want the old recording's, %+v", got, rec, old)
	}

	if err := recordA(t, s, "new", true).Finish(); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if got := framesOfA(t, s); !slices.Equal(got, []string{"new"}) {
		t.Errorf("after the replacement finished: frames %q, want the new recording's", got)
	}
	if _, err := s.Create(Recording{Name: "a"}, false); !errors.Is(err, ErrExists) {
		t.Errorf("Create(a) without force after the replacement: %v, want ErrExists", err)
	}
}

// startReplacer opens a store holding a finished recording "a" and
// starts a child process replacing it (Create with force), which has
// committed a frame; the Store is the test's to close.
func startReplacer(t *testing.T) (string, *Store, *child) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acptap.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := recordA(t, s, "old", false).Finish(); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "replacer", path)
	if l := c.line(t); l != "ready" {
		t.Fatalf("child said %q, want ready", l)
	}
	return path, s, c
}

// TestKilledReplacer: when the process replacing a recording dies, the
// new recording stands, interrupted, and the old one stays aside: Check
// says so, and the next Create with force drops it.
func TestKilledReplacer(t *testing.T) {
	path, s, c := startReplacer(t)
	problems := func() []string {
		t.Helper()
		var got []string
		if err := Check(path, nil, func(p Problem) { got = append(got, p.String()) }); err != nil {
			t.Fatalf("Check: %v", err)
		}
		return got
	}
	if got := problems(); len(got) != 0 {
		t.Errorf("Check while the replacement is recorded: %q, want no problem", got)
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.cmd.Wait()

	recs, err := s.List()
	if err != nil || len(recs) != 1 || recs[0].Done || recs[0].Live {
		t.Fatalf("List = %+v, %v; want a, interrupted", recs, err)
	}
	if got := framesOfA(t, s); !slices.Equal(got, []string{"new"}) {
		t.Errorf("frames of a: %q, want the interrupted replacement's", got)
	}
	got := problems()
	if len(got) != 1 || !strings.Contains(got[0], `keeps aside the recording "a" replaced when it was recorded again, by a process that died`) {
		t.Errorf("Check after the replacer died: %q, want the recording kept aside named", got)
	}
	if err := recordA(t, s, "newer", true).Finish(); err != nil {
		t.Fatal(err)
	}
	if got := problems(); len(got) != 0 {
		t.Errorf("Check after a was recorded again: %q, want no problem", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkStoreFile(t, path)
}

// TestDeleteDropsReplaced: rm of a recording whose replacer died drops the
// recording kept aside too.
func TestDeleteDropsReplaced(t *testing.T) {
	path, s, c := startReplacer(t)
	if err := s.Delete("a"); !errors.Is(err, ErrBusy) {
		t.Errorf("Delete while a is recorded again: %v, want ErrBusy", err)
	}
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()
	if err := s.Delete("a"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkStoreFile(t, path)
}

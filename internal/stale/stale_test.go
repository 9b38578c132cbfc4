package stale

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestRemove removes the directory of a process that has ended, and
// keeps the live process's, the names without a process id, another
// prefix's and a file.
func TestRemove(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("no true to run:", err)
	}
	tmp := t.TempDir()
	gone := fmt.Sprintf("%s%d-1", ReplayPrefix, dead.Process.Pid)
	keep := []string{
		fmt.Sprintf("%s%d-2", ReplayPrefix, os.Getpid()),
		fmt.Sprintf("%s%d-3", TapPrefix, dead.Process.Pid), // another prefix
		ReplayPrefix + "123456",                            // an older acptap's, without a pid
		ReplayPrefix + "spool-4",
		ReplayPrefix + "007-5",
	}
	for _, n := range append([]string{gone}, keep...) {
		if err := os.Mkdir(filepath.Join(tmp, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	file := fmt.Sprintf("%s%d-6", ReplayPrefix, dead.Process.Pid)
	if err := os.WriteFile(filepath.Join(tmp, file), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, file)
	Remove(tmp, ReplayPrefix)
	entries, _ := os.ReadDir(tmp)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(got)
	slices.Sort(keep)
	if !slices.Equal(got, keep) {
		t.Errorf("left %q, want %q", got, keep)
	}
}

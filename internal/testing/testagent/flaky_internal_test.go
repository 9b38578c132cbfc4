package testagent

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestFlakySeq: with --flaky-seq the runs alternate, sending what
// --flaky names and not, counted in the file.
func TestFlakySeq(t *testing.T) {
	seq := filepath.Join(t.TempDir(), "seq")
	var got []bool
	for range 4 {
		f, err := flaky{toolDone: true, drain: true}.choose(seq)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f.toolDone && f.drain)
	}
	if want := []bool{true, false, true, false}; !slices.Equal(got, want) {
		t.Errorf("runs sent %v, want %v", got, want)
	}
	if _, err := (flaky{}).choose(filepath.Join(t.TempDir(), "no", "dir", "seq")); err == nil {
		t.Errorf("a sequence file that cannot be written: no error")
	}
}

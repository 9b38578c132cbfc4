package replay

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSpool checks that lines come back as added, empty ones too, and
// that the spool's file is not left in TMPDIR, even while it is open.
func TestSpool(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	s, err := newSpool()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	lines := [][]byte{[]byte("first"), {}, bytes.Repeat([]byte("x"), 1<<20), []byte(`{"jsonrpc":"2.0"}`)}
	for _, l := range lines {
		s.add(l)
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if s.len() != len(lines) {
		t.Fatalf("len = %d, want %d", s.len(), len(lines))
	}
	for i, want := range lines {
		got, err := s.line(i)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("line %d: %d bytes %.20q, want %d bytes %.20q", i, len(got), got, len(want), want)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("TMPDIR holds %v while the spool is open, want nothing: the file is removed at once", left)
	}
}

// TestSpoolNoTmpdir checks that a TMPDIR the spool cannot use fails with
// ErrSpool.
func TestSpoolNoTmpdir(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	if s, err := newSpool(); !errors.Is(err, ErrSpool) {
		if s != nil {
			s.close()
		}
		t.Errorf("newSpool in a missing TMPDIR: %v, want ErrSpool", err)
	}
}

// TestSpoolWriteError checks that a write that fails (here to a closed
// file) is returned by flush, as ErrSpool.
func TestSpoolWriteError(t *testing.T) {
	s, err := newSpool()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	s.f.Close()
	s.add(bytes.Repeat([]byte("x"), 1<<20)) // more than the buffer: written now
	s.add([]byte("more"))
	if err := s.flush(); !errors.Is(err, ErrSpool) {
		t.Errorf("flush after a failed write: %v, want ErrSpool", err)
	}
}

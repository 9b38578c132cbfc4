package store

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// wantOpenError checks that Open fails with target and names the path.
func wantOpenError(t *testing.T, path string, opts *Options, target error) {
	t.Helper()
	s, err := Open(path, opts)
	if err == nil {
		s.Close()
		t.Errorf("Open(%q, %+v) succeeded, want %v", path, opts, target)
		return
	}
	if !errors.Is(err, target) {
		t.Errorf("Open(%q, %+v) = %v, want %v", path, opts, err, target)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("Open(%q, %+v) = %q, does not name the path", path, opts, err)
	}
}

var readOnly = &Options{ReadOnly: true}

func TestOpenDirectory(t *testing.T) {
	dir := t.TempDir()
	wantOpenError(t, dir, nil, ErrIsDir)
	wantOpenError(t, dir, readOnly, ErrIsDir)
}

func TestOpenNotStore(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{5, 1024, 4095, 4096, 5000, 8192, 40000} {
		path := filepath.Join(dir, "text")
		text := bytes.Repeat([]byte("this is not a database\n"), size/23+1)[:size]
		if err := os.WriteFile(path, text, 0o666); err != nil {
			t.Fatal(err)
		}
		wantOpenError(t, path, nil, ErrNotStore)
		wantOpenError(t, path, readOnly, ErrNotStore)
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, text) {
			t.Errorf("a text file of %d bytes changed after Open", size)
		}
	}

	// A bbolt file of another program.
	path := filepath.Join(dir, "other.db")
	db, err := bolt.Open(path, 0o666, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("theirs"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	wantOpenError(t, path, nil, ErrNotStore)
	wantOpenError(t, path, readOnly, ErrNotStore)

	// A store whose format value is garbage.
	path = filepath.Join(dir, "garbage.db")
	setFormat(t, path, "one")
	wantOpenError(t, path, nil, ErrNotStore)
}

func TestOpenEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	wantOpenError(t, path, readOnly, ErrNoStore)
	s, err := Open(path, nil)
	if err != nil {
		t.Fatalf("Open of an empty file: %v", err)
	}
	if err := mustCreate(t, s, Recording{Name: "first"}).Finish(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, readOnly)
	if err != nil {
		t.Fatalf("read-only Open of the new store: %v", err)
	}
	defer s.Close()
	mustGet(t, s, "first")
}

func TestOpenBareBbolt(t *testing.T) {
	// What a crash between bbolt's initialization and the store's leaves.
	path := filepath.Join(t.TempDir(), "bare.db")
	db, err := bolt.Open(path, 0o666, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(path, readOnly)
	if err != nil {
		t.Fatalf("read-only Open of a bbolt file without buckets: %v", err)
	}
	if recs, err := s.List(); err != nil || len(recs) != 0 {
		t.Errorf("List = %v, %v; want none", recs, err)
	}
	if _, err := s.Get("x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get = %v, want ErrNotFound", err)
	}
	s.Close()
	s, err = Open(path, nil)
	if err != nil {
		t.Fatalf("Open of a bbolt file without buckets: %v", err)
	}
	if err := mustCreate(t, s, Recording{Name: "x"}).Finish(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	checkStoreFile(t, path)
}

func TestOpenReadOnlyMissing(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "missing.db"), filepath.Join(dir, "no", "such", "dir.db")} {
		wantOpenError(t, path, readOnly, ErrNoStore)
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("read-only Open created %s: %v", path, err)
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("read-only Open left %v in the directory (%v)", entries, err)
	}
}

func TestOpenMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "acptap.db")
	wantOpenError(t, path, nil, fs.ErrNotExist)
}

func TestOpenPermission(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("permission bits do not stop root")
	}
	dir := t.TempDir()

	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	wantOpenError(t, filepath.Join(ro, "acptap.db"), nil, fs.ErrPermission)

	path := filepath.Join(dir, "acptap.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := mustCreate(t, s, Recording{Name: "r"}).Finish(); err != nil {
		t.Fatal(err)
	}
	s.Close()

	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	wantOpenError(t, path, nil, fs.ErrPermission)
	s, err = Open(path, readOnly)
	if err != nil {
		t.Fatalf("read-only Open of a read-only file: %v", err)
	}
	mustGet(t, s, "r")
	s.Close()

	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	wantOpenError(t, path, nil, fs.ErrPermission)
	wantOpenError(t, path, readOnly, fs.ErrPermission)
}

// setFormat writes a store's format value with bbolt directly, creating
// the store if needed.
func setFormat(t *testing.T, path, format string) {
	t.Helper()
	db, err := bolt.Open(path, 0o666, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(storeBucket)
		if err != nil {
			return err
		}
		return b.Put(formatKey, []byte(format))
	}); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownStoreFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acptap.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	setFormat(t, path, strconv.Itoa(storeFormat+1))
	wantOpenError(t, path, nil, ErrUnknownFormat)
	wantOpenError(t, path, readOnly, ErrUnknownFormat)
}

func TestUnknownRecordingFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acptap.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"future", "present"} {
		w := mustCreate(t, s, Recording{Name: name})
		w.Append(Event{Kind: KindFrame, Data: []byte("x")})
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	// As a newer acptap would write it.
	if err := (testDB{s}).Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(recordingsBucket).Bucket([]byte("future"))
		rec, err := decodeMeta(b.Get(metaKey))
		if err != nil {
			return err
		}
		rec.Format = FormatVersion + 1
		v, err := encodeMeta(&rec)
		if err != nil {
			return err
		}
		return b.Put(metaKey, v)
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(path, readOnly)
	if err != nil {
		t.Fatalf("Open of a store holding a newer recording: %v", err)
	}
	defer s.Close()
	recs, err := s.List()
	if err != nil || len(recs) != 2 {
		t.Fatalf("List = %+v, %v; want both recordings", recs, err)
	}
	for _, rec := range recs {
		if want := map[string]int{"future": FormatVersion + 1, "present": FormatVersion}[rec.Name]; rec.Format != want {
			t.Errorf("List: %s has Format %d, want %d", rec.Name, rec.Format, want)
		}
	}
	if _, err := s.Get("future"); !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), `"future"`) {
		t.Errorf("Get of a newer recording = %v, want ErrUnknownFormat naming it", err)
	}
	if err := s.Events("future", func(Event) error { return nil }); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("Events of a newer recording = %v, want ErrUnknownFormat", err)
	}
	mustGet(t, s, "present")
}

func TestUnknownEventEncoding(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acptap.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := mustCreate(t, s, Recording{Name: "r"})
	// One commit, so one value, per event.
	for range 3 {
		w.Append(Event{Kind: KindFrame, Data: []byte("x")})
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := (testDB{s}).Update(func(tx *bolt.Tx) error {
		eb := tx.Bucket(recordingsBucket).Bucket([]byte("r")).Bucket(eventsBucket)
		return eb.Put([]byte{0, 0, 0, 0, 0, 0, 0, 2}, []byte{blockEncoding + 1, 1, 1, 0, 0})
	}); err != nil {
		t.Fatal(err)
	}
	var seen []uint64
	err = s.Events("r", func(e Event) error {
		seen = append(seen, e.Seq)
		return nil
	})
	// The recording's format is known: an encoding it does not know is
	// damage, never blamed on a newer acptap.
	var de *DamagedError
	if !errors.As(err, &de) || errors.Is(err, ErrUnknownFormat) || de.Recording != "r" || de.Seq != 2 {
		t.Errorf("Events over an unknown encoding = %v, want a *DamagedError of recording r, event 2", err)
	}
	if len(seen) != 1 {
		t.Errorf("fn saw events %v, want only event 1", seen)
	}
}

func TestOpenNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, path := range []string{fifo, "/proc/version"} {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		for _, ro := range []bool{true, false} {
			_, err := Open(path, &Options{ReadOnly: ro, Timeout: -1})
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("Open(%s, ReadOnly %v) = %v, want ErrNotRegular", path, ro, err)
			}
		}
	}
}

func TestQuoteName(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes: the cut falls inside a rune
	for _, tc := range []struct{ name, want string }{
		{"fix-typo", `"fix-typo"`},
		{strings.Repeat("x", 64), `"` + strings.Repeat("x", 64) + `"`},
		{strings.Repeat("x", 65), `"` + strings.Repeat("x", 64) + `"… (65 bytes)`},
		{long, `"` + strings.Repeat("é", 32) + `"… (200 bytes)`},
	} {
		if got := QuoteName(tc.name); got != tc.want {
			t.Errorf("QuoteName(%d bytes) = %s, want %s", len(tc.name), got, tc.want)
		}
	}
}

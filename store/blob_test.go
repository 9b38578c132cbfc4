package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	bolt "go.etcd.io/bbolt"
)

// checkBlobs checks, for the store's invariant checks, that every blob of
// the named recording reads back whole and that its chunks fit the limit.
func checkBlobs(t *testing.T, s *Store, name string) {
	t.Helper()
	var names []string
	err := testDB{s}.View(func(tx *bolt.Tx) error {
		b, err := recording(tx, name)
		if err != nil {
			return err
		}
		bs := b.Bucket(blobsBucket)
		if bs == nil {
			return nil
		}
		return bs.ForEach(func(k, v []byte) error {
			bb := bs.Bucket(k)
			if v != nil || bb == nil {
				return fmt.Errorf("stray key %q among blobs", k)
			}
			names = append(names, string(k))
			return bb.ForEach(func(k, v []byte) error {
				if len(v) > 1+blobChunkSize {
					return fmt.Errorf("blob %q: chunk %x of %d bytes", names[len(names)-1], k, len(v))
				}
				return nil
			})
		})
	})
	if err != nil {
		t.Errorf("invariants: recording %q: %v", name, err)
	}
	for _, n := range names {
		if _, err := s.Blob(name, n); err != nil {
			t.Errorf("invariants: recording %q: %v", name, err)
		}
	}
}

// chunkEncodings returns the encoding byte of each stored chunk of a blob.
func chunkEncodings(t *testing.T, s *Store, rec, name string) []byte {
	t.Helper()
	var encs []byte
	err := testDB{s}.View(func(tx *bolt.Tx) error {
		b, _ := recording(tx, rec)
		return b.Bucket(blobsBucket).Bucket([]byte(name)).ForEach(func(k, v []byte) error {
			if len(k) == 8 {
				encs = append(encs, v[0])
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return encs
}

func TestBlobRoundTrip(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "r"})
	defer w.Finish()

	r := rand.NewChaCha8([32]byte{7})
	random := func(n int) []byte {
		b := make([]byte, n)
		r.Read(b)
		return b
	}
	text := func(n int) []byte {
		return []byte(strings.Repeat("the quick brown fox ", n/20+1)[:n])
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	zstdData := enc.EncodeAll(text(3*blobChunkSize), nil)
	zstdData = append(zstdData, random(3*blobChunkSize)...) // big enough for 3 chunks
	enc.Close()

	tests := []struct {
		name string
		data []byte
		want []byte // encodings of the chunks
	}{
		{"empty", []byte{}, nil},
		{"one", []byte("x"), []byte{chunkRaw}},
		{"text", text(1000), []byte{chunkZstd}},
		{"random", random(1000), []byte{chunkRaw}},
		{"chunk", text(blobChunkSize), []byte{chunkZstd}},
		{"chunk-plus-one", text(blobChunkSize + 1), []byte{chunkZstd, chunkRaw}},
		{"mixed", append(text(blobChunkSize+10), random(2*blobChunkSize)...), []byte{chunkZstd, chunkRaw, chunkRaw, chunkRaw}},
		{"zstd", zstdData, bytes.Repeat([]byte{chunkRaw}, (len(zstdData)+blobChunkSize-1)/blobChunkSize)},
	}
	for _, tt := range tests {
		if err := w.PutBlob(tt.name, tt.data); err != nil {
			t.Fatalf("PutBlob(%q): %v", tt.name, err)
		}
	}
	for _, tt := range tests {
		got, err := s.Blob("r", tt.name)
		if err != nil {
			t.Errorf("Blob(%q): %v", tt.name, err)
			continue
		}
		if !bytes.Equal(got, tt.data) {
			t.Errorf("Blob(%q): got %d bytes that differ from the %d put", tt.name, len(got), len(tt.data))
		}
		if encs := chunkEncodings(t, s, "r", tt.name); !bytes.Equal(encs, tt.want) {
			t.Errorf("Blob(%q): chunk encodings %v, want %v", tt.name, encs, tt.want)
		}
	}
}

func TestBlobReplaceAndNotFound(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "r"})
	defer w.Finish()
	long := bytes.Repeat([]byte("a"), 3*blobChunkSize)
	if err := w.PutBlob("b", long); err != nil {
		t.Fatal(err)
	}
	// Replacing a long blob with a short one leaves no chunk behind.
	if err := w.PutBlob("b", []byte("short")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Blob("r", "b"); err != nil || string(got) != "short" {
		t.Errorf("Blob after a replace = %q, %v; want \"short\"", got, err)
	}
	if encs := chunkEncodings(t, s, "r", "b"); len(encs) != 1 {
		t.Errorf("%d chunks after a replace, want 1", len(encs))
	}

	_, err := s.Blob("r", "missing")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `no blob "missing"`) {
		t.Errorf("Blob of a missing blob: %v, want ErrNotFound naming the blob", err)
	}
	if _, err := s.Blob("nope", "b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Blob of a missing recording: %v, want ErrNotFound", err)
	}
	if err := w.PutBlob("../x", nil); err == nil || !strings.Contains(err.Error(), `invalid blob name "../x"`) {
		t.Errorf("PutBlob with a bad name: %v", err)
	}
	if _, err := s.Blob("r", ""); err == nil || !strings.Contains(err.Error(), `invalid blob name ""`) {
		t.Errorf("Blob with a bad name: %v", err)
	}
}

func TestBlobsGoWithTheirRecording(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "r"})
	if err := w.PutBlob(SnapshotBlob, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := w.PutBlob(SnapshotBlob, []byte("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("PutBlob after Finish: %v, want ErrClosed", err)
	}

	// Replaced by Create with force: the new recording has no blob.
	w, err := s.Create(Recording{Name: "r"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Blob("r", SnapshotBlob); !errors.Is(err, ErrNotFound) {
		t.Errorf("Blob of a replaced recording: %v, want ErrNotFound", err)
	}
	if err := w.PutBlob(SnapshotBlob, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("r"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Blob("r", SnapshotBlob); !errors.Is(err, ErrNotFound) {
		t.Errorf("Blob of a deleted recording: %v, want ErrNotFound", err)
	}
}

func TestPutBlobWhileAppending(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "r"})
	var wg sync.WaitGroup
	const events = 2000
	wg.Go(func() {
		for i := range events {
			w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Data: fmt.Appendf(nil, "line %d", i)})
		}
	})
	blobs := map[string][]byte{}
	for i := range 8 {
		blobs[fmt.Sprint("b", i)] = bytes.Repeat([]byte{byte(i)}, i*blobChunkSize/3)
	}
	for name, data := range blobs {
		wg.Go(func() {
			if err := w.PutBlob(name, data); err != nil {
				t.Errorf("PutBlob(%q): %v", name, err)
			}
		})
	}
	wg.Wait()
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if got := len(readEvents(t, s, "r")); got != events {
		t.Errorf("%d events, want %d", got, events)
	}
	for name, data := range blobs {
		if got, err := s.Blob("r", name); err != nil || !bytes.Equal(got, data) {
			t.Errorf("Blob(%q): %d bytes, %v; want the %d put", name, len(got), err, len(data))
		}
	}
}

func TestBlobRefusesDamage(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "r"})
	data := bytes.Repeat([]byte("abc"), blobChunkSize) // 3 chunks
	if err := w.PutBlob("b", data); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	info := func(enc byte, size, n uint64) []byte {
		v := binary.AppendUvarint([]byte{enc}, size)
		return binary.AppendUvarint(v, n)
	}
	tests := []struct {
		name   string
		damage func(bb *bolt.Bucket) error
		want   string
	}{
		{"newer encoding", func(bb *bolt.Bucket) error { return bb.Put(blobInfoKey, info(2, uint64(len(data)), 3)) }, "unknown blob encoding 2"},
		{"no info", func(bb *bolt.Bucket) error { return bb.Delete(blobInfoKey) }, "info missing"},
		{"bad info", func(bb *bolt.Bucket) error { return bb.Put(blobInfoKey, []byte{blobEncoding, 0x80}) }, "info malformed"},
		{"chunk count", func(bb *bolt.Bucket) error { return bb.Put(blobInfoKey, info(1, uint64(len(data)), 4)) }, "4 chunks for"},
		{"short size", func(bb *bolt.Bucket) error { return bb.Put(blobInfoKey, info(1, uint64(len(data))-1, 3)) }, "chunk 2:"},
		{"missing chunk", func(bb *bolt.Bucket) error { return bb.Delete(seqKey(1)) }, "stray key"},
		{"missing last chunk", func(bb *bolt.Bucket) error { return bb.Delete(seqKey(2)) }, "2 chunks, want 3"},
		{"extra chunk", func(bb *bolt.Bucket) error { return bb.Put(seqKey(3), []byte{chunkRaw, 1}) }, "stray key"},
		{"chunk encoding", func(bb *bolt.Bucket) error { return bb.Put(seqKey(0), []byte{9, 1}) }, "chunk 0: unknown encoding 9"},
		{"empty chunk", func(bb *bolt.Bucket) error { return bb.Put(seqKey(0), nil) }, "chunk 0: empty"},
		{"short chunk", func(bb *bolt.Bucket) error { return bb.Put(seqKey(0), []byte{chunkRaw, 1}) }, "chunk 0: 1 bytes, want"},
		{"bad zstd", func(bb *bolt.Bucket) error { return bb.Put(seqKey(0), []byte{chunkZstd, 1, 2, 3}) }, "chunk 0:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var saved map[string][]byte
			err := testDB{s}.Update(func(tx *bolt.Tx) error {
				b, _ := recording(tx, "r")
				bb := b.Bucket(blobsBucket).Bucket([]byte("b"))
				saved = map[string][]byte{}
				bb.ForEach(func(k, v []byte) error {
					saved[string(k)] = bytes.Clone(v)
					return nil
				})
				return tt.damage(bb)
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Blob("r", "b")
			if !errors.Is(err, ErrDamaged) || errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `blob "b"`) {
				t.Errorf("Blob: %v, want ErrDamaged naming the blob with %q", err, tt.want)
			}
			// Repair, for the next case and the invariant checks.
			err = testDB{s}.Update(func(tx *bolt.Tx) error {
				b, _ := recording(tx, "r")
				bs := b.Bucket(blobsBucket)
				if err := bs.DeleteBucket([]byte("b")); err != nil {
					return err
				}
				bb, err := bs.CreateBucket([]byte("b"))
				if err != nil {
					return err
				}
				for k, v := range saved {
					if err := bb.Put([]byte(k), v); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	if got, err := s.Blob("r", "b"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("Blob after the repairs: %v", err)
	}
}

// TestStorePutBlob: a finished recording takes a blob (calibrate's rules),
// replaced whole; a recording being written, a missing one and a
// read-only store refuse it; the blob survives ReplaceLane and goes with
// Delete.
func TestStorePutBlob(t *testing.T) {
	s := openTestStore(t)
	w := mustCreate(t, s, Recording{Name: "r"})
	w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Data: []byte("a")})
	if err := s.PutBlob("r", RulesBlob, []byte("[]")); !errors.Is(err, ErrBusy) {
		t.Errorf("PutBlob of a recording being written: %v, want ErrBusy", err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{[]byte(`[{"regexp":"a","replace":"b"}]`), bytes.Repeat([]byte("x"), 2*blobChunkSize+3), []byte("[]")} {
		if err := s.PutBlob("r", RulesBlob, data); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Blob("r", RulesBlob); err != nil || !bytes.Equal(got, data) {
			t.Errorf("Blob after PutBlob: %d bytes, %v; want the %d put", len(got), err, len(data))
		}
	}
	if encs := chunkEncodings(t, s, "r", RulesBlob); len(encs) != 1 {
		t.Errorf("%d chunks after replacing a long blob with a short one, want 1", len(encs))
	}
	if err := s.PutBlob("nope", RulesBlob, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("PutBlob of a missing recording: %v, want ErrNotFound", err)
	}
	if err := s.PutBlob("r", "../x", nil); err == nil || !strings.Contains(err.Error(), `invalid blob name "../x"`) {
		t.Errorf("PutBlob with a bad name: %v", err)
	}
	if err := s.ReplaceLane("r", LaneAgent, []Placed{{Data: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Blob("r", RulesBlob); err != nil || string(got) != "[]" {
		t.Errorf("Blob after ReplaceLane = %q, %v; want it kept", got, err)
	}
	checkBlobs(t, s, "r")
	if err := s.Delete("r"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Blob("r", RulesBlob); !errors.Is(err, ErrNotFound) {
		t.Errorf("Blob of a deleted recording: %v, want ErrNotFound", err)
	}
}

func TestStorePutBlobReadOnly(t *testing.T) {
	path := t.TempDir() + "/s.db"
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := mustCreate(t, s, Recording{Name: "r"})
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.PutBlob("r", RulesBlob, []byte("[]")); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("PutBlob in a read-only store: %v, want a read-only error", err)
	}
}

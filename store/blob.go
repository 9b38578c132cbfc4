package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
	bolt "go.etcd.io/bbolt"
)

// SnapshotBlob is the blob that holds the workspace snapshot of a
// recording whose Recording.Snapshot is set.
const SnapshotBlob = "workspace"

// RulesBlob is the blob that holds the normalization rules `acptap
// calibrate` learned for a recording, a rules file (see
// normalize.ParseRules).
const RulesBlob = "rules"

// ScenarioBlob is the blob that holds the scenario file that drove the
// agent of a recording made by `acptap record --scenario`, for `acptap
// rerecord` to run again when the file is gone.
const ScenarioBlob = "scenario"

// Blobs are named byte strings attached to a recording (a workspace
// snapshot, say), in its bucket, so that deleting or replacing the
// recording drops them:
//
//	recordings/NAME/
//	    blobs/
//	        BLOB/               one bucket per blob
//	            info -> byte blobEncoding, uvarint size, uvarint chunks
//	            chunk index as 8 bytes big-endian -> byte chunk encoding, payload
//
// A blob is cut into chunks of blobChunkSize bytes (the last one shorter),
// each stored as is (chunkRaw) or zstd-compressed (chunkZstd), whichever
// is smaller; data that is compressed already (zstd) is stored as is
// without trying.
var (
	blobsBucket = []byte("blobs")
	blobInfoKey = []byte("info")
)

const (
	// blobEncoding is the first byte of a blob's info: a reader refuses
	// another as damage (see the encodings of events in codec.go).
	blobEncoding = 1

	chunkRaw  = 0
	chunkZstd = 1

	// blobChunkSize is the size of a blob's chunks before compression.
	blobChunkSize = 1 << 20
)

// zstdMagic starts every zstd frame.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// chunkDecoder decompresses chunks, refusing more than a chunk.
var chunkDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderMaxMemory(blobChunkSize),
		zstd.WithDecoderMaxWindow(blobChunkSize))
})

// errNoBlob is ErrNotFound said of a blob.
type errNoBlob string

func (e errNoBlob) Error() string        { return fmt.Sprintf("no blob %q", string(e)) }
func (e errNoBlob) Is(target error) bool { return target == ErrNotFound }

// validBlobName checks a blob name against the rules of recording names.
func validBlobName(name string) error {
	if ValidName(name) != nil {
		return fmt.Errorf("invalid blob name %q: use 1 to %d letters, digits, '.', '_' or '-', not starting with '.' or '-'", name, maxNameLen)
	}
	return nil
}

// PutBlob stores data as the blob name of the Writer's recording,
// replacing a blob of that name, in a transaction of its own that is
// committed when PutBlob returns. It does not wait for the events
// appended before it, nor they for it. It fails with ErrClosed once
// Finish has returned. PutBlob does not keep data.
func (w *Writer) PutBlob(name string, data []byte) error {
	s := w.s
	if err := validBlobName(name); err != nil {
		return s.wrap("put blob in", w.name, err)
	}
	chunks, err := encodeBlob(data)
	if err != nil {
		return s.wrap("put blob in", w.name, fmt.Errorf("blob %q: %w", name, err))
	}
	// s.mu keeps the recording this Writer's until the commit: Finish
	// (which forgets the Writer) and so a Create or Delete of the name
	// wait for it.
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed.Load():
		return s.wrap("put blob in", w.name, errStoreClosed)
	case s.writers[w.name] != w:
		return s.wrap("put blob in", w.name, fmt.Errorf("blob %q: writer %w", name, ErrClosed))
	}
	return s.update("put blob in", w.name, func(tx *bolt.Tx) error {
		return putBlob(tx, w.name, name, len(data), chunks)
	})
}

// PutBlob stores data as the blob name of the named recording, a finished
// one (or one whose recorder is gone), replacing a blob of that name, in
// one transaction: the recording has the new blob or the old one, never a
// part. The Store must be writable, and no Writer, of any process, may be
// writing the recording (ErrBusy). PutBlob does not keep data.
func (s *Store) PutBlob(recordingName, name string, data []byte) error {
	const op = "put blob in"
	if err := ValidName(recordingName); err != nil {
		return err
	}
	if err := validBlobName(name); err != nil {
		return s.wrap(op, recordingName, err)
	}
	chunks, err := encodeBlob(data)
	if err != nil {
		return s.wrap(op, recordingName, fmt.Errorf("blob %q: %w", name, err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(op, recordingName); err != nil {
		return err
	}
	return s.update(op, recordingName, func(tx *bolt.Tx) error {
		b, err := recording(tx, recordingName)
		if err != nil {
			return err
		}
		if _, err := readKnownMeta(b, recordingName); err != nil {
			return err
		}
		if err := s.notLive(recordingName); err != nil {
			return err
		}
		return putBlob(tx, recordingName, name, len(data), chunks)
	})
}

// putBlob writes the chunks of a blob of size bytes into the recording's
// bucket, replacing a blob of that name.
func putBlob(tx *bolt.Tx, recordingName, name string, size int, chunks [][]byte) error {
	b, err := recording(tx, recordingName)
	if err != nil {
		return err
	}
	bs, err := b.CreateBucketIfNotExists(blobsBucket)
	if err != nil {
		return err
	}
	// Replacing a blob deletes its bucket, walking its pages.
	if err := walkable(bs, recordingName, true); err != nil {
		return err
	}
	key := []byte(name)
	if bs.Bucket(key) != nil {
		if err := bs.DeleteBucket(key); err != nil {
			return err
		}
	}
	bb, err := bs.CreateBucket(key)
	if err != nil {
		return err
	}
	// Keys grow: fill pages.
	bb.FillPercent = 1
	info := []byte{blobEncoding}
	info = binary.AppendUvarint(info, uint64(size))
	info = binary.AppendUvarint(info, uint64(len(chunks)))
	if err := bb.Put(blobInfoKey, info); err != nil {
		return err
	}
	for i, c := range chunks {
		if err := bb.Put(seqKey(uint64(i)), c); err != nil {
			return fmt.Errorf("blob %q: chunk %d: %w", name, i, err)
		}
	}
	return nil
}

// encodeBlob cuts data into the stored chunks.
func encodeBlob(data []byte) ([][]byte, error) {
	compress := !bytes.HasPrefix(data, zstdMagic)
	var enc *zstd.Encoder
	if compress {
		var err error
		if enc, err = encoder(); err != nil {
			return nil, fmt.Errorf("zstd encoder: %w", err)
		}
	}
	chunks := make([][]byte, 0, (len(data)+blobChunkSize-1)/blobChunkSize)
	for off := 0; off < len(data); off += blobChunkSize {
		part := data[off:min(off+blobChunkSize, len(data))]
		var c []byte
		if compress {
			c = enc.EncodeAll(part, append(make([]byte, 0, len(part)/2+16), chunkZstd))
		}
		if c == nil || len(c) >= 1+len(part) {
			c = append(append(make([]byte, 0, 1+len(part)), chunkRaw), part...)
		}
		chunks = append(chunks, c)
	}
	return chunks, nil
}

// Blob returns the blob name of the named recording. It fails with
// ErrNotFound if there is no such recording or no such blob.
func (s *Store) Blob(recordingName, name string) ([]byte, error) {
	if err := ValidName(recordingName); err != nil {
		return nil, err
	}
	if err := validBlobName(name); err != nil {
		return nil, s.wrap("read blob of", recordingName, err)
	}
	var data []byte
	err := s.view("read blob of", recordingName, func(tx *bolt.Tx) error {
		b, err := recording(tx, recordingName)
		if err != nil {
			return err
		}
		if _, err := readKnownMeta(b, recordingName); err != nil {
			return err
		}
		var bb *bolt.Bucket
		if bs := b.Bucket(blobsBucket); bs != nil {
			if err := walkable(bs, recordingName, false); err != nil {
				return err
			}
			bb = bs.Bucket([]byte(name))
		}
		if bb == nil {
			return errNoBlob(name)
		}
		if err := walkable(bb, recordingName, false); err != nil {
			return err
		}
		data, err = decodeBlob(bb)
		if err != nil {
			de := damaged(0, fmt.Sprintf("blob %q", name), err)
			de.Recording = recordingName
			return de
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// decodeBlob reads the blob stored in bb. The result never aliases the
// transaction's memory.
func decodeBlob(bb *bolt.Bucket) ([]byte, error) {
	info := bb.Get(blobInfoKey)
	if len(info) == 0 {
		return nil, errors.New("info missing")
	}
	if info[0] != blobEncoding {
		return nil, fmt.Errorf("unknown blob encoding %d", info[0])
	}
	size, n := binary.Uvarint(info[1:])
	if n <= 0 {
		return nil, errors.New("info malformed")
	}
	nchunks, m := binary.Uvarint(info[1+n:])
	if m <= 0 || 1+n+m != len(info) {
		return nil, errors.New("info malformed")
	}
	if want := (size + blobChunkSize - 1) / blobChunkSize; nchunks != want {
		return nil, fmt.Errorf("%d chunks for %d bytes, want %d", nchunks, size, want)
	}
	dec, err := chunkDecoder()
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	// size is checked against the chunks as they come: a damaged info
	// must not make the reader allocate for it.
	data := make([]byte, 0, min(size, blobChunkSize*64))
	c := bb.Cursor()
	var scratch []byte
	var i uint64
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if bytes.Equal(k, blobInfoKey) {
			continue
		}
		if len(k) != 8 || v == nil || binary.BigEndian.Uint64(k) != i || i >= nchunks {
			return nil, fmt.Errorf("stray key %s among chunks", quoteKey(k))
		}
		if len(v) == 0 {
			return nil, fmt.Errorf("chunk %d: empty", i)
		}
		start := len(data)
		switch v[0] {
		case chunkRaw:
			data = append(data, v[1:]...)
		case chunkZstd:
			// Into a buffer of its own: the decoder's limit counts
			// what dst holds already.
			scratch, err = dec.DecodeAll(v[1:], scratch[:0])
			if err != nil {
				return nil, fmt.Errorf("chunk %d: %w", i, err)
			}
			data = append(data, scratch...)
		default:
			return nil, fmt.Errorf("chunk %d: unknown encoding %d", i, v[0])
		}
		want := min(blobChunkSize, int(size)-start)
		if len(data)-start != want {
			return nil, fmt.Errorf("chunk %d: %d bytes, want %d", i, len(data)-start, want)
		}
		i++
	}
	if i != nchunks {
		return nil, fmt.Errorf("%d chunks, want %d", i, nchunks)
	}
	return data, nil
}

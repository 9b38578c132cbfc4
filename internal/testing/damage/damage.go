// Package damage damages bbolt store files the ways bad disks and stray writes do, for the tests of what reads them.
package damage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// ErrNoValue means the bucket path or the key is not in the file.
var ErrNoValue = errors.New("no such value")

// Flip changes n bytes of the file at path from offset off on (fewer if
// the file ends before), each one XORed with 0xA5: every byte changes,
// the same way every time.
func Flip(path string, off int64, n int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, n)
	got, err := f.ReadAt(b, off)
	if got == 0 && err != nil {
		return fmt.Errorf("flip %d bytes at %d of %s: %w", n, off, path, err)
	}
	for i := range b[:got] {
		b[i] ^= 0xA5
	}
	if _, err := f.WriteAt(b[:got], off); err != nil {
		return err
	}
	return f.Close()
}

// Value returns where the value of key in the bucket at path of bucket
// names is in the file: its offset and size. A nil key is the first key
// of the bucket. A bucket's value is its header and, for an inline
// bucket, its page.
func Value(file string, path []string, key []byte) (off int64, size int, err error) {
	db, err := bolt.Open(file, 0, &bolt.Options{ReadOnly: true})
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		if len(path) == 0 {
			return fmt.Errorf("%w: no bucket named", ErrNoValue)
		}
		b := tx.Bucket([]byte(path[0]))
		for _, name := range path[1:] {
			if b == nil {
				break
			}
			b = b.Bucket([]byte(name))
		}
		if b == nil {
			return fmt.Errorf("%w: no bucket %q", ErrNoValue, path)
		}
		c := b.Cursor()
		var k, v []byte
		if key == nil {
			k, v = c.First()
		} else {
			k, v = c.Seek(key)
			if string(k) != string(key) {
				k = nil
			}
		}
		if k == nil {
			return fmt.Errorf("%w: no key %q in bucket %q", ErrNoValue, key, path)
		}
		if v == nil {
			return fmt.Errorf("%w: key %q of bucket %q is a bucket", ErrNoValue, key, path)
		}
		if len(v) == 0 {
			return fmt.Errorf("%w: key %q of bucket %q has an empty value", ErrNoValue, key, path)
		}
		// The value is a slice of bbolt's mapping of the file.
		off = int64(uintptr(unsafe.Pointer(&v[0])) - db.Info().Data)
		size = len(v)
		return nil
	})
	return off, size, err
}

// Root returns the offset in the file of the root page of the bucket at
// path of bucket names; ErrNoValue if it is an inline bucket, which has no
// page of its own.
func Root(file string, path []string) (int64, error) {
	db, err := bolt.Open(file, 0, &bolt.Options{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var off int64
	err = db.View(func(tx *bolt.Tx) error {
		var b *bolt.Bucket
		for i, name := range path {
			if i == 0 {
				b = tx.Bucket([]byte(name))
			} else if b != nil {
				b = b.Bucket([]byte(name))
			}
		}
		switch {
		case b == nil:
			return fmt.Errorf("%w: no bucket %q", ErrNoValue, path)
		case b.RootPage() == 0:
			return fmt.Errorf("%w: bucket %q is inline", ErrNoValue, path)
		}
		off = int64(b.RootPage()) * int64(db.Info().PageSize)
		return nil
	})
	return off, err
}

// PageSize returns the page size of the bbolt file at path.
func PageSize(path string) (int, error) {
	db, err := bolt.Open(path, 0, &bolt.Options{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	return db.Info().PageSize, nil
}

// Meta layout, after the 16-byte page header (see bbolt's meta).
const (
	pageHeader = 16
	hwmAt      = pageHeader + 40
	txidAt     = pageHeader + 48
	sumAt      = pageHeader + 56
)

// NewestMeta returns which meta page (0 or 1) holds the newest commit of
// the bbolt file at path, and its txid.
func NewestMeta(path string) (page int, txid uint64, err error) {
	size, err := PageSize(path)
	if err != nil {
		return 0, 0, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	t0 := binary.LittleEndian.Uint64(b[txidAt:])
	t1 := binary.LittleEndian.Uint64(b[size+txidAt:])
	if t1 > t0 {
		return 1, t1, nil
	}
	return 0, t0, nil
}

// BreakMeta makes meta page page (0 or 1) of the bbolt file at path
// fail its checksum, its txid left as it is, as a torn write of the
// commit does.
func BreakMeta(path string, page int) error {
	size, err := PageSize(path)
	if err != nil {
		return err
	}
	off := int64(page*size + sumAt)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var sum [8]byte
	if _, err := f.ReadAt(sum[:], off); err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(sum[:], ^binary.LittleEndian.Uint64(sum[:]))
	if _, err := f.WriteAt(sum[:], off); err != nil {
		return err
	}
	return f.Close()
}

// SetHighWater makes the newest meta page of the bbolt file at path claim
// pages pages, with its checksum made right again: a meta page that
// reads as valid but promises more than the file holds.
func SetHighWater(path string, pages uint64) error {
	size, err := PageSize(path)
	if err != nil {
		return err
	}
	page, _, err := NewestMeta(path)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	meta := make([]byte, sumAt+8-pageHeader)
	off := int64(page*size + pageHeader)
	if _, err := f.ReadAt(meta, off); err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(meta[hwmAt-pageHeader:], pages)
	h := fnv.New64a()
	h.Write(meta[:sumAt-pageHeader])
	binary.LittleEndian.PutUint64(meta[sumAt-pageHeader:], h.Sum64())
	if _, err := f.WriteAt(meta, off); err != nil {
		return err
	}
	return f.Close()
}

// RenameBucket renames the bucket old under the buckets of path to new,
// which may be a name no program of the store's would give (escape codes,
// newlines): a hostile store's recording. The bucket's keys and nested
// buckets are copied.
func RenameBucket(file string, path []string, old, new string) error {
	db, err := bolt.Open(file, 0o600, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Update(func(tx *bolt.Tx) error {
		parent := tx.Cursor().Bucket()
		for _, name := range path {
			if parent = parent.Bucket([]byte(name)); parent == nil {
				return fmt.Errorf("bucket %q: %w", name, ErrNoValue)
			}
		}
		src := parent.Bucket([]byte(old))
		if src == nil {
			return fmt.Errorf("bucket %q: %w", old, ErrNoValue)
		}
		dst, err := parent.CreateBucket([]byte(new))
		if err != nil {
			return err
		}
		if err := copyBucket(dst, src); err != nil {
			return err
		}
		return parent.DeleteBucket([]byte(old))
	})
}

// copyBucket copies the keys and nested buckets of src into dst.
func copyBucket(dst, src *bolt.Bucket) error {
	return src.ForEach(func(k, v []byte) error {
		if v != nil {
			return dst.Put(k, v)
		}
		sub, err := dst.CreateBucket(k)
		if err != nil {
			return err
		}
		return copyBucket(sub, src.Bucket(k))
	})
}

package store

import (
	"testing"

	bolt "go.etcd.io/bbolt"
)

// testDB gives the tests the bbolt file of a Store, as its own operations
// have it: open for one transaction.
type testDB struct{ s *Store }

func (d testDB) View(fn func(*bolt.Tx) error) error {
	return d.s.withDB(false, d.s.timeout, func(db *bolt.DB) error { return db.View(fn) })
}

func (d testDB) Update(fn func(*bolt.Tx) error) error {
	return d.s.withDB(true, d.s.timeout, func(db *bolt.DB) error { return db.Update(fn) })
}

// holdLock holds the exclusive lock of the store file at path, as a long
// transaction of another process would, until the returned function is
// called.
func holdLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, _, err := openDB(path, true, false, waitForever, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}
}

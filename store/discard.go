package store

import (
	"errors"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Discard ends the Writer as Finish does and removes its recording, for
// one that should not be kept: its agent never ran, so it holds nothing
// and would only block its name. The recording's live lock is let go of
// only once it is removed, so that no other recorder takes the name in
// between. A recording Create replaced (force) is put back. Calls after
// the first, and after Finish, remove nothing.
func (w *Writer) Discard() error {
	var err error
	w.finishOnce.Do(func() {
		w.stop()
		w.s.mu.Lock()
		err = w.s.update("discard", w.name, func(tx *bolt.Tx) error {
			rs := tx.Bucket(recordingsBucket)
			if rs == nil {
				return nil
			}
			key := []byte(w.name)
			err := rs.DeleteBucket(key)
			if err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
			if !w.replacing {
				return nil
			}
			// The recording this one was to replace comes back.
			if kept := tx.Bucket(replacedBucket); kept != nil && kept.Bucket(key) != nil {
				if err := kept.MoveBucket(key, rs); err != nil {
					return err
				}
			}
			return dropReplaced(tx, key)
		})
		w.s.mu.Unlock()
		if w.live != nil {
			w.live.Close()
		}
		w.s.forget(w)
	})
	return err
}

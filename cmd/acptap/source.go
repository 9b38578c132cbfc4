package main

import (
	"context"
	"errors"
	"os"

	"github.com/acptap/acptap/fixture"
	"github.com/acptap/acptap/store"
)

// source is the store that show, replay, calibrate and diff read: a store file,
// or a directory of exported recordings (acptap export), loaded into a
// temporary store that is removed when the command ends, by signal too.
type source struct {
	path string // as given with --store
	st   *store.Store

	// For a directory: its recordings loaded, and the signal handler
	// that removes their temporary store.
	loaded      *fixture.Loaded
	stopSignals func()
}

// openSource opens the store at path for reading: a store file
// read-only, or, when path is a directory, its exported recordings of
// names (every one if there are none).
func openSource(path string, names []string) (*source, error) {
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		st, err := openStore(path, true)
		if err != nil {
			return nil, err
		}
		return &source{path: path, st: st}, nil
	}
	for _, n := range names {
		if err := store.ValidName(n); err != nil {
			return nil, usageErrorf("%v", err)
		}
	}
	loaded, err := fixture.Load(context.Background(), path, names)
	switch {
	case errors.Is(err, fixture.ErrNoRecording):
		return nil, usageErrorf("%s holds no exported recording (a directory with a meta.json, or a directory of them); export one with: acptap export --dir %s NAME, or pass a store file with --store", path, path)
	case errors.Is(err, fixture.ErrNotInDir):
		return nil, usageErrorf("%v; list the recordings with: acptap show --store %s", err, path)
	case err != nil:
		return nil, fixtureError(err)
	}
	src := &source{path: path, st: loaded.Store, loaded: loaded}
	src.stopSignals = onInterruptDo(loaded.RemoveFiles)
	return src, nil
}

// fixtureError is a usage error about an exported recording that cannot
// be read.
func fixtureError(err error) error {
	switch {
	case errors.Is(err, fixture.ErrNewer):
		return usageErrorf("%v; upgrade acptap", err)
	case errors.Is(err, fixture.ErrMalformed):
		return usageErrorf("%v; fix the file, or export the recording again", err)
	case errors.Is(err, fixture.ErrTranscript):
		return usageErrorf("%v; it is made from the events, not edited: delete it and export the recording again (acptap export --force; --store may be the directory)", err)
	}
	return usageErrorf("%v", err)
}

// signalsHandled says that the command stops by itself on the interrupt
// signals and closes the source: openSource's handler, which removes a
// directory's temporary store and kills acptap, is not needed any more.
func (s *source) signalsHandled() {
	if s.stopSignals != nil {
		s.stopSignals()
	}
}

// isDir says whether the source is a directory of exported recordings.
func (s *source) isDir() bool { return s.loaded != nil }

// writable makes the source writable: a store file is opened again for
// writing, which locks other processes out; a directory's temporary store
// is writable already.
func (s *source) writable() error {
	if s.isDir() {
		return nil
	}
	s.st.Close()
	st, err := openStore(s.path, false)
	if err != nil {
		s.st = nil
		return err
	}
	s.st = st
	return nil
}

// save writes the named recording, changed in the store, back to its
// directory, file by file (see fixture.Export); nothing for a store file.
func (s *source) save(name string) error {
	if !s.isDir() {
		return nil
	}
	return s.loaded.Save(context.Background(), name)
}

// Close closes the store and removes a directory's temporary store.
func (s *source) Close() error {
	if s.isDir() {
		s.signalsHandled()
		return s.loaded.Close()
	}
	if s.st != nil {
		return s.st.Close()
	}
	return nil
}

// allNames returns the names of every recording of st, for --all: none
// is a usage error.
func allNames(st *store.Store, storePath string) ([]string, error) {
	recs, err := st.List()
	if err != nil {
		return nil, usageErrorf("%w", err)
	}
	var names []string
	for _, r := range recs {
		names = append(names, r.Name)
	}
	if len(names) == 0 {
		return nil, usageErrorf("no recordings in %s; record one with acptap record", storePath)
	}
	return names, nil
}

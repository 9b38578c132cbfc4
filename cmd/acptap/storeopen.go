package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/acptap/acptap/store"
)

// openStore opens the store at path, given with --store, and turns its
// failures into one-line usage errors that say how to fix them.
func openStore(path string, readOnly bool) (*store.Store, error) {
	return openStoreFlag(path, readOnly, "--store")
}

// openStoreFlag is openStore of a store given with flag (cp's --to).
func openStoreFlag(path string, readOnly bool, flag string) (*store.Store, error) {
	s, err := store.Open(path, &store.Options{ReadOnly: readOnly})
	if err == nil {
		return s, nil
	}
	if fix, ok := fileSystemFix(err, path, flag); ok {
		return nil, usageErrorf("%v; %s", err, fix)
	}
	var fix string
	switch {
	case errors.Is(err, store.ErrDamaged):
		return nil, damagedError(err, path)
	case errors.Is(err, store.ErrIsDir):
		fix = "pass a store file with " + flag + " (show, replay, calibrate, diff and export also read a directory of exported recordings; acptap import loads one into a store)"
	case errors.Is(err, store.ErrNotRegular):
		fix = "pass the path of a store file, or a new file, with " + flag
	case errors.Is(err, store.ErrNotStore):
		fix = "pass the path of an acptap store, or a new file, with " + flag
	case errors.Is(err, store.ErrLocked):
		fix = "another acptap process is using it; wait for it to end or pass another " + flag
		// (Recorders share a store: this is a process that held the lock
		// for a whole transaction longer than the timeout.)
	case errors.Is(err, store.ErrUnknownFormat):
		fix = "it was written by a newer acptap; upgrade acptap"
	case errors.Is(err, store.ErrNoStore):
		fix = "record one with acptap record, or pass --store (or set ACPTAP_STORE)"
	case errors.Is(err, fs.ErrPermission):
		fix = "pass a writable path with " + flag
	default:
		fix = "check the " + flag + " path"
	}
	return nil, usageErrorf("%v; %s", err, fix)
}

// fileSystemFix says what to do about err, met writing path (given with
// flag), if the file system is the cause: it is full, read-only, or the
// directory path goes into does not exist.
func fileSystemFix(err error, path, flag string) (string, bool) {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "free some space on its disk, or pass a path on another disk with " + flag, true
	case errors.Is(err, syscall.EROFS):
		return "pass a path on a writable file system with " + flag, true
	case errors.Is(err, fs.ErrNotExist) && path != "":
		dir := filepath.Dir(path)
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			return fmt.Sprintf("the directory %s does not exist; create it, or pass a path in an existing directory with %s", dir, flag), true
		}
	}
	return "", false
}

// damagedError is the usage error of a damaged store.
func damagedError(err error, storePath string) error {
	return usageErrorf("%v; run: acptap check --store %s", err, storePath)
}

// warnDamage prints a warning if the store file at path opens but is
// damaged where bbolt looks past it (see store.Options.Warn): every
// command that reads or writes a store says so before it starts.
// Anything else that is wrong with the store, the command's own open
// reports.
func warnDamage(stdio *IO, path string) {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return
	}
	st, err := store.Open(path, &store.Options{ReadOnly: true, Timeout: -1, Warn: func(err error) {
		fmt.Fprintf(stdio.Err, "acptap: warning: %v; run: acptap check --store %s\n", err, path)
	}})
	if err == nil {
		st.Close()
	}
}

// recordingError turns a store error about one recording into a usage error
// with a fix.
func recordingError(err error, storePath string) error {
	switch {
	case errors.Is(err, store.ErrDamaged):
		return damagedError(err, storePath)
	case errors.Is(err, store.ErrNotFound):
		return usageErrorf("%v; list the recordings with: acptap show --store %s", err, storePath)
	case errors.Is(err, store.ErrUnknownFormat):
		return usageErrorf("%v; it was written by a newer acptap; upgrade acptap", err)
	case errors.Is(err, store.ErrBusy):
		return usageErrorf("%v; wait for its acptap record to end (or stop it)", err)
	case errors.Is(err, store.ErrChanged):
		return usageErrorf("%v; run the command again", err)
	}
	return usageErrorf("%w", err)
}

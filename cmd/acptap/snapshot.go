package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/internal/snapshot"
)

// sizeValue is a size flag: bytes, or a number with a unit (64MiB, 512K,
// 1.5GB).
type sizeValue struct{ n int64 }

func (v *sizeValue) String() string {
	if v == nil {
		return ""
	}
	return byteSize(int(v.n))
}

func (v *sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	v.n = n
	return nil
}

// sizeUnits are the units parseSize accepts; K, M and G are binary.
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
}

// parseSize reads a positive size: "1048576", "64MiB", "512k", "1.5 GB".
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	f, err := strconv.ParseFloat(num, 64)
	mult, ok := sizeUnits[unit]
	if err != nil || !ok || num == "" {
		return 0, fmt.Errorf("size %q: want bytes or a number with a unit, e.g. 64MiB, 512K or 1GB", s)
	}
	n := f * mult
	if n < 1 || n >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: want at least 1 byte", s)
	}
	return int64(n), nil
}

// takeSnapshot archives acptap's working directory for record --snapshot,
// leaving out the store when it is inside and masking secrets. It returns nil when opts.Snapshot is off. Its errors are usage
// errors: nothing has been recorded yet.
func takeSnapshot(opts *recordOptions, secrets *redact.Redactor) ([]byte, error) {
	if !opts.Snapshot {
		return nil, nil
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, usageErrorf("record: --snapshot: %v; run acptap in a readable directory, or record without --snapshot", err)
	}
	sopts := snapshot.Options{
		MaxBytes: opts.SnapshotMax,
		MaxFiles: opts.SnapshotMaxFiles,
		Redact:   secrets.Bytes,
	}
	if db, err := filepath.Abs(opts.StorePath); err == nil {
		if rel, err := filepath.Rel(cwd, db); err == nil && filepath.IsLocal(rel) {
			sopts.Exclude = []string{filepath.ToSlash(rel)}
		}
	}
	archive, st, err := snapshot.Take(cwd, sopts)
	switch {
	case errors.Is(err, snapshot.ErrTooLarge):
		return nil, usageErrorf("record: --snapshot: %v; add what the agent does not need to .gitignore, or raise --snapshot-max", err)
	case errors.Is(err, snapshot.ErrTooManyFiles):
		return nil, usageErrorf("record: --snapshot: %v; add what the agent does not need to .gitignore, or raise --snapshot-max-files", err)
	case err != nil:
		return nil, usageErrorf("record: --snapshot: %v; make it readable, add it to .gitignore, or record without --snapshot", err)
	}
	fmt.Fprintf(opts.IO.Err, "acptap: snapshot of %s: %d files, %d directories, %d symlinks, %s (%s compressed); %d entries ignored by .gitignore\n",
		cwd, st.Files, st.Dirs, st.Symlinks, byteSize(int(st.Bytes)), byteSize(len(archive)), st.Ignored)
	if st.Redacted > 0 {
		fmt.Fprintf(opts.IO.Err, "acptap: snapshot: masked secrets in %d files\n", st.Redacted)
	}
	if n := len(st.Skipped); n > 0 {
		shown := st.Skipped[:min(n, 5)]
		more := ""
		if n > len(shown) {
			more = fmt.Sprintf(" and %d more", n-len(shown))
		}
		fmt.Fprintf(opts.IO.Err, "acptap: snapshot: left out %d symlinks leading out of the workspace and special files: %s%s\n",
			n, strings.Join(shown, ", "), more)
	}
	return archive, nil
}

package record

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/acptap/acptap/internal/bytesize"
	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/internal/snapshot"
)

// takeSnapshot archives the working directory for Options.Snapshot,
// leaving out the store when it is inside and masking secrets, and says
// what it took through opts.Logf.
func takeSnapshot(opts Options, secrets *redact.Redactor) ([]byte, error) {
	cwd := opts.Dir
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			return nil, classify(ErrSnapshot, "%w", err)
		}
	}
	sopts := snapshot.Options{
		MaxBytes: opts.SnapshotMaxBytes,
		MaxFiles: opts.SnapshotMaxFiles,
		Redact:   secrets.Bytes,
	}
	if opts.StorePath != "" {
		if db, err := filepath.Abs(opts.StorePath); err == nil {
			if rel, err := filepath.Rel(cwd, db); err == nil && filepath.IsLocal(rel) {
				sopts.Exclude = []string{filepath.ToSlash(rel)}
			}
		}
	}
	archive, st, err := snapshot.Take(cwd, sopts)
	if err != nil {
		return nil, classify(ErrSnapshot, "%w", err)
	}
	opts.Logf("snapshot of %s: %d files, %d directories, %d symlinks, %s (%s compressed); %d entries ignored by .gitignore",
		cwd, st.Files, st.Dirs, st.Symlinks, bytesize.Format(st.Bytes), bytesize.Format(int64(len(archive))), st.Ignored)
	if st.Redacted > 0 {
		opts.Logf("snapshot: masked secrets in %d files", st.Redacted)
	}
	if n := len(st.Skipped); n > 0 {
		shown := st.Skipped[:min(n, 5)]
		more := ""
		if n > len(shown) {
			more = fmt.Sprintf(" and %d more", n-len(shown))
		}
		opts.Logf("snapshot: left out %d symlinks leading out of the workspace and special files: %s%s",
			n, strings.Join(shown, ", "), more)
	}
	return archive, nil
}

// Package snapshot archives a workspace directory, minus what its .gitignore files exclude, and restores it elsewhere.
//
// An archive is a tar stream (archive/tar) compressed with zstd. It holds
// directories, regular files and symbolic links, with their permission
// bits; names are slash paths relative to the archived directory, parents
// before their contents, in name order. Ownership and times are not kept:
// the same tree always gives the same archive.
package snapshot

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Defaults of Options.
const (
	DefaultMaxBytes = 64 << 20
	DefaultMaxFiles = 20000
)

// maxGitignore bounds the size of a .gitignore file read by Take.
const maxGitignore = 1 << 20

// windowSize is the zstd window of archives; Restore refuses larger ones.
const windowSize = 4 << 20

// Options configure Take and Write. The zero value works.
type Options struct {
	// MaxBytes bounds the total size of the file contents archived. If
	// zero or negative, DefaultMaxBytes (64 MiB).
	MaxBytes int64

	// MaxFiles bounds the number of entries archived: directories, files
	// and symlinks. If zero or negative, DefaultMaxFiles (20000).
	MaxFiles int

	// Exclude are slash paths relative to the directory to leave out,
	// with everything below them: a file the caller is writing, say.
	Exclude []string

	// Redact, if not nil, is applied to the contents of every file before
	// it is archived (to mask secrets); it may change their length. With
	// it each file is read into memory whole, one at a time.
	Redact func([]byte) []byte
}

// Stats describe what Take or Write archived.
type Stats struct {
	Dirs, Files, Symlinks int
	// Bytes is the size of the file contents archived.
	Bytes int64
	// Ignored counts the entries left out by .gitignore rules; what is
	// below an ignored directory is not counted.
	Ignored int
	// Redacted counts the files that Options.Redact changed.
	Redacted int
	// Skipped are the slash paths of entries left out because they cannot
	// be restored safely: symlinks whose target is absolute or leads out
	// of the directory (or in a loop), and special files (sockets, named
	// pipes, devices).
	Skipped []string
}

// Take archives the directory dir and returns the archive; see Write.
func Take(dir string, opts Options) ([]byte, Stats, error) {
	var buf bytes.Buffer
	st, err := Write(&buf, dir, opts)
	if err != nil {
		return nil, st, err
	}
	return buf.Bytes(), st, nil
}

// Write archives the contents of the directory dir to w, streaming: it
// holds one file in memory at most, and only with Options.Redact. It
// follows no symlink and reads nothing outside dir.
//
// It always leaves out entries named .git, and those that the .gitignore
// files of dir and its subdirectories exclude, each file applying to its
// own subtree, a deeper one overriding. The syntax understood is git's
// common subset: comments, blank lines, '!' negation, a trailing '/' for
// directories, '/' anchoring, '*', '?', '**' and bracket classes; as in
// git, what is below an excluded directory cannot be included again, and
// a .gitignore that is a symlink is not read.
//
// A file that changes while Write reads it is archived with the size it
// had when opened. Exceeding a limit of opts is ErrTooLarge or
// ErrTooManyFiles; what was written to w is then to be discarded.
func Write(w io.Writer, dir string, opts Options) (Stats, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Stats{}, fmt.Errorf("snapshot %s: %w", dir, err)
	}
	defer root.Close()
	zw, err := zstd.NewWriter(w, zstd.WithWindowSize(windowSize), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return Stats{}, fmt.Errorf("snapshot %s: zstd: %w", dir, err)
	}
	wk := &walker{
		dir:     dir,
		root:    root,
		tw:      tar.NewWriter(zw),
		opts:    opts,
		exclude: make(map[string]bool, len(opts.Exclude)),
	}
	for _, e := range opts.Exclude {
		wk.exclude[path.Clean(e)] = true
	}
	err = wk.walk("", nil)
	if err == nil {
		err = wk.tw.Close()
	}
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrTooManyFiles) {
			err = fmt.Errorf("snapshot %s: %w", dir, err)
		}
		return wk.stats, err
	}
	return wk.stats, nil
}

// walker is the state of one Write.
type walker struct {
	dir     string
	root    *os.Root
	tw      *tar.Writer
	opts    Options
	exclude map[string]bool
	stats   Stats
	entries int
}

// epoch is the modification time of every entry.
var epoch = time.Unix(0, 0)

// walk archives the contents of the directory rel ("" for the root),
// where the patterns pats are in force.
func (wk *walker) walk(rel string, pats []pattern) error {
	f, err := wk.root.Open(orDot(rel))
	if err != nil {
		return err
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		if e.Name() == ".gitignore" && e.Type().IsRegular() {
			more, err := wk.readGitignore(join(rel, e.Name()), rel)
			if err != nil {
				return err
			}
			// Full slice: the subdirectories' appends must not write
			// into the array the siblings share.
			pats = append(pats[:len(pats):len(pats)], more...)
		}
	}
	for _, e := range entries {
		name := join(rel, e.Name())
		if e.Name() == ".git" || wk.exclude[name] {
			continue
		}
		typ := e.Type()
		if ignored(pats, name, typ.IsDir()) {
			wk.stats.Ignored++
			continue
		}
		switch {
		case typ.IsDir():
			err = wk.addDir(name, e, pats)
		case typ.IsRegular():
			err = wk.addFile(name)
		case typ&fs.ModeSymlink != 0:
			err = wk.addSymlink(name)
		default:
			wk.stats.Skipped = append(wk.stats.Skipped, name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (wk *walker) readGitignore(name, dir string) ([]pattern, error) {
	f, err := wk.root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxGitignore+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxGitignore {
		return nil, fmt.Errorf("%s: more than the %s a .gitignore may have", name, formatSize(maxGitignore))
	}
	return parseGitignore(dir, data), nil
}

// count counts one more entry, name, against MaxFiles.
func (wk *walker) count(name string) error {
	wk.entries++
	if wk.entries > wk.opts.MaxFiles {
		return fmt.Errorf("snapshot %s: %w: more than %d (the limit) at %s", wk.dir, ErrTooManyFiles, wk.opts.MaxFiles, name)
	}
	return nil
}

func (wk *walker) addDir(name string, e fs.DirEntry, pats []pattern) error {
	if err := wk.count(name); err != nil {
		return err
	}
	fi, err := e.Info()
	if err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(fi.Mode().Perm()), ModTime: epoch}
	if err := wk.tw.WriteHeader(hdr); err != nil {
		return err
	}
	wk.stats.Dirs++
	return wk.walk(name, pats)
}

func (wk *walker) addFile(name string) error {
	if err := wk.count(name); err != nil {
		return err
	}
	f, err := wk.root.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		// Replaced since the directory was read.
		wk.stats.Skipped = append(wk.stats.Skipped, name)
		return nil
	}
	size := fi.Size()
	if wk.stats.Bytes+size > wk.opts.MaxBytes {
		return fmt.Errorf("snapshot %s: %w of %s at %s (%s)", wk.dir, ErrTooLarge, formatSize(wk.opts.MaxBytes), name, formatSize(size))
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(fi.Mode().Perm()), Size: size, ModTime: epoch}
	if wk.opts.Redact != nil {
		data, err := io.ReadAll(io.LimitReader(f, size))
		if err != nil {
			return err
		}
		if int64(len(data)) < size {
			return fmt.Errorf("%s: shrank while being archived", name)
		}
		red := wk.opts.Redact(data)
		if !bytes.Equal(red, data) {
			wk.stats.Redacted++
		}
		hdr.Size = int64(len(red))
		if err := wk.tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := wk.tw.Write(red); err != nil {
			return err
		}
	} else {
		if err := wk.tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.CopyN(wk.tw, f, size); errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: shrank while being archived", name)
		} else if err != nil {
			return err
		}
	}
	wk.stats.Files++
	wk.stats.Bytes += hdr.Size
	return nil
}

func (wk *walker) addSymlink(name string) error {
	target, err := wk.root.Readlink(name)
	if err != nil {
		return err
	}
	if escapes(wk.root, name, target) {
		wk.stats.Skipped = append(wk.stats.Skipped, name)
		return nil
	}
	if err := wk.count(name); err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: epoch}
	if err := wk.tw.WriteHeader(hdr); err != nil {
		return err
	}
	wk.stats.Symlinks++
	return nil
}

// maxHops bounds the symlinks followed to resolve one: more is a loop.
const maxHops = 40

// escapes reports whether the symlink name (a slash path in root) to
// target resolves, or fails to resolve, outside root. It follows the
// symlinks of root it meets on the way, as the kernel would, so that a
// target that stays inside lexically but passes through a link to the
// root itself ("l/.." with l -> ".") is caught; a component that does not
// exist ends the following and the rest is resolved lexically. An
// absolute target, one of more than maxHops links or one that root cannot
// read escapes.
func escapes(root *os.Root, name, target string) bool {
	if target == "" || isAbs(target) {
		return true
	}
	// The target is relative to the directory holding the link, which
	// may be reached through links itself: resolve both, from the root.
	var cur []string // the resolved components, none a symlink
	todo := strings.Split(target, "/")
	if d := path.Dir(name); d != "." {
		todo = append(strings.Split(d, "/"), todo...)
	}
	hops := 0
	missing := false // a component of cur does not exist
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return true
			}
			cur = cur[:len(cur)-1]
			continue
		}
		cur = append(cur, c)
		if missing {
			continue
		}
		fi, err := root.Lstat(strings.Join(cur, "/"))
		if errors.Is(err, fs.ErrNotExist) {
			missing = true
			continue
		}
		if err != nil {
			return true
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		hops++
		if hops > maxHops {
			return true
		}
		t, err := root.Readlink(strings.Join(cur, "/"))
		if err != nil || t == "" || isAbs(t) {
			return true
		}
		cur = cur[:len(cur)-1]
		todo = append(strings.Split(t, "/"), todo...)
	}
	return false
}

// isAbs reports whether a link target is absolute, or rooted or on a
// volume on Windows.
func isAbs(target string) bool {
	return path.IsAbs(target) || filepath.IsAbs(target) || filepath.VolumeName(target) != "" ||
		runtime.GOOS == "windows" && strings.HasPrefix(target, `\`)
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func orDot(name string) string {
	if name == "" {
		return "."
	}
	return name
}

// formatSize formats n bytes for a message: "64 MiB", "1.5 KiB", "12 B".
func formatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n)/unit, 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

package snapshot

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// maxTrailing bounds what Restore reads after the end of the tar stream,
// to check the zstd frame's checksum.
const maxTrailing = 1 << 20

// Restore extracts an archive of Take or Write into dir, which must be an
// empty directory (else ErrNotEmpty) or not exist yet, its parent
// existing: it is then created with mode 0755. Files, directories and symlinks get the permission bits
// of the archive; ownership is the caller's and times are now.
//
// Restore writes nothing outside dir, whatever the archive holds: an
// entry whose name is absolute, climbs with ".." or is not clean, or a
// symlink that is absolute or resolves outside dir (following the
// symlinks of the archive), is ErrUnsafe; an entry that is neither a
// directory, a regular file nor a symlink, a duplicate, or a damaged
// archive is ErrFormat. On any error dir keeps what was extracted before
// it, minus unsafe symlinks: the caller removes it.
func Restore(archive []byte, dir string) error {
	return restore(archive, dir, math.MaxInt64)
}

// restore is Restore with a bound on the file contents extracted, for the
// fuzz test, whose inputs could otherwise expand to gigabytes on disk.
func restore(archive []byte, dir string, maxBytes int64) error {
	if err := prepareDir(dir); err != nil {
		return fmt.Errorf("restore snapshot into %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("restore snapshot into %s: %w", dir, err)
	}
	defer root.Close()
	if err := extract(root, archive, maxBytes); err != nil {
		return fmt.Errorf("restore snapshot into %s: %w", dir, err)
	}
	return nil
}

// prepareDir creates dir, or checks that it is an empty directory.
func prepareDir(dir string) error {
	err := os.Mkdir(dir, 0o755)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return ErrNotEmpty
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

type restoredDir struct {
	name string
	perm fs.FileMode
}

type restoredLink struct{ name, target string }

// extract writes the entries of archive below root.
func extract(root *os.Root, archive []byte, maxBytes int64) (err error) {
	if len(archive) == 0 {
		return fmt.Errorf("%w: empty archive", ErrFormat)
	}
	dec, err := zstd.NewReader(bytes.NewReader(archive),
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(windowSize))
	if err != nil {
		return fmt.Errorf("%w: zstd: %v", ErrFormat, err)
	}
	defer dec.Close()

	var dirs []restoredDir
	var links []restoredLink
	// However extraction ends, no symlink that leads out of root stays.
	defer func() {
		for _, l := range links {
			if escapes(root, l.name, l.target) {
				root.Remove(l.name)
				if err == nil {
					err = fmt.Errorf("%w: symlink %q -> %q resolves outside the directory", ErrUnsafe, l.name, l.target)
				}
			}
		}
	}()

	var total int64
	tr := tar.NewReader(dec)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrFormat, err)
		}
		name, err := entryName(hdr)
		if err != nil {
			return err
		}
		perm := fs.FileMode(hdr.Mode) & fs.ModePerm
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := restoreDir(root, name); err != nil {
				return err
			}
			dirs = append(dirs, restoredDir{name, perm})
		case tar.TypeReg:
			if hdr.Size > maxBytes-total {
				return fmt.Errorf("%w: %s: file contents over %d bytes", ErrTooLarge, name, maxBytes)
			}
			total += hdr.Size
			if err := restoreFile(root, name, perm, tr); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := restoreSymlink(root, name, hdr.Linkname); err != nil {
				return err
			}
			links = append(links, restoredLink{name, hdr.Linkname})
		default:
			return fmt.Errorf("%w: entry %q of type %q", ErrFormat, name, hdr.Typeflag)
		}
	}
	// Read to the end of the zstd frame, for its checksum.
	if _, err := io.CopyN(io.Discard, dec, maxTrailing); err != nil && err != io.EOF {
		return fmt.Errorf("%w: %v", ErrFormat, err)
	}
	// Directories get their modes last, deepest first: one without write
	// permission would have refused its contents.
	slices.SortStableFunc(dirs, func(a, b restoredDir) int {
		return strings.Count(b.name, "/") - strings.Count(a.name, "/")
	})
	for _, d := range dirs {
		if err := root.Chmod(d.name, d.perm); err != nil {
			return err
		}
	}
	return nil
}

// entryName returns the validated name of an entry, without a trailing
// slash.
func entryName(hdr *tar.Header) (string, error) {
	name := hdr.Name
	if hdr.Typeflag == tar.TypeDir {
		name = strings.TrimSuffix(name, "/")
	}
	if name == "." || !fs.ValidPath(name) || !filepath.IsLocal(filepath.FromSlash(name)) {
		return "", fmt.Errorf("%w: name %q is empty, absolute, climbs with \"..\" or is not clean", ErrUnsafe, hdr.Name)
	}
	return name, nil
}

// parent creates the directories above name that the archive did not
// list.
func parent(root *os.Root, name string) error {
	if d := path.Dir(name); d != "." {
		return root.MkdirAll(d, 0o755)
	}
	return nil
}

func restoreDir(root *os.Root, name string) error {
	if err := parent(root, name); err != nil {
		return err
	}
	// Owner-writable until the end, when it gets its mode.
	err := root.Mkdir(name, 0o700)
	if errors.Is(err, fs.ErrExist) {
		// Made for an earlier entry below it: fine unless it is not a
		// directory of its own.
		if fi, lerr := root.Lstat(name); lerr == nil && fi.IsDir() {
			return nil
		}
		return fmt.Errorf("%w: duplicate entry %q", ErrFormat, name)
	}
	return err
}

func restoreFile(root *os.Root, name string, perm fs.FileMode, r io.Reader) error {
	if err := parent(root, name); err != nil {
		return err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: duplicate entry %q", ErrFormat, name)
	}
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err != nil {
		f.Close()
		return fmt.Errorf("%w: %s: %v", ErrFormat, name, err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func restoreSymlink(root *os.Root, name, target string) error {
	// The lexical check; extract checks again once every entry is out,
	// following the links.
	if target == "" || isAbs(target) {
		return fmt.Errorf("%w: symlink %q -> %q is absolute", ErrUnsafe, name, target)
	}
	if to := path.Join(path.Dir(name), target); to == ".." || strings.HasPrefix(to, "../") {
		return fmt.Errorf("%w: symlink %q -> %q leads outside the directory", ErrUnsafe, name, target)
	}
	if err := parent(root, name); err != nil {
		return err
	}
	err := root.Symlink(target, name)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: duplicate entry %q", ErrFormat, name)
	}
	return err
}

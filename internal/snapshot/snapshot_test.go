package snapshot

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// tree is a directory's contents as "path: description" lines, for
// comparisons: "dir 0755", "file 0644 CONTENT", "link TARGET".
type tree map[string]string

// build makes the entries of want below dir, parents first.
func build(t testing.TB, dir string, want tree) {
	t.Helper()
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var kind, rest string
		var mode int
		if _, err := fmt.Sscanf(want[name], "%s", &kind); err != nil {
			t.Fatal(err)
		}
		rest = strings.TrimPrefix(want[name], kind+" ")
		var err error
		switch kind {
		case "dir":
			fmt.Sscanf(rest, "%o", &mode)
			if err = os.Mkdir(p, 0o755); errors.Is(err, fs.ErrExist) {
				err = nil
			}
			if err == nil {
				err = os.Chmod(p, fs.FileMode(mode))
			}
		case "file":
			fmt.Sscanf(rest, "%o", &mode)
			content, _ := strings.CutPrefix(rest[4:], " ")
			if err = os.WriteFile(p, []byte(content), 0o600); err == nil {
				err = os.Chmod(p, fs.FileMode(mode))
			}
		case "link":
			err = os.Symlink(rest, p)
		case "fifo":
			err = syscall.Mkfifo(p, 0o644)
		default:
			t.Fatalf("build: %q: unknown kind %q", name, kind)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// list describes the entries below dir.
func list(t *testing.T, dir string) tree {
	t.Helper()
	got := tree{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			got[rel] = fmt.Sprintf("dir %04o", fi.Mode().Perm())
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			got[rel] = fmt.Sprintf("file %04o %s", fi.Mode().Perm(), b)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			got[rel] = "link " + target
		default:
			got[rel] = "other " + fi.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func compareTrees(t *testing.T, got, want tree) {
	t.Helper()
	for name, w := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: missing, want %q", name, w)
		} else if g != w {
			t.Errorf("%s: got %q, want %q", name, g, w)
		}
	}
	for name, g := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: got %q, want nothing", name, g)
		}
	}
}

// workspace is a tree with every case Take must handle; kept lists what a
// snapshot of it holds.
var workspace = tree{
	".gitignore":           "file 0644 # build output\n\n*.log\n!keep.log\nbuild/\n/top-only.txt\nnode_modules\n",
	"a.txt":                "file 0644 alpha",
	"run.sh":               "file 0755 #!/bin/sh\necho hi\n",
	"secret.key":           "file 0600 private",
	"debug.log":            "file 0644 ignored by *.log",
	"keep.log":             "file 0644 kept by !keep.log",
	"top-only.txt":         "file 0644 ignored: anchored at the root",
	"build/out.bin":        "file 0644 ignored with its directory",
	"build/keep.log":       "file 0644 ignored: its directory is",
	"node_modules/x/i.js":  "file 0644 ignored",
	".git/config":          "file 0644 never archived",
	"empty":                "dir 0700",
	"sub/.gitignore":       "file 0644 *.tmp\n!important.tmp\ndeep/**/x.txt\n",
	"sub/top-only.txt":     "file 0644 kept: the anchored rule is the root's",
	"sub/a.tmp":            "file 0644 ignored by sub/.gitignore",
	"sub/important.tmp":    "file 0644 kept by sub's negation",
	"sub/debug.log":        "file 0644 ignored by the root's *.log",
	"sub/deep/x.txt":       "file 0644 ignored: ** matches no directory",
	"sub/deep/y/x.txt":     "file 0644 ignored: ** matches one",
	"sub/deep/y/z.txt":     "file 0644 kept",
	"other/a.tmp":          "file 0644 kept: sub's rules stay in sub",
	"link":                 "link a.txt",
	"dirlink":              "link sub/deep",
	"sub/up":               "link ../a.txt",
	"dangling":             "link missing/file",
	"out":                  "link ../outside",
	"abs":                  "link /etc/passwd",
	"self":                 "link .",
	"sneaky":               "link self/..",
	"loop1":                "link loop2",
	"loop2":                "link loop1",
	"fifo":                 "fifo",
	"s.db":                 "file 0644 excluded by Options.Exclude",
	"excluded-dir/f":       "file 0644 excluded with its directory",
	"dir with space/é.txt": "file 0444 unicode and read-only",
}

var kept = tree{
	".gitignore":           workspace[".gitignore"],
	"a.txt":                workspace["a.txt"],
	"run.sh":               workspace["run.sh"],
	"secret.key":           workspace["secret.key"],
	"keep.log":             workspace["keep.log"],
	"empty":                "dir 0700",
	"sub":                  "dir 0755",
	"sub/.gitignore":       workspace["sub/.gitignore"],
	"sub/top-only.txt":     workspace["sub/top-only.txt"],
	"sub/important.tmp":    workspace["sub/important.tmp"],
	"sub/deep":             "dir 0755",
	"sub/deep/y":           "dir 0755",
	"sub/deep/y/z.txt":     workspace["sub/deep/y/z.txt"],
	"other":                "dir 0755",
	"other/a.tmp":          workspace["other/a.tmp"],
	"link":                 "link a.txt",
	"dirlink":              "link sub/deep",
	"sub/up":               "link ../a.txt",
	"dangling":             "link missing/file",
	"self":                 "link .",
	"dir with space":       "dir 0755",
	"dir with space/é.txt": workspace["dir with space/é.txt"],
}

var workspaceOptions = Options{Exclude: []string{"s.db", "excluded-dir"}}

func TestTakeRestore(t *testing.T) {
	src := t.TempDir()
	build(t, src, workspace)
	archive, st, err := Take(src, workspaceOptions)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	var size int64
	files := 0
	for _, d := range kept {
		if strings.HasPrefix(d, "file ") {
			files++
			size += int64(len(d) - len("file 0644 "))
		}
	}
	wantStats := Stats{
		Dirs: 6, Files: files, Symlinks: 5, Bytes: size,
		// debug.log top-only.txt build node_modules; sub/a.tmp
		// sub/debug.log sub/deep/x.txt sub/deep/y/x.txt
		Ignored: 8,
		Skipped: []string{"abs", "fifo", "loop1", "loop2", "out", "sneaky"},
	}
	if !reflect.DeepEqual(st, wantStats) {
		t.Errorf("Stats:\ngot  %+v\nwant %+v", st, wantStats)
	}

	dst := filepath.Join(t.TempDir(), "restored")
	if err := Restore(archive, dst); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	compareTrees(t, list(t, dst), kept)

	// The same tree gives the same archive.
	again, _, err := Take(src, workspaceOptions)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, archive) {
		t.Errorf("a second Take of the same tree gave a different archive (%d bytes, then %d)", len(archive), len(again))
	}
	// And the restored tree archives the same way: nothing it holds is
	// ignored, skipped or lost.
	dst2 := filepath.Join(t.TempDir(), "restored")
	re, _, err := Take(dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Restore(re, dst2); err != nil {
		t.Fatal(err)
	}
	compareTrees(t, list(t, dst2), kept)
}

func TestRestoreIntoExistingEmptyDir(t *testing.T) {
	src := t.TempDir()
	build(t, src, tree{"a": "file 0640 x"})
	archive, _, err := Take(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := Restore(archive, dst); err != nil {
		t.Fatalf("Restore into an empty directory: %v", err)
	}
	compareTrees(t, list(t, dst), tree{"a": "file 0640 x"})
	if err := Restore(archive, dst); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("Restore into a non-empty directory: %v, want ErrNotEmpty", err)
	}
}

func TestTakeLimits(t *testing.T) {
	dir := t.TempDir()
	build(t, dir, tree{
		".gitignore": "file 0644 big.ignored\n",
		"a":          "file 0644 0123456789",
		"b/c":        "file 0644 0123456789",
		// Ignored files count against no limit.
		"big.ignored": "file 0644 " + strings.Repeat("x", 1000),
	})
	// .gitignore (12 bytes) + a + b/c = 32 bytes in 4 entries.
	if _, st, err := Take(dir, Options{MaxBytes: 32, MaxFiles: 4}); err != nil {
		t.Errorf("Take at the limits: %v", err)
	} else if st.Bytes != 32 || st.Files+st.Dirs != 4 {
		t.Errorf("Take at the limits: %+v, want 32 bytes in 4 entries", st)
	}

	_, _, err := Take(dir, Options{MaxBytes: 31})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Take over MaxBytes: %v, want ErrTooLarge", err)
	}
	want := fmt.Sprintf("snapshot %s: file contents over the limit of 31 B at b/c (10 B)", dir)
	if err.Error() != want {
		t.Errorf("Take over MaxBytes:\ngot  %q\nwant %q", err, want)
	}

	_, _, err = Take(dir, Options{MaxFiles: 3})
	if !errors.Is(err, ErrTooManyFiles) {
		t.Fatalf("Take over MaxFiles: %v, want ErrTooManyFiles", err)
	}
	want = fmt.Sprintf("snapshot %s: too many entries: more than 3 (the limit) at b/c", dir)
	if err.Error() != want {
		t.Errorf("Take over MaxFiles:\ngot  %q\nwant %q", err, want)
	}
}

func TestTakeDefaultLimit(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: no disk space, and Take stops before reading it.
	if err := f.Truncate(DefaultMaxBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, _, err = Take(dir, Options{})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "the limit of 64 MiB at huge (64.0 MiB)") {
		t.Errorf("Take of a 64 MiB + 1 file: %v, want ErrTooLarge naming the 64 MiB limit", err)
	}
}

func TestTakeRedact(t *testing.T) {
	dir := t.TempDir()
	build(t, dir, tree{".env": "file 0600 KEY=sk-secret-value\n", "plain": "file 0644 nothing here"})
	redact := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("sk-secret-value"), []byte("[REDACTED:KEY]")) }
	archive, st, err := Take(dir, Options{Redact: redact})
	if err != nil {
		t.Fatal(err)
	}
	if st.Redacted != 1 || st.Bytes != int64(len("KEY=[REDACTED:KEY]\n")+len("nothing here")) {
		t.Errorf("Stats = %+v, want 1 file redacted and the redacted sizes", st)
	}
	dst := filepath.Join(t.TempDir(), "r")
	if err := Restore(archive, dst); err != nil {
		t.Fatal(err)
	}
	compareTrees(t, list(t, dst), tree{".env": "file 0600 KEY=[REDACTED:KEY]\n", "plain": "file 0644 nothing here"})
}

func TestTakeErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	if _, _, err := Take(missing, Options{}); err == nil || !strings.HasPrefix(err.Error(), "snapshot "+missing+": ") {
		t.Errorf("Take of a missing directory: %v", err)
	}
	dir := t.TempDir()
	build(t, dir, tree{".gitignore": "file 0644 " + strings.Repeat("#", maxGitignore+1)})
	if _, _, err := Take(dir, Options{}); err == nil || !strings.Contains(err.Error(), "more than the 1 MiB a .gitignore may have") {
		t.Errorf("Take with a huge .gitignore: %v", err)
	}
	if os.Geteuid() != 0 {
		dir := t.TempDir()
		build(t, dir, tree{"locked/f": "file 0644 x"})
		os.Chmod(filepath.Join(dir, "locked"), 0)
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, "locked"), 0o755) })
		if _, _, err := Take(dir, Options{}); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("Take of an unreadable directory: %v, want a permission error", err)
		}
	}
}

// entry is one entry of a crafted archive.
type entry struct {
	name, link string
	typ        byte
	body       string
}

// craft makes a zstd-compressed tar of entries, as a hostile or damaged
// archive could hold them.
func craft(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return compress(tarBuf.Bytes())
}

func compress(b []byte) []byte {
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

// restoreOutside restores archive into a directory of a fresh parent that
// also holds a sentinel file, and checks that nothing but that directory
// appeared in the parent and that no symlink in it resolves outside it.
func restoreOutside(t testing.TB, archive []byte, maxBytes int64) error {
	t.Helper()
	parent := t.TempDir()
	sentinel := filepath.Join(parent, "sentinel")
	if err := os.WriteFile(sentinel, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(parent, "dst")
	err := restore(archive, dst, maxBytes)
	names, rerr := os.ReadDir(parent)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if len(names) != 2 || names[0].Name() != "dst" || names[1].Name() != "sentinel" {
		t.Fatalf("restore wrote outside its directory: the parent holds %v", names)
	}
	if b, _ := os.ReadFile(sentinel); string(b) != "untouched" {
		t.Fatalf("restore changed a file outside its directory: %q", b)
	}
	realDst, rerr := filepath.EvalSymlinks(dst)
	if rerr != nil {
		t.Fatal(rerr)
	}
	filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		// A dangling link is harmless; a resolving one must stay inside.
		if real, err := filepath.EvalSymlinks(p); err == nil && real != realDst && !strings.HasPrefix(real, realDst+string(filepath.Separator)) {
			target, _ := os.Readlink(p)
			t.Fatalf("restore left %s -> %s, which resolves to %s outside %s", p, target, real, realDst)
		}
		return nil
	})
	// Make what the archive locked removable by t.TempDir's cleanup.
	filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	os.Chmod(dst, 0o755)
	return err
}

func TestRestoreRefusesUnsafeArchives(t *testing.T) {
	const (
		reg, dir, sym, hard = tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink
	)
	tests := []struct {
		name    string
		entries []entry
		want    error
	}{
		{"parent", []entry{{name: "../evil", typ: reg, body: "x"}}, ErrUnsafe},
		{"parent inside", []entry{{name: "a/../../evil", typ: reg, body: "x"}}, ErrUnsafe},
		{"not clean", []entry{{name: "a/./b", typ: reg}}, ErrUnsafe},
		{"dot slash", []entry{{name: "./a", typ: reg}}, ErrUnsafe},
		{"absolute", []entry{{name: "/tmp/evil", typ: reg, body: "x"}}, ErrUnsafe},
		{"root itself", []entry{{name: "./", typ: dir}}, ErrUnsafe},
		{"empty name", []entry{{name: "", typ: reg}}, ErrUnsafe},
		{"dir parent", []entry{{name: "../d/", typ: dir}}, ErrUnsafe},
		{"symlink up", []entry{{name: "l", link: "../sentinel", typ: sym}}, ErrUnsafe},
		{"symlink up from below", []entry{{name: "a/l", link: "../../sentinel", typ: sym}}, ErrUnsafe},
		{"symlink absolute", []entry{{name: "l", link: "/etc", typ: sym}}, ErrUnsafe},
		{"symlink empty", []entry{{name: "l", link: "", typ: sym}}, ErrUnsafe},
		{"symlink through the root", []entry{
			{name: "self", link: ".", typ: sym},
			{name: "up", link: "self/..", typ: sym},
		}, ErrUnsafe},
		{"symlink through the root, later", []entry{
			{name: "up", link: "self/../sentinel", typ: sym},
			{name: "self", link: ".", typ: sym},
		}, ErrUnsafe},
		{"symlink through a linked directory", []entry{
			{name: "self", link: ".", typ: sym},
			{name: "self/up", link: "../sentinel", typ: sym},
		}, ErrUnsafe},
		{"write through an escaping link", []entry{
			{name: "self", link: ".", typ: sym},
			{name: "up", link: "self/..", typ: sym},
			{name: "up/evil", typ: reg, body: "x"},
		}, nil},
		{"hard link", []entry{{name: "a", typ: reg}, {name: "h", link: "a", typ: hard}}, ErrFormat},
		{"duplicate file", []entry{{name: "a", typ: reg}, {name: "a", typ: reg}}, ErrFormat},
		{"file over a symlink", []entry{{name: "a", link: ".", typ: sym}, {name: "a", typ: reg}}, ErrFormat},
		{"dir over a symlink", []entry{{name: "a", link: ".", typ: sym}, {name: "a/", typ: dir}}, ErrFormat},
		{"char device", []entry{{name: "null", typ: tar.TypeChar}}, ErrFormat},
		{"fifo", []entry{{name: "p", typ: tar.TypeFifo}}, ErrFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := restoreOutside(t, craft(t, tt.entries...), 1<<20)
			if err == nil {
				t.Fatalf("Restore succeeded, want an error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Restore: %v, want %v", err, tt.want)
			}
		})
	}
}

func TestRestoreKeepsSafeLinks(t *testing.T) {
	const reg, sym = tar.TypeReg, tar.TypeSymlink
	archive := craft(t,
		entry{name: "a/b/f", typ: reg, body: "deep"},
		entry{name: "a/b/up", link: "../../top", typ: sym},
		entry{name: "a/self", link: ".", typ: sym},
		entry{name: "a/loop", link: "self/..", typ: sym}, // the root: inside
		entry{name: "top", typ: reg, body: "t"},
	)
	dst := filepath.Join(t.TempDir(), "d")
	if err := Restore(archive, dst); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	compareTrees(t, list(t, dst), tree{
		"a": "dir 0755", "a/b": "dir 0755", "a/b/f": "file 0644 deep",
		"a/b/up": "link ../../top", "a/self": "link .", "a/loop": "link self/..",
		"top": "file 0644 t",
	})
}

func TestRestoreRefusesDamage(t *testing.T) {
	src := t.TempDir()
	build(t, src, tree{"a": "file 0644 " + strings.Repeat("hello ", 1000)})
	archive, _, err := Take(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"empty":     nil,
		"not zstd":  []byte("hello, world"),
		"truncated": archive[:len(archive)/2],
		"bad checksum": func() []byte {
			b := bytes.Clone(archive)
			b[len(b)-1] ^= 0xff
			return b
		}(),
		"tar garbage": compress(bytes.Repeat([]byte("x"), 2048)),
	} {
		if err := restoreOutside(t, data, 1<<20); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: Restore: %v, want ErrFormat", name, err)
		}
	}
}

func FuzzRestore(f *testing.F) {
	src := f.TempDir()
	build(f, src, tree{
		"a/b": "file 0755 x", "l": "link a/b", "d": "dir 0500", "e/f": "file 0400 y",
	})
	if archive, _, err := Take(src, Options{}); err == nil {
		f.Add(archive)
	}
	const reg, sym = tar.TypeReg, tar.TypeSymlink
	f.Add(craft(f, entry{name: "self", link: ".", typ: sym}, entry{name: "up", link: "self/..", typ: sym}, entry{name: "up/x", typ: reg, body: "x"}))
	f.Add(craft(f, entry{name: "../x", typ: reg}))
	f.Add(craft(f, entry{name: "l", link: "../x", typ: sym}))
	f.Add([]byte("not an archive"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// As given, and as a tar compressed here, so that the fuzzer
		// explores tar headers without having to forge zstd.
		restoreOutside(t, data, 1<<20)
		restoreOutside(t, compress(data), 1<<20)
	})
}

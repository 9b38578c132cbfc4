package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/acptap/acptap/store"
	"github.com/acptap/acptap/timeline"
)

// checkHTMLFlags checks show's --html and -o before anything is opened.
func checkHTMLFlags(opts *showOptions) error {
	switch {
	case opts.Output != "" && !opts.HTML:
		return usageErrorf("-o %s without --html; pass --html to write the page, or leave -o out", opts.Output)
	case opts.HTML && opts.JSON:
		return usageErrorf("both --html and --json given; pass one of them")
	case opts.HTML && opts.Follow:
		return usageErrorf("both --html and --follow given; pass one of them")
	case opts.HTML && opts.Name == "":
		return usageErrorf("--html needs a recording; usage: acptap show --html NAME [-o FILE]")
	}
	return nil
}

// showHTML writes the page of a recording to opts.Output, or stdout.
func showHTML(st *store.Store, opts *showOptions) error {
	page, err := timeline.Recording(st, opts.Name)
	if err != nil {
		return recordingError(err, opts.StorePath)
	}
	if opts.Output == "" {
		out := bufio.NewWriterSize(opts.IO.Out, 64<<10)
		if err := timeline.Write(out, page); err != nil {
			return err
		}
		return out.Flush()
	}
	return writeFileAtomic(opts.Output, "-o", func(w io.Writer) error { return timeline.Write(w, page) })
}

// writeFileAtomic writes a file, given with flag, through a temporary
// file in its directory, renamed into place when complete: a failed write
// leaves no half page, and no temporary file either.
func writeFileAtomic(path, flag string, write func(io.Writer) error) error {
	// The rename would fail only once the page is written, and in the
	// temporary file's words.
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return usageErrorf("%s %s is a directory; pass the path of a file, such as %s", flag, path, filepath.Join(path, "page.html"))
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		if fix, ok := fileSystemFix(err, path, flag); ok {
			return usageErrorf("cannot write %s: %v; %s", path, unwrapPath(err), fix)
		}
		return usageErrorf("cannot write %s: %v; pass a file in a directory that exists and is writable", path, unwrapPath(err))
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename, there is nothing left to remove
	w := bufio.NewWriterSize(f, 64<<10)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		if fix, ok := fileSystemFix(err, path, flag); ok {
			return usageErrorf("cannot write %s: %v; %s", path, unwrapPath(err), fix)
		}
		return usageErrorf("cannot write %s: %v", path, unwrapPath(err))
	}
	return nil
}

// unwrapPath drops the path an *os.PathError repeats.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

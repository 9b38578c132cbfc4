package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/acptap/acptap/store"
	"github.com/acptap/acptap/timeline"
)

// checkHTMLFlags checks show's --html, -o and --open before anything is
// opened.
func checkHTMLFlags(opts *showOptions) error {
	switch {
	case opts.Output != "" && !opts.HTML:
		return usageErrorf("-o %s without --html; pass --html to write the page, or leave -o out", opts.Output)
	case opts.Open && !opts.HTML:
		return usageErrorf("--open without --html; pass --html to write the page and open it")
	case opts.HTML && opts.JSON:
		return usageErrorf("both --html and --json given; pass one of them")
	case opts.HTML && opts.Follow && opts.Output != "":
		return usageErrorf("-o %s with --html --follow, whose page is served, not written; leave -o out, or --follow for a page of the recording so far", opts.Output)
	case opts.HTML && opts.Name == "":
		return usageErrorf("--html needs a recording; usage: acptap show --html [--follow] NAME [-o FILE] [--open]")
	}
	return nil
}

// showHTML writes the page of a recording: to -o FILE; to stdout when it
// is a pipe or a file; else (a terminal, which 50 KB of HTML would only
// flood) and with --open, to a new file in the temp directory, whose path
// it prints. With --open it then opens the page in the browser.
func showHTML(st *store.Store, opts *showOptions) error {
	page, err := timeline.Recording(st, opts.Name)
	if err != nil {
		return recordingError(err, opts.StorePath)
	}
	page.Acptap = version()
	write := func(w io.Writer) error { return timeline.Write(w, page) }
	path := opts.Output
	switch {
	case path != "":
		err = writeFileAtomic(path, "-o", write)
	case !opts.Open && !isTerminal(opts.IO.Out):
		out := bufio.NewWriterSize(opts.IO.Out, 64<<10)
		if err := write(out); err != nil {
			return err
		}
		return out.Flush()
	default:
		if path, err = writeTempPage(opts.Name, write); err == nil {
			_, err = fmt.Fprintln(opts.IO.Out, path)
		}
	}
	if err != nil {
		return err
	}
	if opts.Open {
		return openInBrowser(path, opts.IO)
	}
	return nil
}

// writeTempPage writes a page to a new file of the temp directory
// ($TMPDIR), acptap-NAME-*.html, and returns its path. Not the current
// directory: it may be a repository that a stray page would dirty, or not
// writable. The file is the user's alone (0600), as the recording it
// shows is, and a new one each time, so that two pages never clash.
func writeTempPage(name string, write func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp("", "acptap-"+name+"-*.html")
	if err != nil {
		return "", usageErrorf("cannot write the page to the temp directory: %v; pass -o FILE", unwrapPath(err))
	}
	w := bufio.NewWriterSize(f, 64<<10)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", usageErrorf("cannot write %s: %v; pass -o FILE", f.Name(), unwrapPath(err))
	}
	return f.Name(), nil
}

// opener is the command that opens a file or a URL in the user's
// browser: open on macOS, xdg-open elsewhere.
func opener() string {
	if runtime.GOOS == "darwin" {
		return "open"
	}
	return "xdg-open"
}

// openInBrowser opens target, a file or a URL, with opener, which it
// waits for: xdg-open returns once the browser has it, and a browser in
// the terminal (xdg-open may pick one) needs the terminal until then.
func openInBrowser(target string, stdio *IO) error {
	cmd := exec.Command(opener(), target)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.In, stdio.Err, stdio.Err
	if err := cmd.Run(); err != nil {
		return usageErrorf("cannot open %s: %s: %w; open it in a browser yourself", target, opener(), err)
	}
	return nil
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

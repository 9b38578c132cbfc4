package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runOnTerminal runs acptap with its stdout a terminal and returns what
// it wrote there, and its stderr.
func runOnTerminal(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	term, reader := openPTY(t)
	cmd := exec.Command("acptap", args...)
	cmd.Dir, cmd.Env = dir, env
	var errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = term, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Read as it writes: a terminal's buffer is small, and a program
	// that wrote a page there would block.
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(&out, reader) // ends with EIO once the last writer is gone
	}()
	err := cmd.Wait()
	term.Close()
	<-done
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(out.String(), "\r\n", "\n"), errOut.String(), code
}

// fakeOpener puts an xdg-open (and open, macOS's) first on PATH that
// writes its arguments to the file it returns.
func fakeOpener(t *testing.T) (pathEnv, log string) {
	t.Helper()
	bin := t.TempDir()
	log = filepath.Join(t.TempDir(), "opened")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" >> " + log + "\n"
	for _, name := range []string{"xdg-open", "open"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), log
}

// TestShowHTMLOnTerminal: show --html on a terminal writes the page to a
// new file of the temp directory and prints its path, not the page; a
// pipe still gets the page; --open opens the page written, wherever it
// went, with the browser opener.
func TestShowHTMLOnTerminal(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "typo", agentEnv(), nil, "--read", "notes.txt")
	tmp := t.TempDir()
	pathEnv, opened := fakeOpener(t)
	env := agentEnv("TMPDIR="+tmp, pathEnv)

	out, errOut, code := runOnTerminal(t, dir, env, "show", "--store", db, "--html", "typo")
	if code != 0 {
		t.Fatalf("show --html on a terminal: exit %d: %s", code, errOut)
	}
	path := strings.TrimSpace(out)
	if filepath.Dir(path) != tmp || !strings.HasPrefix(filepath.Base(path), "acptap-typo-") || !strings.HasSuffix(path, ".html") {
		t.Fatalf("show --html on a terminal printed %q, want the path of a page in %s", out, tmp)
	}
	page, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(page, []byte("<!doctype html>")) || !bytes.Contains(page, []byte("fs/read_text_file")) {
		t.Fatalf("the page at %s: %v\n%.200s", path, err, page)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the page's mode is %v, want 0600: it shows the recording", fi.Mode())
	}
	if _, err := os.Stat(opened); err == nil {
		t.Errorf("show --html without --open opened the page")
	}

	// A second page is a file of its own.
	out2, _, _ := runOnTerminal(t, dir, env, "show", "--store", db, "--html", "--open", "typo")
	path2 := strings.TrimSpace(out2)
	if path2 == path || !strings.HasPrefix(path2, tmp) {
		t.Errorf("the second page went to %q, the first to %q", path2, path)
	}
	if got, _ := os.ReadFile(opened); string(got) != path2+"\n" {
		t.Errorf("--open opened %q, want %q", got, path2)
	}

	// A pipe gets the page itself.
	stdout, _, code := runAcptap(t, dir, env, "show", "--store", db, "--html", "typo")
	if code != 0 || !strings.HasPrefix(stdout, "<!doctype html>") {
		t.Errorf("show --html to a pipe: exit %d, %.60q", code, stdout)
	}
	// --open to a pipe writes the page to a file too, and opens it; -o
	// FILE --open opens FILE and prints nothing.
	os.Remove(opened)
	stdout, _, code = runAcptap(t, dir, env, "show", "--store", db, "--html", "--open", "typo")
	if got, _ := os.ReadFile(opened); code != 0 || string(got) != stdout {
		t.Errorf("show --html --open to a pipe: exit %d, printed %q, opened %q", code, stdout, got)
	}
	os.Remove(opened)
	file := filepath.Join(t.TempDir(), "typo.html")
	stdout, _, code = runAcptap(t, dir, env, "show", "--store", db, "--html", "-o", file, "--open", "typo")
	if got, _ := os.ReadFile(opened); code != 0 || stdout != "" || string(got) != file+"\n" {
		t.Errorf("show --html -o FILE --open: exit %d, printed %q, opened %q", code, stdout, got)
	}

	// An opener that fails: the page stays, the error says where.
	bin := t.TempDir()
	for _, name := range []string{"xdg-open", "open"} {
		os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\nexit 3\n"), 0o755)
	}
	stdout, errOut, code = runAcptap(t, dir, agentEnv("TMPDIR="+tmp, "PATH="+bin+":"+os.Getenv("PATH")), "show", "--store", db, "--html", "--open", "typo")
	if code != ExitUsage || !strings.Contains(errOut, "cannot open "+strings.TrimSpace(stdout)) {
		t.Errorf("a failing opener: exit %d, stdout %q, stderr %q", code, stdout, errOut)
	}
}

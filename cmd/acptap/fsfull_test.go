package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFullAndReadOnlyFileSystem runs acptap on a real full disk (a tmpfs
// of 40 KiB) and a real read-only file system, each mounted in a mount
// namespace of its own (unshare -rm): the error says what failed and what
// to do, naming the flag to change (issue 24 §5).
func TestFullAndReadOnlyFileSystem(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare is not installed: cannot mount a small file system")
	}
	if out, err := exec.Command("unshare", "-rm", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot make a mount namespace here (unshare -rm needs user namespaces): %v: %s", err, out)
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := exec.Command("mkdir", mnt).Run(); err != nil {
		t.Fatal(err)
	}
	// Far more than 40 KiB of agent output.
	chatty := []string{"--", "sh", "-c", "head -c 300000 /dev/urandom | base64 -w 100"}
	src := filepath.Join(dir, "src.db")
	if _, stderr, code := runAcptap(t, dir, agentEnv(), append([]string{"record", "--store", src, "--name", "big"}, chatty...)...); code != 0 {
		t.Fatalf("recording the source: exit %d: %s", code, stderr)
	}
	// run runs acptap with args on a fresh tmpfs at mnt, made read-only
	// if ro.
	run := func(ro bool, args ...string) (string, int) {
		t.Helper()
		script := `mount -t tmpfs -o size=40k tmpfs "$0" || exit 99; ` +
			`if [ "$1" = ro ]; then mount -o remount,ro "$0" || exit 99; fi; shift; exec acptap "$@"`
		mode := "rw"
		if ro {
			mode = "ro"
		}
		cmd := exec.Command("unshare", append([]string{"-rm", "sh", "-c", script, mnt, mode}, args...)...)
		cmd.Dir = dir
		cmd.Env = agentEnv()
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code == 99 {
			t.Skipf("cannot mount a tmpfs in the namespace: %s", out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1], code
	}
	tests := []struct {
		ro   bool
		args []string
		want string
	}{
		{false, append([]string{"record", "--store", filepath.Join(mnt, "s.db"), "--name", "a"}, chatty...),
			"no space left on device; what was committed before the failure is kept; free some space on its disk, or pass a path on another disk with --store"},
		{false, []string{"cp", "--store", src, "--to", filepath.Join(mnt, "d.db"), "big"},
			"no space left on device; free some space on its disk, or pass a path on another disk with --to"},
		{false, []string{"export", "--store", src, "--dir", filepath.Join(mnt, "x"), "big"},
			"no space left on device; free some space on its disk, or pass a path on another disk with --dir"},
		{true, append([]string{"record", "--store", filepath.Join(mnt, "s.db")}, chatty...),
			"read-only file system; pass a path on a writable file system with --store"},
		{true, []string{"cp", "--store", src, "--to", filepath.Join(mnt, "d.db"), "big"},
			"read-only file system; pass a path on a writable file system with --to"},
		{true, []string{"export", "--store", src, "--dir", filepath.Join(mnt, "x"), "big"},
			"read-only file system; pass a path on a writable file system with --dir"},
		{true, []string{"show", "--store", src, "--html", "-o", filepath.Join(mnt, "p.html"), "big"},
			"read-only file system; pass a path on a writable file system with -o"},
	}
	for _, tt := range tests {
		last, code := run(tt.ro, tt.args...)
		if code != ExitUsage || !strings.HasPrefix(last, "acptap: ") || !strings.HasSuffix(last, tt.want) {
			t.Errorf("%v (read-only %v): exit %d, last line %q; want exit %d, a line ending %q", tt.args, tt.ro, code, last, ExitUsage, tt.want)
		}
	}
}

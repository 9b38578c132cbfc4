package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns the terminal side of a new pseudo-terminal, which a
// program writes to as its terminal, and the side that reads what it
// wrote; or skips.
func openPTY(t *testing.T) (tty, ptmx *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlocking a pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("naming a pseudo-terminal: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return tty, ptmx
}

// TestColorFor: colour on a terminal only, and never with NO_COLOR set.
func TestColorFor(t *testing.T) {
	tty, _ := openPTY(t)
	for _, tt := range []struct {
		name    string
		w       io.Writer
		noColor string
		want    bool
	}{
		{"terminal", tty, "", true},
		{"terminal with NO_COLOR", tty, "1", false},
		{"pipe", new(bytes.Buffer), "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NO_COLOR", tt.noColor)
			if got := colorFor(tt.w); got != tt.want {
				t.Errorf("colorFor = %v, want %v", got, tt.want)
			}
		})
	}
	if got, want := painter(true).paint(colorRed, "x"), colorRed+"x"+colorReset; got != want {
		t.Errorf("paint on = %q, want %q", got, want)
	}
	if got := painter(false).paint(colorRed, "x"); got != "x" {
		t.Errorf("paint off = %q, want %q", got, "x")
	}
}

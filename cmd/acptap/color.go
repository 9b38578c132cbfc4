package main

import (
	"io"
	"os"
)

// ANSI colours of the human output.
const (
	colorReset  = "\x1b[0m"
	colorDim    = "\x1b[2m"
	colorRed    = "\x1b[31m"
	colorGreen  = "\x1b[32m"
	colorYellow = "\x1b[33m"
	colorCyan   = "\x1b[36m"
)

// colorFor reports whether output to w is coloured: w is a terminal and
// NO_COLOR (https://no-color.org) is unset or empty. Every command decides
// here.
func colorFor(w io.Writer) bool {
	return isTerminal(w) && os.Getenv("NO_COLOR") == ""
}

// isTerminal reports whether w is a character device, for colour and
// column decisions.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// painter colours strings when on.
type painter bool

// paint wraps s in the colour c when p is on.
func (p painter) paint(c, s string) string {
	if !p {
		return s
	}
	return c + s + colorReset
}

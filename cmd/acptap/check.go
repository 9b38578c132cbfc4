package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/store"
)

type checkOptions struct {
	IO        *IO
	StorePath string
	Names     []string
	Salvage   string // the new store to copy what reads into; "" to only check
}

func checkCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "verify a store, or copy what reads of a damaged one into a new store",
		ArgsUsage: "[NAME...]",
		Description: "Checks the store file's pages as bbolt's consistency check does, its layout and format, and of\n" +
			"each recording (every one, or those named): its metadata and format, every event value, Seqs\n" +
			"contiguous, counters, exchanges, blobs (the workspace snapshot). Prints each problem on one line\n" +
			"naming the recording and the event, then a summary. Exits 0 if there is none, 1 if there are.\n" +
			"--salvage DST copies every recording that reads into the new store DST, and of a damaged one,\n" +
			"what reads (its events up to the first that does not), marked as salvaged.",
		Flags: []cli.Flag{
			storeFlag(storeFileUsage),
			&cli.StringFlag{Name: "salvage", Usage: "copy what reads into the new store `DST` (which must not exist)"},
		},
		Action: func(c *cli.Context) error {
			if c.IsSet("salvage") && c.String("salvage") == "" {
				return usageErrorf("--salvage is empty; pass the path of a new store file")
			}
			return runCheck(&checkOptions{IO: stdio, StorePath: c.String("store"), Names: c.Args().Slice(), Salvage: c.String("salvage")})
		},
	}
}

func runCheck(opts *checkOptions) error {
	if opts.Salvage != "" && len(opts.Names) > 0 {
		return usageErrorf("--salvage copies every recording that reads; pass no NAME with it")
	}
	out := opts.IO.Out
	problems := 0
	recordings := map[string]bool{}
	report := func(p store.Problem) {
		problems++
		if p.Recording != "" {
			recordings[p.Recording] = true
		}
		fmt.Fprintln(out, oneLine(p.String()))
	}
	if opts.Salvage != "" {
		if _, err := os.Lstat(opts.Salvage); err == nil {
			return usageErrorf("salvage into %s: %v; pass the path of a new store file to --salvage", opts.Salvage, fs.ErrExist)
		}
		// A salvage stopped by a signal leaves no half-written store.
		stop := onInterruptDo(func() { os.Remove(opts.Salvage) })
		defer stop()
		res, err := store.Salvage(opts.StorePath, opts.Salvage, report)
		if err != nil {
			return checkError(err, opts)
		}
		fmt.Fprintf(out, "salvaged into %s: %s whole%s%s\n", opts.Salvage, plural(len(res.Whole), "recording"), listed(", %d in part (%s)", res.Partial), listed(", %d lost (%s)", res.Lost))
		if problems > 0 {
			return exitCode(ExitDiverged)
		}
		return nil
	}
	err := store.Check(opts.StorePath, &store.CheckOptions{Names: opts.Names}, report)
	if err != nil {
		return checkError(err, opts)
	}
	if problems == 0 {
		fmt.Fprintf(out, "%s: no problems\n", opts.StorePath)
		return nil
	}
	of := ""
	if len(recordings) > 0 {
		of = fmt.Sprintf(" (%s)", plural(len(recordings), "recording"))
	}
	fmt.Fprintf(out, "%s: %s%s%s\n", opts.StorePath, plural(problems, "problem"), of, salvageHint(opts))
	return exitCode(ExitDiverged)
}

// listed is format of the count and the names, or "" if there are none.
func listed(format string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	shown := make([]string, len(names))
	for i, n := range names {
		shown[i] = shownName(n) // a damaged key may be any bytes
	}
	return fmt.Sprintf(format, len(names), strings.Join(shown, ", "))
}

// plural is n things.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

func salvageHint(opts *checkOptions) string {
	return fmt.Sprintf("; copy what reads into a new store with: acptap check --store %s --salvage NEW.db", opts.StorePath)
}

// oneLine makes a problem's text one line: a damaged key or value can
// hold anything.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// checkError is the usage error of a check that could not be made.
func checkError(err error, opts *checkOptions) error {
	switch {
	case errors.Is(err, fs.ErrExist):
		return usageErrorf("%v; pass the path of a new store file to --salvage", err)
	case errors.Is(err, store.ErrNotFound):
		return recordingError(err, opts.StorePath)
	case errors.Is(err, store.ErrNoStore):
		return usageErrorf("%v; pass the store to check with --store (or set ACPTAP_STORE)", err)
	case errors.Is(err, store.ErrNotStore), errors.Is(err, store.ErrIsDir), errors.Is(err, store.ErrNotRegular):
		return usageErrorf("%v; pass the path of an acptap store file with --store", err)
	case errors.Is(err, store.ErrLocked):
		return usageErrorf("%v; another acptap process is using it; wait for it to end", err)
	}
	return usageErrorf("%v", err)
}

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/fixture"
)

type exportOptions struct {
	IO        *IO
	StorePath string
	Dir       string // where the recordings' directories go
	Names     []string
	All       bool
	Force     bool // replace earlier exports
}

const exportUsage = "acptap export [--dir DIR] NAME... or acptap export [--dir DIR] --all"

func exportCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write recordings as directories of text files, for a repository",
		ArgsUsage: "NAME... | --all",
		Description: "Writes each recording as the directory DIR/NAME: transcript.md (the sessions' turns as text,\n" +
			"for review), meta.json, events.ndjson (one event a line), llm/0001/... (each LLM exchange:\n" +
			"its request as pretty JSON, its response as sent and the chunks it came in), blobs/\n" +
			"(snapshot, calibrated rules), machine.json (the recording machine's environment and\n" +
			"directories, which the other files name /acptap/cwd, /acptap/home, /acptap/tmp) and a\n" +
			".gitattributes. The same recording always gives the same bytes. show, replay, calibrate,\n" +
			"diff and export read such a directory, or a directory of them, as --store; acptap import\n" +
			"loads them into a store. --force replaces an earlier export, rewriting only the files that\n" +
			"change and removing only files of the export's layout: files of yours stay.",
		Flags: []cli.Flag{
			storeFlag(storeReadUsage),
			&cli.StringFlag{Name: "dir", Value: ".", DefaultText: "the current directory", Usage: "write the recordings' directories into `DIR` (created if missing)"},
			&cli.BoolFlag{Name: "all", Usage: "export every recording in the store"},
			&cli.BoolFlag{Name: "force", Usage: "replace an earlier export of the same name (files an export did not write stay)"},
		},
		Action: func(c *cli.Context) error {
			return runExport(&exportOptions{
				IO: stdio, StorePath: c.String("store"), Dir: c.String("dir"),
				Names: c.Args().Slice(), All: c.Bool("all"), Force: c.Bool("force"),
			})
		},
	}
}

func runExport(opts *exportOptions) error {
	switch {
	case opts.All && len(opts.Names) > 0:
		return usageErrorf("both --all and names given; pass one or the other")
	case !opts.All && len(opts.Names) == 0:
		return usageErrorf("no recording named; usage: %s", exportUsage)
	}
	if opts.Dir == "" {
		return usageErrorf("--dir is empty; pass a directory (created if missing), or leave --dir out for the current one")
	}
	if fi, err := os.Stat(opts.Dir); err == nil && !fi.IsDir() {
		return usageErrorf("--dir %s is not a directory; pass a directory (created if missing)", opts.Dir)
	}
	// A directory of exported recordings is read as a store too: an
	// export of it writes its files again, a transcript.md deleted
	// included.
	source, err := openSource(opts.StorePath, opts.Names)
	if err != nil {
		return err
	}
	ctx, stop := onInterrupt()
	defer stop() // last: a signal kills acptap once the source is closed
	defer source.Close()
	source.signalsHandled()
	st := source.st
	names := opts.Names
	if opts.All {
		var err error
		if names, err = allNames(st, opts.StorePath); err != nil {
			return err
		}
	}
	// Check everything first: a typo or a directory in the way writes
	// nothing.
	var srcs []fixture.Source
	for _, name := range names {
		src, err := fixture.FromStore(st, name)
		if err != nil {
			return recordingError(err, opts.StorePath)
		}
		srcs = append(srcs, src)
		dst := filepath.Join(opts.Dir, name)
		fi, err := os.Stat(dst)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return usageErrorf("%v; pass another --dir", err)
		case !fi.IsDir() || !fixture.IsRecording(dst):
			return usageErrorf("%s exists and is not an exported recording; move it away or pass another --dir", dst)
		case !opts.Force:
			return usageErrorf("%s exists; pass --force to replace it with this export", dst)
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		if fix, ok := fileSystemFix(err, "", "--dir"); ok {
			return usageErrorf("%v; %s", err, fix)
		}
		return usageErrorf("%v; pass a writable --dir", err)
	}
	for i, src := range srcs {
		dst := filepath.Join(opts.Dir, names[i])
		if err := fixture.Export(ctx, src, dst); err != nil {
			if errors.Is(err, fixture.ErrInTheWay) {
				return usageErrorf("export %s: %w; move it away, or pass another --dir", names[i], err)
			}
			if errors.Is(err, fixture.ErrNotExportable) {
				return usageErrorf("export %s: %v; export it with the acptap that recorded it", names[i], err)
			}
			if fix, ok := fileSystemFix(err, "", "--dir"); ok {
				return usageErrorf("export %s: %w; %s", names[i], err, fix)
			}
			return usageErrorf("export %s: %w", names[i], err)
		}
		fmt.Fprintf(opts.IO.Err, "acptap: exported %q to %s\n", names[i], dst)
	}
	return nil
}

package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/fixture"
	"github.com/acptap/acptap/store"
)

type importOptions struct {
	IO        *IO
	StorePath string
	Dirs      []string // exported recordings, or directories of them
	Force     bool     // replace recordings of the same names
}

func importCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "read recordings exported with acptap export into a store",
		ArgsUsage: "DIR...",
		Description: "Each DIR is an exported recording (a directory with a meta.json, named as the recording)\n" +
			"or a directory of them. Every directory is read whole before anything is written; a name the\n" +
			"store has already is an error unless --force.",
		Flags: []cli.Flag{
			storeFlag(storeCreateUsage),
			&cli.BoolFlag{Name: "force", Usage: "replace recordings of the same names"},
		},
		Action: func(c *cli.Context) error {
			return runImport(&importOptions{IO: stdio, StorePath: c.String("store"), Dirs: c.Args().Slice(), Force: c.Bool("force")})
		},
	}
}

func runImport(opts *importOptions) error {
	if len(opts.Dirs) == 0 {
		return usageErrorf("no directory named; usage: acptap import DIR...")
	}
	// Read everything first: a damaged file or a name given twice
	// writes nothing.
	var dirs []*fixture.Dir
	from := map[string]string{}
	for _, arg := range opts.Dirs {
		found, err := fixture.Find(arg)
		if errors.Is(err, fixture.ErrNoRecording) {
			return usageErrorf("%s holds no exported recording (a directory with a meta.json, or a directory of them); export one with acptap export", arg)
		}
		if err != nil {
			return usageErrorf("%v; pass directories written by acptap export", err)
		}
		for _, path := range found {
			d, err := fixture.Open(path)
			if err == nil {
				err = d.Check()
			}
			if err != nil {
				return fixtureError(err)
			}
			if other, dup := from[d.Name()]; dup {
				return usageErrorf("recording %q given twice, in %s and %s; import one of them", d.Name(), other, path)
			}
			from[d.Name()] = path
			dirs = append(dirs, d)
		}
	}
	st, err := openStore(opts.StorePath, false)
	if err != nil {
		return err
	}
	defer st.Close()
	if !opts.Force {
		for _, d := range dirs {
			if _, err := st.Get(d.Name()); err == nil {
				return usageErrorf("recording %q exists in %s; pass --force to replace it", d.Name(), opts.StorePath)
			} else if !errors.Is(err, store.ErrNotFound) {
				return recordingError(err, opts.StorePath)
			}
		}
	}
	ctx, stop := onInterrupt()
	defer stop()
	for _, d := range dirs {
		if err := fixture.Put(ctx, st, d.Name(), d, opts.Force); err != nil {
			if fix, ok := fileSystemFix(err, "", "--store"); ok {
				return usageErrorf("import %s: %v; %s", d.Path(), err, fix)
			}
			return usageErrorf("import %s: %v", d.Path(), err)
		}
		fmt.Fprintf(opts.IO.Err, "acptap: imported %q from %s\n", d.Name(), d.Path())
	}
	return nil
}

package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/fixture"
	"github.com/acptap/acptap/store"
)

type cpOptions struct {
	IO        *IO
	StorePath string // the source
	To        string // the destination store
	Names     []string
	Force     bool // replace recordings of the same names in To
}

func cpCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "cp",
		Usage:     "copy recordings to another store",
		ArgsUsage: "--to DST NAME...",
		Description: "Copies each named recording of --store into the store DST (created if missing), exactly:\n" +
			"events, times, LLM exchanges, snapshot and calibrated rules. A name DST has already is an\n" +
			"error unless --force.",
		Flags: []cli.Flag{
			storeFlag(storeFileUsage),
			&cli.StringFlag{Name: "to", Usage: "the store `DST` to copy into"},
			&cli.BoolFlag{Name: "force", Usage: "replace recordings of the same names in DST"},
		},
		Action: func(c *cli.Context) error {
			return runCp(&cpOptions{IO: stdio, StorePath: c.String("store"), To: c.String("to"), Names: c.Args().Slice(), Force: c.Bool("force")})
		},
	}
}

func runCp(opts *cpOptions) error {
	switch {
	case opts.To == "":
		return usageErrorf("no destination; usage: acptap cp [--store SRC] --to DST NAME...")
	case len(opts.Names) == 0:
		return usageErrorf("no recording named; usage: acptap cp [--store SRC] --to DST NAME...")
	}
	if a, err := os.Stat(opts.StorePath); err == nil {
		if b, err := os.Stat(opts.To); err == nil && os.SameFile(a, b) {
			return usageErrorf("--to %s is the store the recordings are in; to rename one, use acptap mv", opts.To)
		}
	}
	src, err := openStore(opts.StorePath, true)
	if err != nil {
		return err
	}
	defer src.Close()
	var recs []fixture.Source
	for _, name := range opts.Names {
		r, err := fixture.FromStore(src, name)
		if err != nil {
			return recordingError(err, opts.StorePath)
		}
		recs = append(recs, r)
	}
	dst, err := openStoreFlag(opts.To, false, "--to")
	if err != nil {
		return err
	}
	defer dst.Close()
	if !opts.Force {
		for _, name := range opts.Names {
			if err := absent(dst, name, opts.To); err != nil {
				return err
			}
		}
	}
	ctx, stop := onInterrupt()
	defer stop()
	for i, r := range recs {
		if err := fixture.Put(ctx, dst, opts.Names[i], r, opts.Force); err != nil {
			if fix, ok := fileSystemFix(err, "", "--to"); ok {
				return usageErrorf("copy %q to %s: %w; %s", opts.Names[i], opts.To, err, fix)
			}
			return usageErrorf("copy %q to %s: %w", opts.Names[i], opts.To, err)
		}
		fmt.Fprintf(opts.IO.Err, "acptap: copied %q to %s\n", opts.Names[i], opts.To)
	}
	return nil
}

// absent fails unless st has no recording name.
func absent(st *store.Store, name, path string) error {
	_, err := st.Get(name)
	switch {
	case err == nil:
		return usageErrorf("recording %q exists in %s; pass --force to replace it", name, path)
	case !errors.Is(err, store.ErrNotFound):
		return recordingError(err, path)
	}
	return nil
}

type mvOptions struct {
	IO        *IO
	StorePath string
	Old, New  string
	Force     bool // replace a recording named New
}

const mvUsage = "acptap mv [--store S] OLD NEW"

func mvCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "mv",
		Usage:     "rename a recording",
		ArgsUsage: "OLD NEW",
		Description: "Renames the recording OLD to NEW in the store, keeping all of it. A recording named NEW\n" +
			"is an error unless --force, which replaces it.",
		Flags: []cli.Flag{
			storeFlag(storeFileUsage),
			&cli.BoolFlag{Name: "force", Usage: "replace a recording named NEW"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return usageErrorf("want two names, got %d; usage: %s", c.NArg(), mvUsage)
			}
			return runMv(&mvOptions{IO: stdio, StorePath: c.String("store"), Old: c.Args().Get(0), New: c.Args().Get(1), Force: c.Bool("force")})
		},
	}
}

func runMv(opts *mvOptions) error {
	if err := store.ValidName(opts.New); err != nil {
		return usageErrorf("%v", err)
	}
	if opts.Old == opts.New {
		return usageErrorf("%q is already its name; give another NEW", opts.Old)
	}
	st, err := openStore(opts.StorePath, false)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := fixture.FromStore(st, opts.Old)
	if err != nil {
		return recordingError(err, opts.StorePath)
	}
	if !opts.Force {
		if err := absent(st, opts.New, opts.StorePath); err != nil {
			return err
		}
	}
	// A copy under the new name, then the old one deleted: at every
	// moment one of the two is whole.
	ctx, stop := onInterrupt()
	defer stop()
	if err := fixture.Put(ctx, st, opts.New, r, opts.Force); err != nil {
		return usageErrorf("rename %q to %q: %w", opts.Old, opts.New, err)
	}
	if err := st.Delete(opts.Old); err != nil {
		return usageErrorf("rename %q to %q: copied, but deleting %q: %v; delete it with acptap rm", opts.Old, opts.New, opts.Old, err)
	}
	fmt.Fprintf(opts.IO.Err, "acptap: renamed %q to %q\n", opts.Old, opts.New)
	return nil
}

package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/store"
)

type rmOptions struct {
	IO        *IO
	StorePath string
	Names     []string
}

func rmCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "rm",
		Usage:     "delete recordings",
		ArgsUsage: "NAME...",
		Flags:     []cli.Flag{storeFlag(storeFileUsage)},
		Action: func(c *cli.Context) error {
			return runRm(&rmOptions{IO: stdio, StorePath: c.String("store"), Names: c.Args().Slice()})
		},
	}
}

func runRm(opts *rmOptions) error {
	if len(opts.Names) == 0 {
		return usageErrorf("no recording named; usage: acptap rm NAME...")
	}
	// Read-only first: rm of a store that is not there must not create
	// one.
	st, err := openStore(opts.StorePath, true)
	if err != nil {
		return err
	}
	st.Close()
	if st, err = openStore(opts.StorePath, false); err != nil {
		return err
	}
	defer st.Close()
	// A name given twice is deleted once.
	var names []string
	for _, name := range opts.Names {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	opts.Names = names
	// Check every name first so that a typo deletes nothing.
	for _, name := range opts.Names {
		rec, err := st.Get(name)
		var de *store.DamagedError
		if errors.As(err, &de) && de.Recording == name {
			continue // rm removes a damaged recording, if bbolt can
		}
		if err != nil {
			return recordingError(err, opts.StorePath)
		}
		if rec.Live && !rec.Done {
			return usageErrorf("recording %q in %s is being recorded; wait for its acptap record to end (or stop it), then rm it", name, opts.StorePath)
		}
	}
	for _, name := range opts.Names {
		err := st.Delete(name)
		if errors.Is(err, store.ErrDamaged) {
			// Delete takes out a recording with damaged pages, unless the
			// damage is in the list of recordings itself.
			return usageErrorf("%v; copy what reads into a new store with: acptap check --store %s --salvage NEW.db", err, opts.StorePath)
		}
		if err != nil {
			return recordingError(err, opts.StorePath)
		}
		fmt.Fprintf(opts.IO.Err, "acptap: deleted %q\n", name)
	}
	return nil
}

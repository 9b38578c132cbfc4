package main

import (
	"bufio"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/timeline"
)

type diffOptions struct {
	IO        *IO
	StorePath string
	A, B      string
	Diff      replay.DiffOptions
	HTML      string // write the side-by-side page to this file
	Color     bool
}

func diffCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "compare two recordings as replay compares a recording with its replay",
		ArgsUsage: "A B",
		Description: "Normalizes both recordings' agent streams and compares them per stream, as replay does,\n" +
			"and their LLM requests in order. Exit 0 when they compare equal, 1 when they differ,\n" +
			"2 on a usage or environment error. --html FILE writes the two side by side.",
		Flags: []cli.Flag{
			storeFlag(storeReadUsage),
			&cli.StringFlag{Name: "order", Value: "stream", Usage: "how the agent streams are compared within a turn, a `MODE`: stream or strict"},
			&cli.StringFlag{Name: "rules", Usage: "normalization rules `FILE` (JSON), applied before the rules calibrate stored"},
			&cli.BoolFlag{Name: "no-coalesce", Usage: "compare message chunks one by one instead of joined"},
			&cli.StringFlag{Name: "html", Usage: "write the comparison side by side as an HTML page to `FILE`"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return usageErrorf("want two recordings, got %d; usage: acptap diff [--store S] A B", c.NArg())
			}
			opts := &diffOptions{
				IO: stdio, StorePath: c.String("store"), A: c.Args().Get(0), B: c.Args().Get(1),
				HTML: c.String("html"), Color: colorFor(stdio.Out),
			}
			order, err := normalize.ParseOrder(c.String("order"))
			if err != nil {
				return usageErrorf("--order %q: want stream or strict", c.String("order"))
			}
			opts.Diff = replay.DiffOptions{Order: order, NoCoalesce: c.Bool("no-coalesce")}
			if f := c.String("rules"); f != "" {
				if opts.Diff.Rules, err = normalize.LoadRules(f); err != nil {
					return usageErrorf("--rules: %v; fix the rules file", err)
				}
			}
			return runDiff(opts)
		},
	}
}

func runDiff(opts *diffOptions) error {
	src, err := openSource(opts.StorePath, []string{opts.A, opts.B})
	if err != nil {
		return err
	}
	defer src.Close()
	st := src.st
	for _, name := range []string{opts.A, opts.B} {
		if _, err := st.Get(name); err != nil {
			return recordingError(err, opts.StorePath)
		}
	}
	res, err := replay.Diff(st, opts.A, opts.B, opts.Diff)
	if err != nil {
		return recordingError(err, opts.StorePath)
	}
	if opts.HTML != "" {
		page, err := timeline.Diff(st, res)
		if err != nil {
			return recordingError(err, opts.StorePath)
		}
		page.Acptap = version()
		if err := writeFileAtomic(opts.HTML, "--html", func(w io.Writer) error { return timeline.Write(w, page) }); err != nil {
			return err
		}
	}
	out := bufio.NewWriter(opts.IO.Out)
	defer out.Flush()
	printDiffResult(out, res, opts.Color)
	if !res.Equal() {
		return exitCode(ExitDiverged)
	}
	return nil
}

// printDiffResult reports a diff in replay's words (replay.WriteDiffReport).
func printDiffResult(w io.Writer, res *replay.DiffResult, color bool) {
	var opts replay.ReportOptions
	if color {
		opts.Paint = func(part replay.Part, s string) string { return painter(true).paint(partColors[part], s) }
	}
	replay.WriteDiffReport(w, res, opts)
}

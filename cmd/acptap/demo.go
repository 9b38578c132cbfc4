package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/internal/testagent"
	"github.com/acptap/acptap/internal/testeditor"
)

type demoOptions struct {
	IO   *IO
	Keep bool
	// Self is the acptap executable; the demo runs it as a real process for
	// `record` and for the bundled agent.
	Self string
}

func demoCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "record a session of the bundled demo agent, driven by a scripted editor, and show it",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "keep", Usage: "keep the temporary store and workspace, and print where they are"},
		},
		Action: func(c *cli.Context) error {
			self, err := os.Executable()
			if err != nil {
				return usageErrorf("demo: cannot find the acptap executable: %v", err)
			}
			return runDemo(&demoOptions{IO: stdio, Keep: c.Bool("keep"), Self: self})
		},
	}
}

// demoAgentCommand runs the bundled demo agent (the test agent), so that the
// demo needs nothing but the acptap binary.
func demoAgentCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:            "demo-agent",
		Hidden:          true,
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			return exitCode(testagent.Main(c.Args().Slice(), stdio.In, stdio.Out, stdio.Err, os.Getenv))
		},
	}
}

const demoNotes = "Teh quick brown fox jumps over the lazy dog.\n"

func runDemo(opts *demoOptions) error {
	dir, err := os.MkdirTemp("", "acptap-demo-")
	if err != nil {
		return usageErrorf("demo: %v", err)
	}
	if opts.Keep {
		fmt.Fprintf(opts.IO.Out, "demo files kept in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	workspace := filepath.Join(dir, "workspace")
	if err := os.Mkdir(workspace, 0o755); err != nil {
		return usageErrorf("demo: %v", err)
	}
	if err := os.WriteFile(filepath.Join(workspace, "notes.txt"), []byte(demoNotes), 0o644); err != nil {
		return usageErrorf("demo: %v", err)
	}
	db := filepath.Join(dir, "demo.db")
	const name = "demo"
	prompts := []string{"Fix the typo in notes.txt", "Thanks!"}

	fmt.Fprintf(opts.IO.Out, "$ acptap record --store %s --name %s -- acptap demo-agent --read notes.txt\n", db, name)
	fmt.Fprintf(opts.IO.Out, "  (a scripted editor sends %d prompts and allows the file read)\n", len(prompts))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	tr, err := testeditor.Run(ctx, testeditor.Options{
		Argv: []string{opts.Self, "record", "--store", db, "--name", name, "--",
			opts.Self, "demo-agent", "--read", "notes.txt", "--chunk-size", "12", "--stderr-log"},
		Dir:     workspace,
		Cwd:     workspace,
		Prompts: prompts,
		Stderr:  &stderr,
	})
	if err != nil {
		return usageErrorf("demo: the recorded session failed: %v; its stderr was: %q", err, stderr.String())
	}
	for _, turn := range tr.Turns {
		fmt.Fprintf(opts.IO.Out, "  editor: %q\n  agent:  %q (%s)\n", turn.Prompt, turn.Text, turn.StopReason)
	}
	fmt.Fprintf(opts.IO.Out, "\n$ acptap show --store %s\n", db)
	if err := runShow(&showOptions{IO: opts.IO, StorePath: db}); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "\n$ acptap show --store %s %s\n", db, name)
	return runShow(&showOptions{IO: opts.IO, StorePath: db, Name: name, Color: isTerminal(opts.IO.Out)})
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/internal/demo"
	"github.com/acptap/acptap/internal/demollm"
	"github.com/acptap/acptap/replay"
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
		Usage: "record the bundled demo agent against a scripted LLM, replay it offline, then replay a changed agent",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "keep", Usage: "keep the temporary store and workspace, and print where they are"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf("unexpected argument %q; the demo takes only --keep", c.Args().First())
			}
			self, err := os.Executable()
			if err != nil {
				return usageErrorf("cannot find the acptap executable: %v", err)
			}
			return runDemo(&demoOptions{IO: stdio, Keep: c.Bool("keep"), Self: self})
		},
	}
}

// demoAgentCommand runs the bundled demo agent (internal/demo), so that the
// demo needs nothing but the acptap binary.
func demoAgentCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:            "demo-agent",
		Hidden:          true,
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			return exitCode(demo.Agent(c.Args().Slice(), stdio.In, stdio.Out, stdio.Err, os.Getenv))
		},
	}
}

const demoNotes = "Teh quick brown fox jumps over the lazy dog.\n"

func runDemo(opts *demoOptions) error {
	out := opts.IO.Out
	dir, err := os.MkdirTemp("", "acptap-demo-")
	if err != nil {
		return usageErrorf("cannot make the demo's temporary directory in %s: %v; set TMPDIR to a writable directory", os.TempDir(), errors.Unwrap(err))
	}
	if opts.Keep {
		fmt.Fprintf(out, "demo files kept in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	workspace := filepath.Join(dir, "workspace")
	if err := os.Mkdir(workspace, 0o755); err != nil {
		return usageErrorf("%v", err)
	}
	if err := os.WriteFile(filepath.Join(workspace, "notes.txt"), []byte(demoNotes), 0o644); err != nil {
		return usageErrorf("%v", err)
	}
	db := filepath.Join(dir, "demo.db")
	caDir := filepath.Join(dir, "ca")
	const name = "fix-typo"

	// The scripted LLM, on loopback, for the recording only.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return usageErrorf("starting the scripted LLM: %v", err)
	}
	llm := &http.Server{Handler: demollm.Handler()}
	go llm.Serve(ln)
	llmURL := "http://" + ln.Addr().String() + "/v1"

	agent := []string{opts.Self, "demo-agent", "--title-call"}
	step := func(format string, args ...any) { fmt.Fprintf(out, "\n== "+format+"\n", args...) }

	step("1. Record: a scripted editor asks the demo agent to fix a typo; the agent calls the (scripted) LLM")
	fmt.Fprintf(out, "$ acptap record --store demo.db --name %s --base-url OPENAI_BASE_URL=%s -- acptap demo-agent --title-call\n", name, llmURL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	argv := append([]string{opts.Self, "record", "--store", db, "--name", name, "--ca-dir", caDir, "--no-proxy-env",
		"--base-url", "OPENAI_BASE_URL=" + llmURL, "--"}, agent...)
	turns, err := demo.Drive(ctx, demo.EditorOptions{
		Argv:    argv,
		Dir:     workspace,
		Cwd:     workspace,
		Env:     append(os.Environ(), "OPENAI_API_KEY=sk-demo-not-a-real-key"),
		Prompts: []string{"Fix the typo in notes.txt", "Thanks!"},
		Stderr:  &stderr,
	})
	llm.Close()
	if err != nil {
		return usageErrorf("the recorded session failed: %v; its stderr was: %q", err, stderr.String())
	}
	for _, turn := range turns {
		fmt.Fprintf(out, "  editor: %q\n  agent:  %q (%s)\n", turn.Prompt, turn.Text, turn.StopReason)
	}

	step("2. Inspect the recording: every lane on one timeline")
	fmt.Fprintf(out, "$ acptap show --store demo.db %s\n", name)
	if err := runShow(&showOptions{IO: opts.IO, StorePath: db, Name: name, Color: colorFor(out)}); err != nil {
		return err
	}

	replayOpts := func(argv []string) *replayOptions {
		return &replayOptions{
			IO:        opts.IO,
			StorePath: db,
			Names:     []string{name},
			Argv:      argv,
			CADir:     caDir,
			Color:     colorFor(out),
			Replay:    replay.Options{Timeout: 20 * time.Second},
		}
	}
	step("3. Replay offline: the scripted LLM is gone; the LLM side comes from the recording")
	fmt.Fprintf(out, "$ acptap replay --store demo.db %s\n", name)
	if err := runReplay(replayOpts(nil)); err != nil {
		return fmt.Errorf("the replay of the unchanged agent failed: %w", err)
	}

	step("4. Replay a changed agent: it no longer asks permission before reading the file")
	fmt.Fprintf(out, "$ acptap replay --store demo.db %s -- acptap demo-agent --title-call --no-permission\n", name)
	err = runReplay(replayOpts(append(agent, "--no-permission")))
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != ExitDiverged {
		return fmt.Errorf("the replay of the changed agent should have failed with exit %d, got: %v", ExitDiverged, err)
	}
	fmt.Fprintf(out, "\nThe first replay passed and the changed agent was caught (acptap replay exits 1 on a divergence).\n")
	return nil
}

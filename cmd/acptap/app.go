package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// Exit codes of acptap, as DESIGN.md fixes them.
const (
	ExitOK       = 0 // success; replays equal
	ExitDiverged = 1 // a replay diverged
	ExitUsage    = 2 // usage or environment error
)

// IO is where a command reads and writes. Commands never touch os.Std*
// directly so that they can run in-process in tests.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer

	// args is the command line Main runs, for the commands that must see
	// where "--" was (urfave/cli drops it).
	args []string
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

// exitError carries an exit code out of a command. A nil err exits with
// code silently (the agent's own status, say).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is a usage or environment error: one line, exit 2.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// exitCode exits silently with code.
func exitCode(code int) error { return &exitError{code: code} }

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

func storeFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "store",
		Usage:   "bbolt store `PATH`",
		EnvVars: []string{"ACPTAP_STORE"},
		Value:   "acptap.db",
	}
}

func newApp(stdio *IO) *cli.App {
	return &cli.App{
		Name:      "acptap",
		Usage:     "record and replay AI coding agents (ACP stdio and LLM HTTP)",
		Version:   version(),
		Reader:    stdio.In,
		Writer:    stdio.Out,
		ErrWriter: stdio.Err,
		// Errors are printed by Main; the default handler would os.Exit.
		ExitErrHandler:  func(*cli.Context, error) {},
		HideHelpCommand: true,
		// --base-url values are URLs: never split them at commas.
		DisableSliceFlagSeparator: true,
		OnUsageError:              onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf("unknown command %q; see acptap --help", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
		Commands: withUsageErrors(
			recordCommand(stdio),
			showCommand(stdio),
			rmCommand(stdio),
			replayCommand(stdio),
			demoCommand(stdio),
			demoAgentCommand(stdio),
		),
	}
}

// onUsageError makes flag errors one line, without the help text.
func onUsageError(c *cli.Context, err error, isSubcommand bool) error {
	cmd := "acptap"
	if c.Command != nil && c.Command.Name != "" {
		cmd += " " + c.Command.Name
	}
	return usageErrorf("%v; see %s --help", err, cmd)
}

func withUsageErrors(cmds ...*cli.Command) []*cli.Command {
	for _, c := range cmds {
		c.OnUsageError = onUsageError
	}
	return cmds
}

// Main runs acptap with args (args[0] is the program name) and returns the
// process exit code.
func Main(args []string, stdio *IO) int {
	stdio.args = args
	err := newApp(stdio).Run(args)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stdio.Err, "acptap: %v\n", ee.err)
		}
		return ee.code
	}
	// Flag parsing and other urfave/cli errors are usage errors.
	fmt.Fprintf(stdio.Err, "acptap: %v\n", err)
	return ExitUsage
}

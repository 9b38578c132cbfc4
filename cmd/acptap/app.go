package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/record"
	"github.com/acptap/acptap/record/mcprelay"
	"github.com/acptap/acptap/replay/mcpstandin"
	"github.com/acptap/acptap/store"
)

// Exit codes of acptap, a contract (docs/exit-codes.md).
const (
	ExitOK       = 0 // success; replays equal
	ExitDiverged = 1 // a replay diverged
	ExitUsage    = 2 // usage or environment error, a damaged store
	ExitInternal = 3 // acptap's own bug: a panic other than of a damaged store
)

// IO is where a command reads and writes. Commands never touch os.Std*
// directly so that they can run in-process in tests.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer

	// agentArgv is what followed "--" on the command line (or, for
	// record, the agent command where no "--" was given), and dashDash
	// says whether there was a "--". Main splits it off before urfave/cli
	// sees the arguments, so that every command finds it the same way.
	agentArgv []string
	dashDash  bool
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

func newApp(stdio *IO) *cli.App {
	app := &cli.App{
		Name:  "acptap",
		Usage: "record and replay AI coding agents (ACP stdio and LLM HTTP)",
		Description: "Exit codes: 0 success; 1 a replay diverged, diff found a difference, check found problems;\n" +
			"2 a usage or environment error, or a damaged store (run acptap check); 3 acptap's own bug\n" +
			"(ACPTAP_TRACE=1 prints its trace); record exits with the agent's status.",
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
				name := c.Args().First()
				return usageErrorf("unknown command %q%s; see acptap --help", name, didYouMean(name, commandNames(c.App)))
			}
			return cli.ShowAppHelp(c)
		},
		Commands: commands(stdio,
			recordCommand(stdio),
			showCommand(stdio),
			rmCommand(stdio),
			checkCommand(stdio),
			replayCommand(stdio),
			diffCommand(stdio),
			calibrateCommand(stdio),
			rerecordCommand(stdio),
			exportCommand(stdio),
			importCommand(stdio),
			cpCommand(stdio),
			mvCommand(stdio),
			demoCommand(stdio),
			demoAgentCommand(stdio),
			completionCommand(stdio),
			helpCommand(),
			completeCommand(stdio),
		),
	}
	addExamples(app)
	return app
}

// onUsageError makes flag errors one line, without the help text, and
// with the command's name in front as every other error has it.
func onUsageError(c *cli.Context, err error, isSubcommand bool) error {
	cmd, name := "acptap", ""
	// At the top level c.Command is the app itself, named acptap too.
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		name = c.Command.Name
		cmd += " " + name
	}
	msg := flagErrorText(c, err)
	if name == "" {
		return usageErrorf("%s; see %s --help", msg, cmd)
	}
	return usageErrorf("%s: %s; see %s --help", name, msg, cmd)
}

// Go's flag package words the errors that onUsageError rewrites.
var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	invalidValue  = regexp.MustCompile(`^invalid value "(.*)" for flag -+([^:]+): parse error$`)
)

// flagErrorText is a flag error of c's command in the words of its fix: a
// duration says what a duration looks like, an unknown flag names the
// nearest flag if it is a typo of one, and otherwise, of a command that
// runs an agent, says where the agent's flags go.
func flagErrorText(c *cli.Context, err error) string {
	cmd := c.Command
	msg := err.Error()
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		flag := "--" + m[1]
		if len(m[1]) == 1 {
			flag = "-" + m[1]
		}
		if s := didYouMean(flag, flagNames(c)); s != "" {
			return "unknown flag " + flag + s
		}
		if cmd != nil && agentCommands[cmd.Name] {
			return fmt.Sprintf("unknown flag %s; to pass flags to the agent, put them after --, as in: acptap %s ... -- AGENT %s", flag, cmd.Name, flag)
		}
		return "unknown flag " + flag
	}
	if m := invalidValue.FindStringSubmatch(msg); m != nil && cmd != nil && isDurationFlag(cmd, m[2]) {
		return fmt.Sprintf("--%s %q: want a duration such as 30s, 500ms or 2m", m[2], m[1])
	}
	return msg
}

// isDurationFlag reports whether name is a duration flag of cmd.
func isDurationFlag(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		if _, ok := f.(*cli.DurationFlag); ok && slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}

// commands gives every command the same treatment: one-line flag errors,
// the same help for every flag (no "(default: false)" of a switch, a
// default value without quotes),
// the command's name in front of the errors its action returns, added
// here once rather than by each error, and a warning about a damaged
// --store (see warnDamage) before it starts.
func commands(stdio *IO, cmds ...*cli.Command) []*cli.Command {
	for _, c := range cmds {
		c.OnUsageError = onUsageError
		// None has subcommands: without this, urfave/cli gives each a
		// "help" one, aliased "h", which takes a recording of either
		// name (acptap replay h) for a request for help.
		c.HideHelpCommand = true
		for _, f := range c.Flags {
			switch f := f.(type) {
			case *cli.BoolFlag:
				f.DisableDefaultText = true
			case *cli.StringFlag:
				if f.DefaultText == "" {
					f.DefaultText = f.Value
				}
			}
		}
		if action, name := c.Action, c.Name; action != nil {
			hasStore := slices.ContainsFunc(c.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), "store") })
			c.Action = func(ctx *cli.Context) error {
				if err := checkStore(ctx); err != nil {
					return withCommandName(name, err)
				}
				if hasStore && name != "check" {
					warnDamage(stdio, ctx.String("store"))
				}
				return withCommandName(name, action(ctx))
			}
		}
	}
	return cmds
}

// withCommandName puts "NAME: " in front of err's message.
func withCommandName(name string, err error) error {
	var ee *exitError
	if !errors.As(err, &ee) {
		if err == nil {
			return nil
		}
		return &exitError{code: ExitUsage, err: fmt.Errorf("%s: %w", name, err)}
	}
	// "replay fix-typo: ..." names the command already.
	if msg := ee.err; msg == nil || strings.HasPrefix(msg.Error(), name+": ") || strings.HasPrefix(msg.Error(), name+" ") {
		return err
	}
	return &exitError{code: ee.code, err: fmt.Errorf("%s: %w", name, ee.err)}
}

// Main runs acptap with args (args[0] is the program name) and returns the
// process exit code. A panic of the command's goroutine is acptap's own
// bug (the store turns the panics of a damaged file into errors): it is
// one line and ExitInternal, with the trace only if ACPTAP_TRACE=1.
func Main(args []string, stdio *IO) (code int) {
	if len(args) == 2 && args[1] == tapProcessCommand {
		// Started by acptap record (tapProcess), not by a user.
		return record.TapMain()
	}
	if len(args) > 1 && args[1] == mcpstandin.Command {
		// Started by an agent in a replay, in place of an MCP server, as
		// acptap replay told it.
		return mcpstandin.Main(args[2:], stdio.In, stdio.Out, stdio.Err)
	}
	if len(args) > 1 && args[1] == mcprelay.Command {
		// Started by an agent, in place of an MCP server, as acptap
		// record told it (mcpRelay).
		return mcprelay.Main(args[2:], stdio.In, stdio.Out, stdio.Err)
	}
	defer func() {
		if r := recover(); r != nil {
			code = internalError(stdio, r, debug.Stack())
		}
	}()
	app := newApp(stdio)
	var err error
	args, stdio.agentArgv, stdio.dashDash, err = splitArgs(app, args)
	if err == nil {
		err = app.Run(args)
	}
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stdio.Err, "acptap: %v%s\n", ee.err, checkHint(ee.err))
		}
		return ee.code
	}
	// Flag parsing and other urfave/cli errors are usage errors.
	fmt.Fprintf(stdio.Err, "acptap: %v\n", err)
	return ExitUsage
}

// checkHint is what to do about err if it says a store is damaged and
// does not say what to do already: whichever command met the damage,
// acptap check tells more.
func checkHint(err error) string {
	var de *store.DamagedError
	if !errors.As(err, &de) || strings.Contains(err.Error(), "acptap check") {
		return ""
	}
	return "; run: acptap check --store " + de.Path
}

// internalError reports the panic r, of the stack trace, as acptap's own
// bug and returns ExitInternal.
func internalError(stdio *IO, r any, trace []byte) int {
	msg := strings.Join(strings.Fields(fmt.Sprint(r)), " ")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	fmt.Fprintf(stdio.Err, "acptap: internal error: %s; please report it (with the trace that ACPTAP_TRACE=1 prints) at https://github.com/acptap/acptap/issues\n", msg)
	if os.Getenv("ACPTAP_TRACE") == "1" {
		stdio.Err.Write(trace)
	}
	return ExitInternal
}

// agentCommands are the commands that run an agent: what follows "--" is
// the agent command. For every other command "--" only ends the flags,
// and what follows it are names.
var agentCommands = map[string]bool{"record": true, "replay": true, "calibrate": true, "rerecord": true}

// splitArgs rearranges a command line so that flags are accepted anywhere
// before "--": urfave/cli stops reading flags at the first positional
// argument, so the flags of the command (and anything else that looks like
// a flag, for urfave/cli to refuse) are moved in front of its positional
// arguments. What follows "--" is split off as the agent command of a
// command that runs one, and kept as names for the others. Commands that
// parse their own arguments (SkipFlagParsing) are left as they are. A flag
// that takes a value but is given none (last, or just before "--") is an
// error: reordered, it would take the "--" put before the names for its
// value.
func splitArgs(app *cli.App, args []string) (cliArgs, agent []string, dashDash bool, err error) {
	ci := 1 // the command's index: the first argument not a flag
	for ci < len(args) && strings.HasPrefix(args[ci], "-") && args[ci] != "--" {
		ci++
	}
	if ci >= len(args) {
		return args, nil, false, nil
	}
	cmd := app.Command(args[ci])
	if cmd == nil || cmd.SkipFlagParsing {
		return args, nil, false, nil
	}
	rest := args[ci+1:]
	var flags, positional []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--" && agentCommands[cmd.Name]:
			agent, dashDash = rest[i+1:], true
			i = len(rest)
		case a == "--":
			positional = append(positional, rest[i+1:]...)
			i = len(rest)
		case strings.HasPrefix(a, "-") && a != "-":
			flags = append(flags, a)
			if takesValue(cmd, a) {
				if i+1 == len(rest) || rest[i+1] == "--" {
					return nil, nil, false, usageErrorf("%s: flag %s needs a value; see acptap %s --help", cmd.Name, a, cmd.Name)
				}
				i++
				flags = append(flags, rest[i])
			}
		case cmd.Name == "record" && !slices.Contains(rest[i:], "--"):
			// "acptap record my-agent --acp": the agent command starts at
			// the first positional argument, its own flags included.
			agent = rest[i:]
			i = len(rest)
		default:
			positional = append(positional, a)
		}
	}
	cliArgs = append(append([]string(nil), args[:ci+1]...), flags...)
	if len(positional) > 0 {
		// After "--", urfave/cli reads the names as names even if one
		// looks like a flag.
		cliArgs = append(append(cliArgs, "--"), positional...)
	}
	return cliArgs, agent, dashDash, nil
}

// takesValue reports whether arg (-name or --name, without "=value") is a
// flag of cmd that reads the next argument as its value.
func takesValue(cmd *cli.Command, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	if strings.Contains(name, "=") {
		return false
	}
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			_, isBool := f.(*cli.BoolFlag)
			return !isBool
		}
	}
	return false // unknown flags and -h/--help
}

package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// Help: every command's --help ends with examples, acptap help [COMMAND]
// prints the same help as --help, and a mistyped command or flag is
// answered with the nearest one.

// example is one line of a help's EXAMPLES section: a command line that
// works as written (TestExamplesParse parses each), and what it does.
type example struct{ line, note string }

// appExamples are the examples of acptap --help: the tasks a newcomer
// starts with.
var appExamples = []example{
	{"acptap demo", "see record and replay work, offline, in a few seconds"},
	{"acptap record -- my-agent --acp", "record an agent: put this where the editor starts it"},
	{"acptap show", "list the recordings"},
	{"acptap replay --all", "replay every recording, offline; exit 1 on a divergence"},
	{"acptap help replay", "the help of one command"},
}

// examples are the examples of each command's --help, by command name.
// my-agent stands for the agent's command.
var examples = map[string][]example{
	"record": {
		{"acptap record -- my-agent --acp", "record each session into acptap.db"},
		{"acptap record --store ~/acptap.db --name fix-typo -- my-agent --acp", "one recording, named"},
		{"acptap record --base-url OPENAI_BASE_URL -- my-agent --acp", "also record the LLM calls the agent makes to $OPENAI_BASE_URL"},
		{"acptap record --snapshot --snapshot-max 256MiB -- my-agent --acp", "store the working directory, for replay"},
		{"acptap record --scenario scenarios/ --force -- my-agent --acp", "record every scenario file of a directory, no editor needed"},
	},
	"show": {
		{"acptap show", "list the recordings, the newest last"},
		{"acptap show fix-typo", "the timeline of one recording"},
		{"acptap show --json fix-typo", "one JSON object per event"},
		{"acptap show --follow fix-typo", "a recording as it is being recorded"},
		{"acptap show --html -o fix-typo.html fix-typo", "one HTML page"},
		{"acptap show --store testdata/acptap", "the recordings exported into a directory"},
	},
	"rm": {
		{"acptap rm fix-typo", "delete one recording"},
		{"acptap rm --store ~/acptap.db fix-typo fix-tests", "delete two"},
	},
	"check": {
		{"acptap check", "the whole store: exit 0 if intact, 1 if not"},
		{"acptap check fix-typo", "the file's pages and that recording"},
		{"acptap check --salvage saved.db", "copy what reads into the new store saved.db"},
	},
	"replay": {
		{"acptap replay fix-typo", "one recording"},
		{"acptap replay --all", "every recording in the store"},
		{"acptap replay --run '^fix-'", "the recordings whose name matches"},
		{"acptap replay --shard 2/4 --junit replay.xml", "the second of four parts, for a CI matrix"},
		{"acptap replay --store testdata/acptap --all --html replay-html", "exported recordings, with an HTML page of each"},
		{"acptap replay --update fix-typo", "accept the agent's new output"},
		{"acptap replay --stdio-fault 'session/prompt#1=dup' fix-typo", "send the first prompt twice, to see how the agent takes it"},
		{"acptap replay fix-typo -- my-agent --acp --new-flag", "another agent command"},
	},
	"rerecord": {
		{"acptap rerecord fix-typo", "record again against the live LLM; the new version waits in acptap.db.pending"},
		{"acptap rerecord --review", "accept, skip or quit, one new version at a time"},
		{"acptap rerecord --all --accept -- my-agent --acp", "every recording, with another agent command, taken at once"},
	},
	"diff": {
		{"acptap diff fix-typo fix-typo-v2", "compare two recordings"},
		{"acptap diff --html a-vs-b.html fix-typo fix-typo-v2", "side by side, as an HTML page"},
	},
	"calibrate": {
		{"acptap calibrate fix-typo", "3 runs, then store the rules learned"},
		{"acptap calibrate --runs 5 fix-typo fix-tests -- my-agent --acp", "5 runs each, of another agent command"},
	},
	"export": {
		{"acptap export --dir testdata/acptap fix-typo", "write testdata/acptap/fix-typo/"},
		{"acptap export --store ~/acptap.db --dir testdata/acptap --all", "every recording of a store"},
		{"acptap export --dir testdata/acptap --force fix-typo", "export a recording again over its earlier export"},
		{"acptap export --store testdata/acptap --dir testdata/acptap --force fix-typo", "write an export's files again from the export itself"},
	},
	"import": {
		{"acptap import testdata/acptap/fix-typo", "one exported recording into acptap.db"},
		{"acptap import --store ci.db testdata/acptap", "every exported recording of a directory"},
	},
	"cp": {
		{"acptap cp --to fixtures.db fix-typo", "copy one recording into fixtures.db"},
		{"acptap cp --store ~/acptap.db --to fixtures.db --force fix-typo fix-tests", "copy two, replacing those fixtures.db has"},
	},
	"mv": {
		{"acptap mv my-agent-20260102-150405-3f9a1c fix-typo", "rename a recording"},
	},
	"demo": {
		{"acptap demo", "record, replay, and replay a changed agent, in a temporary store"},
		{"acptap demo --keep", "the same, keeping the store to look at with acptap show"},
	},
	"completion": {
		{"source <(acptap completion bash)", "completions in this bash"},
		{"acptap completion fish > ~/.config/fish/completions/acptap.fish", "completions in every fish"},
	},
	"help": {
		{"acptap help", "the commands"},
		{"acptap help replay", "the help of replay, as acptap replay --help"},
	},
}

// examplesSection renders exs as an EXAMPLES section of a help template,
// the notes aligned.
func examplesSection(exs []example) string {
	width := 0
	for _, e := range exs {
		width = max(width, len(e.line))
	}
	var b strings.Builder
	b.WriteString("\nEXAMPLES:\n")
	for _, e := range exs {
		fmt.Fprintf(&b, "   %-*s   # %s\n", width, e.line, e.note)
	}
	return b.String()
}

// addExamples puts the EXAMPLES section at the end of the help of app
// and of each command that has examples.
func addExamples(app *cli.App) {
	// urfave/cli gives the app --help only when no command is named help.
	app.Flags = append(app.Flags, cli.HelpFlag)
	app.CustomAppHelpTemplate = cli.AppHelpTemplate + examplesSection(appExamples)
	for _, c := range app.Commands {
		if exs := examples[c.Name]; exs != nil {
			c.CustomHelpTemplate = cli.CommandHelpTemplate + examplesSection(exs)
		}
	}
}

// helpCommand is acptap help [COMMAND]: the help of acptap, or of
// COMMAND, as --help prints it.
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "print the commands, or one command's help (as acptap COMMAND --help)",
		ArgsUsage: "[COMMAND]",
		Action: func(c *cli.Context) error {
			switch c.NArg() {
			case 0:
				return cli.ShowAppHelp(c)
			case 1:
			default:
				return usageErrorf("want at most one command, got %d; usage: acptap help [COMMAND]", c.NArg())
			}
			name := c.Args().First()
			if cmd := c.App.Command(name); cmd == nil || cmd.Hidden {
				return usageErrorf("unknown command %q%s; see acptap --help", name, didYouMean(name, commandNames(c.App)))
			}
			// The app's context, whose commands are the app's: in help's
			// own, urfave/cli looks among help's subcommands.
			if l := c.Lineage(); len(l) > 1 {
				c = l[1]
			}
			return cli.ShowCommandHelp(c, name)
		},
	}
}

// commandNames are the names of app's commands that its help lists.
func commandNames(app *cli.App) []string {
	var names []string
	for _, c := range app.Commands {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	return names
}

// flagNames are the names of the flags of cmd (the app's own at the top
// level), with their dashes, --help among them.
func flagNames(c *cli.Context) []string {
	flags := c.App.Flags
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		flags = c.Command.Flags
	}
	names := []string{"--help"}
	for _, f := range flags {
		if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
			continue
		}
		for _, n := range f.Names() {
			if len(n) > 1 {
				names = append(names, "--"+n)
			}
		}
	}
	if c.App.Version != "" && !c.App.HideVersion && (c.Command == nil || c.Command.Name == "" || c.Command.Name == c.App.Name) {
		names = append(names, "--version")
	}
	return names
}

// didYouMean is " (did you mean X?)" for the one of candidates nearest to
// typed, if one is near enough to be a typo of it (or typed is the start
// of only one), else "".
func didYouMean(typed string, candidates []string) string {
	if s := nearest(typed, candidates); s != "" {
		return " (did you mean " + s + "?)"
	}
	return ""
}

// nearest returns the candidate that typed is a typo of: the one at the
// smallest edit distance (a letter added, dropped, changed, or two
// swapped), if that is at most 1 for a word of up to 4 letters and at most
// 2 for a longer one; else the only candidate that starts with typed (3
// letters or more); else "". Of candidates equally near, the first wins.
func nearest(typed string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := editDistance(typed, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	bare := strings.TrimLeft(typed, "-")
	limit := 1
	if len(bare) > 4 {
		limit = 2
	}
	if bestD >= 0 && bestD <= limit && bestD < len(bare) {
		return best
	}
	if len(bare) < 3 {
		return ""
	}
	var prefixed []string
	for _, c := range candidates {
		if strings.HasPrefix(c, typed) {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return ""
}

// editDistance is the optimal string alignment distance of a and b: the
// fewest letters added, dropped or changed, and pairs of neighbours
// swapped, that make a into b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

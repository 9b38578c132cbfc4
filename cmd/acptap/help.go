package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// helpCommand is `acptap help [COMMAND]`: the help of acptap, or of one
// of its commands.
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "show the help of acptap, or of one command",
		ArgsUsage: "[COMMAND]",
		Action: func(c *cli.Context) error {
			switch c.NArg() {
			case 0:
				return cli.ShowAppHelp(c)
			case 1:
				name := c.Args().First()
				if cmd := c.App.Command(name); cmd != nil && !cmd.Hidden {
					return cli.ShowCommandHelp(c.Lineage()[1], name)
				}
				return usageErrorf("unknown command %q%s; see acptap --help", name, meant(didYouMean(name, commandNames(c.App))))
			default:
				return usageErrorf("want one command name, got %d: acptap help [COMMAND]", c.NArg())
			}
		},
	}
}

// commandNames returns the names of app's commands that its help lists.
func commandNames(app *cli.App) []string {
	var names []string
	for _, c := range app.Commands {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	return names
}

// flagNames returns the long names of cmd's flags, without their dashes.
func flagNames(cmd *cli.Command) []string {
	var names []string
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if len(n) > 1 {
				names = append(names, n)
			}
		}
	}
	return names
}

// didYouMean returns the one of names nearest to what was typed, if one
// is near enough to be what was meant (two edits for a long word, one for
// a short one, or a prefix), else "".
func didYouMean(typed string, names []string) string {
	best, bestDist := "", -1
	for _, n := range names {
		d := editDistance(strings.ToLower(typed), n)
		if strings.HasPrefix(n, typed) && len(typed) >= 2 {
			d = min(d, 1)
		}
		if bestDist < 0 || d < bestDist {
			best, bestDist = n, d
		}
	}
	limit := 1
	if len(typed) > 4 {
		limit = 2
	}
	if bestDist < 0 || bestDist > limit {
		return ""
	}
	return best
}

// meant is ` (did you mean X?)`, or "" for no X.
func meant(x string) string {
	if x == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", x)
}

// editDistance is the Levenshtein distance of a and b, in bytes, with a
// swap of two neighbours counted as one edit.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range len(b) + 1 {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// examples are the Examples sections of the commands' help, by command.
var examples = map[string]string{
	"record": `acptap record -- my-agent --acp
acptap record --store ~/acptap.db --name fix-typo -- my-agent --acp
acptap record --base-url OPENAI_BASE_URL -- my-agent --acp
acptap record --base-url OLLAMA_HOST=http://127.0.0.1:11434 --proxy-loopback -- my-agent`,
	"show": `acptap show
acptap show fix-typo
acptap show --json fix-typo
acptap show --html fix-typo -o fix-typo.html
acptap show --follow fix-typo`,
	"rm":    `acptap rm fix-typo old-session`,
	"check": "acptap check\nacptap check fix-typo\nacptap check --salvage saved.db",
	"replay": `acptap replay fix-typo
acptap replay --all --junit report.xml --html pages
acptap replay --shard 2/4 --parallel 2
acptap replay --requests fail fix-typo
acptap replay fix-typo -- my-agent --acp --new-flag`,
	"diff":      "acptap diff fix-typo fix-typo-2\nacptap diff --html diff.html fix-typo fix-typo-2",
	"calibrate": "acptap calibrate fix-typo\nacptap calibrate --runs 5 fix-typo -- my-agent --acp",
	"export":    "acptap export --dir testdata/sessions fix-typo\nacptap export --dir testdata/sessions --force fix-typo",
	"import":    "acptap import testdata/sessions\nacptap import --store ci.db testdata/sessions/fix-typo",
	"cp":        "acptap cp --to shared.db fix-typo",
	"mv":        "acptap mv my-agent-20260314-093012-a1b2c3 fix-typo",
	"demo":      "acptap demo\nacptap demo --keep",
	"completion": `acptap completion bash > /etc/bash_completion.d/acptap
acptap completion zsh > "${fpath[1]}/_acptap"
acptap completion fish > ~/.config/fish/completions/acptap.fish`,
	"help": "acptap help\nacptap help replay",
}

// withExamples gives each command with examples a help that ends with
// them.
func withExamples(cmds []*cli.Command) {
	for _, c := range cmds {
		ex, ok := examples[c.Name]
		if !ok {
			continue
		}
		c.CustomHelpTemplate = cli.CommandHelpTemplate + "\nEXAMPLES:\n   " + strings.ReplaceAll(ex, "\n", "\n   ") + "\n"
	}
}

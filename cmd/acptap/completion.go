package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/fixture"
	"github.com/acptap/acptap/store"
)

// Shell completion. `acptap completion SHELL` prints a script that asks
// acptap itself what to complete: the script passes the words of the
// command line to the hidden `acptap __complete -- WORD...` and offers what
// it prints, one candidate per line, falling back to file names when it
// prints nothing. One program answers for every shell, so bash, zsh and
// fish complete the same commands, flags, flag values and recording names.
//
// urfave/cli's own completion (--generate-bash-completion) is not used: its
// bash script needs the bash-completion package and evals the command line,
// and it cannot complete a flag's value or tell the agent's arguments after
// "--" from acptap's.

// completeCommandName is the hidden command the scripts call.
const completeCommandName = "__complete"

type completionOptions struct {
	IO    *IO
	Shell string
}

func completionCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "SHELL",
		Description: "Completes command names, flags, flag values and recording names from the store\n" +
			"(--store on the command line, else ACPTAP_STORE, else acptap.db). Load it with:\n\n" +
			"  bash:  source <(acptap completion bash)      (e.g. in ~/.bashrc)\n" +
			"  zsh:   source <(acptap completion zsh)       (after compinit, e.g. in ~/.zshrc)\n" +
			"  fish:  acptap completion fish > ~/.config/fish/completions/acptap.fish",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErrorf("want one shell name: acptap completion bash|zsh|fish")
			}
			return runCompletion(&completionOptions{IO: stdio, Shell: c.Args().First()})
		},
	}
}

func runCompletion(opts *completionOptions) error {
	script, ok := completionScripts[opts.Shell]
	if !ok {
		return usageErrorf("unknown shell %q; want bash, zsh or fish", opts.Shell)
	}
	_, err := fmt.Fprint(opts.IO.Out, script)
	return err
}

// completionScripts are the scripts by shell. Each passes the words after
// "acptap" up to and including the one being completed (empty when the
// cursor follows a space).
var completionScripts = map[string]string{
	"bash": `# bash completion for acptap: source <(acptap completion bash)
_acptap_complete() {
	local cur="${COMP_WORDS[COMP_CWORD]}" IFS=$'\n'
	local candidates
	candidates=$(acptap __complete -- "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)
	COMPREPLY=($(compgen -W "$candidates" -- "$cur"))
}
complete -o default -F _acptap_complete acptap
`,
	"zsh": `#compdef acptap
# zsh completion for acptap: source <(acptap completion zsh), after compinit
_acptap_complete() {
	local -a candidates
	candidates=("${(@f)$(acptap __complete -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	if [[ -n "${candidates[1]}" ]]; then
		compadd -a candidates
	else
		_files
	fi
}
compdef _acptap_complete acptap
`,
	"fish": `# fish completion for acptap: acptap completion fish > ~/.config/fish/completions/acptap.fish
function __acptap_candidates
	set -l words (commandline -opc) (commandline -ct)
	acptap __complete -- $words[2..-1] 2>/dev/null
end
function __acptap_has_candidates
	test -n "$(__acptap_candidates)"
end
complete -c acptap -f -n __acptap_has_candidates -a '(__acptap_candidates)'
complete -c acptap -F -n 'not __acptap_has_candidates'
`,
}

// completeCommand is the hidden command the scripts call.
func completeCommand(stdio *IO) *cli.Command {
	return &cli.Command{
		Name:            completeCommandName,
		Hidden:          true,
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			words := c.Args().Slice()
			if len(words) > 0 && words[0] == "--" {
				words = words[1:]
			}
			for _, w := range complete(c.App, words, os.Getenv) {
				fmt.Fprintln(stdio.Out, w)
			}
			return nil
		},
	}
}

// nameCommands are the commands whose arguments are recording names.
var nameCommands = map[string]bool{"show": true, "rm": true, "replay": true, "diff": true, "calibrate": true, "export": true, "cp": true, "mv": true, "check": true, "rerecord": true}

// flagValues are the values of flags that take one of a few words.
var flagValues = map[string][]string{
	"requests": {"ignore", "warn", "fail"},
	"order":    {"stream", "strict"},
}

// complete returns the candidates for the last of words (the words after
// "acptap", the last one being completed, possibly empty); nil lets the
// shell complete file names.
func complete(app *cli.App, words []string, getenv func(string) string) []string {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	// The command is the first word that is not a flag.
	var cmd *cli.Command
	rest := before
	for i, w := range before {
		if !strings.HasPrefix(w, "-") {
			cmd = findCommand(app, w)
			rest = before[i+1:]
			break
		}
	}
	if cmd == nil {
		if len(before) > 0 && !strings.HasPrefix(before[len(before)-1], "-") {
			return nil // an unknown command
		}
		if strings.HasPrefix(cur, "-") {
			return []string{"--help", "--version"}
		}
		var out []string
		for _, c := range app.Commands {
			if !c.Hidden {
				out = append(out, c.Name)
			}
		}
		return out
	}
	if slices.Contains(rest, "--") {
		return nil // the agent's arguments
	}
	// The value of the flag before the cursor.
	if len(rest) > 0 {
		if f := commandFlag(cmd, rest[len(rest)-1]); f != nil && takesValue(cmd, rest[len(rest)-1]) {
			return flagValues[f.Names()[0]]
		}
	}
	if strings.HasPrefix(cur, "-") {
		var out []string
		for _, f := range cmd.Flags {
			if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
				continue
			}
			out = append(out, "--"+f.Names()[0])
		}
		return append(out, "--help")
	}
	if cmd.Name == "help" {
		if len(rest) > 0 {
			return nil // help takes one command
		}
		return commandNames(app)
	}
	if !nameCommands[cmd.Name] {
		return nil
	}
	return recordingNames(storeOnLine(rest, getenv))
}

func findCommand(app *cli.App, name string) *cli.Command {
	for _, c := range app.Commands {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// commandFlag returns the flag of cmd that arg ("--name", "-v") names.
func commandFlag(cmd *cli.Command, arg string) cli.Flag {
	name := strings.TrimLeft(arg, "-")
	if name == arg || strings.Contains(name, "=") {
		return nil
	}
	for _, f := range cmd.Flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// storeOnLine returns the store the command line names: --store's value,
// else $ACPTAP_STORE, else the default.
func storeOnLine(words []string, getenv func(string) string) string {
	path := ""
	for i, w := range words {
		switch {
		case (w == "--store" || w == "-store") && i+1 < len(words):
			path = words[i+1]
		case strings.HasPrefix(w, "--store="):
			path = strings.TrimPrefix(w, "--store=")
		}
	}
	if path == "" {
		path = getenv("ACPTAP_STORE")
	}
	if path == "" {
		path = "acptap.db"
	}
	return path
}

// recordingNames lists the recordings of the store at path; nothing when
// it cannot be read at once (no store, or one a writer holds), since a
// completion must never wait or print an error.
func recordingNames(path string) []string {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		// A directory of exported recordings: their directories' names.
		dirs, err := fixture.Find(path)
		if err != nil {
			return nil
		}
		names := make([]string, 0, len(dirs))
		for _, d := range dirs {
			names = append(names, filepath.Base(d))
		}
		return names
	}
	st, err := store.Open(path, &store.Options{ReadOnly: true, Timeout: 50 * time.Millisecond})
	if err != nil {
		return nil
	}
	defer st.Close()
	recs, err := st.List()
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(recs))
	for _, r := range recs {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	return names
}

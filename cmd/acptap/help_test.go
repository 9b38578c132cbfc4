package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestExamplesParse runs every example of the help through acptap's
// argument handling and urfave/cli's flag parsing, each command's action
// replaced by one that notes it ran: each example names a command, flags
// it has and values they take. Every command the help lists has examples.
func TestExamplesParse(t *testing.T) {
	t.Setenv("ACPTAP_STORE", "")
	all := map[string][]example{"": appExamples}
	for name, exs := range examples {
		all[name] = exs
	}
	for name, exs := range all {
		for _, ex := range exs {
			argv := exampleArgv(t, ex.line)
			var errb bytes.Buffer
			stdio := &IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb}
			app := newApp(stdio)
			ran := ""
			for _, c := range app.Commands {
				c.Action = func(*cli.Context) error { ran = c.Name; return nil }
			}
			args, _, _, err := splitArgs(app, argv)
			if err == nil {
				err = app.Run(args)
			}
			if err != nil {
				t.Errorf("example %q: %v", ex.line, err)
				continue
			}
			if name != "" && ran != name {
				t.Errorf("example %q of %s ran %q", ex.line, name, ran)
			}
		}
	}
	app := newApp(&IO{})
	for _, c := range app.Commands {
		if !c.Hidden && len(examples[c.Name]) == 0 {
			t.Errorf("command %s has no examples", c.Name)
		}
	}
}

// exampleArgv splits an example's command line as a shell would, from
// "acptap" up to a redirection or the end of a process substitution: its
// words are plain or in single quotes.
func exampleArgv(t *testing.T, line string) []string {
	i := strings.Index(line, "acptap ")
	if i < 0 {
		if line != "acptap" {
			t.Fatalf("example %q does not run acptap", line)
		}
		i = 0
	}
	var argv []string
	for _, w := range strings.Fields(line[i:]) {
		if w == ">" || strings.HasSuffix(w, ")") {
			if w = strings.TrimSuffix(w, ")"); w != "" && w != ">" {
				argv = append(argv, w)
			}
			break
		}
		argv = append(argv, strings.Trim(w, "'"))
	}
	return argv
}

func TestNearest(t *testing.T) {
	cmds := []string{"record", "show", "rm", "check", "replay", "diff", "calibrate", "export", "import", "cp", "mv", "demo", "completion", "help"}
	for typed, want := range map[string]string{
		"recrod": "record", "reocrd": "record", "reply": "replay", "shwo": "show", "calib": "calibrate",
		"exprot": "export", "hlep": "help", "frobnicate": "", "x": "", "": "", "replays": "replay",
	} {
		if got := nearest(typed, cmds); got != want {
			t.Errorf("nearest(%q) = %q, want %q", typed, got, want)
		}
	}
	flags := []string{"--help", "--store", "--all", "--timeout", "--grace", "--no-coalesce", "--verbose"}
	for typed, want := range map[string]string{
		"--stroe": "--store", "--timout": "--timeout", "--verbos": "--verbose", "--acp": "", "--no-permission": "", "--model": "",
	} {
		if got := nearest(typed, flags); got != want {
			t.Errorf("nearest(%q) = %q, want %q", typed, got, want)
		}
	}
}

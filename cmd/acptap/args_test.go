package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestEveryValueFlagGivenLast gives each flag that takes a value of every
// command last, and just before "--": the reordering of the arguments must
// not hand it the "--" it puts before the names, which wrote a file named
// "--" for replay's --junit (issue 24 §4).
func TestEveryValueFlagGivenLast(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	n := 0
	for _, cmd := range newApp(&IO{}).Commands {
		if cmd.SkipFlagParsing {
			continue
		}
		for _, f := range cmd.Flags {
			if _, isBool := f.(*cli.BoolFlag); isBool {
				continue
			}
			for _, name := range f.Names() {
				flag := "--" + name
				if len(name) == 1 {
					flag = "-" + name
				}
				lines := [][]string{
					{"acptap", cmd.Name, flag},
					{"acptap", cmd.Name, flag, "--", "agent"},
				}
				if cmd.Name != "record" { // whose first name is the agent's
					lines = append(lines, []string{"acptap", cmd.Name, "r1", flag})
				}
				for _, args := range lines {
					n++
					var out, errb bytes.Buffer
					code := Main(args, &IO{In: bytes.NewReader(nil), Out: &out, Err: &errb})
					want := "acptap: " + cmd.Name + ": flag " + flag + " needs a value; see acptap " + cmd.Name + " --help\n"
					if code != ExitUsage || errb.String() != want {
						t.Errorf("%q: exit %d, stderr %q; want exit %d, %q", args, code, errb.String(), ExitUsage, want)
					}
				}
			}
		}
	}
	if n < 40 {
		t.Errorf("tried %d flags; the commands have more that take a value", n)
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("the refused command lines left %s in the directory", ents[0].Name())
	}
}

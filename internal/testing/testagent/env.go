package testagent

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

// envShape is what --env-names and --env-file make the agent tell of its
// environment, as real agents do (one lists the names of all its
// variables in its system prompt), for the tests of the environment a
// replay gives an agent: it is its process's, os.Environ, whatever
// Main's getenv says, since no getenv lists the names.
type envShape struct {
	names bool   // --env-names: the sorted names in the system prompt
	file  string // --env-file: the environment, sorted, written to this file at start-up
}

func (e *envShape) flags(fs *flag.FlagSet) {
	fs.BoolVar(&e.names, "env-names", false, "list the sorted names of the agent's environment in the system prompt (LLM mode)")
	fs.StringVar(&e.file, "env-file", "", "write the agent's environment, sorted, one NAME=VALUE a line, to `FILE` at start-up")
}

// start writes --env-file and returns what --env-names adds to the system
// prompt, "" without it.
func (e *envShape) start() (string, error) {
	env := slices.Sorted(slices.Values(os.Environ()))
	if e.file != "" {
		if err := os.WriteFile(e.file, []byte(strings.Join(env, "\n")+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("--env-file: %w", err)
		}
	}
	if !e.names {
		return "", nil
	}
	names := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	slices.Sort(names) // by name: "A_B" sorts before "A" as a NAME=VALUE
	return " Your environment has the variables " + strings.Join(names, ", ") + ".", nil
}

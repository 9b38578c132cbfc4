package rerecord

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNoAgent means that neither the recording nor Options name an
	// agent command.
	ErrNoAgent = errors.New("no agent command")
	// ErrScenario means that the scenario that drove a recording cannot
	// be run again: its file does not read, or it is gone and the
	// recording keeps no copy.
	ErrScenario = errors.New("the scenario cannot run again")
	// ErrWorkspace means that the workspace could not be laid out.
	ErrWorkspace = errors.New("laying out the workspace")
)

// KeysError is a re-recording refused for want of the secrets its agent
// had in its environment when recorded: the live LLM wants its key.
type KeysError struct {
	Recording string
	// Vars are the variables the recording's agent had as secrets and
	// that are not set now.
	Vars []string
}

func (e *KeysError) Error() string {
	verb, them := "are", "them"
	if len(e.Vars) == 1 {
		verb, them = "is", "it"
	}
	return fmt.Sprintf("rerecord %s: the agent had %s when recorded, which %s not set here; rerecord calls the live LLM: set %s",
		e.Recording, strings.Join(e.Vars, ", "), verb, them)
}

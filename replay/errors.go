package replay

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

var (
	// ErrNoCommand: neither the recording nor the options name an agent.
	ErrNoCommand = errors.New("no agent command")
	// ErrStart: the agent could not be started.
	ErrStart = errors.New("cannot start the agent")
	// ErrWorkspace: the workspace could not be seeded.
	ErrWorkspace = errors.New("cannot prepare the workspace")
	// ErrEnv: an --env value is not K=V.
	ErrEnv = errors.New("bad environment variable")
	// ErrRequestMode: --requests is not ignore, warn or fail.
	ErrRequestMode = errors.New("bad request mode")
	// ErrStoredRules: the rules stored with a recording by calibrate are
	// not a rules file.
	ErrStoredRules = errors.New("damaged calibrated rules")
	// ErrSpool: a temporary file a replay keeps the recording's frames,
	// its LLM exchanges or the agent's output in could not be written or
	// read.
	ErrSpool = errors.New("cannot spool the replay's frames")
	// ErrMCPFault: an MCP fault names a server the recording does not
	// have, or the servers are not served from the recording.
	ErrMCPFault = errors.New("bad MCP fault")
	// ErrStdioFault: a stdio fault's FRAME is malformed, names no editor
	// frame of the recording or one another fault names, or splits its
	// frame after its end.
	ErrStdioFault = errors.New("bad stdio fault")
)

// An AgentNotFoundError is the ErrStart of an agent program that does not
// exist: the one Options.Argv names, or the recorded one.
type AgentNotFoundError struct {
	// Program is what the replay tried to run.
	Program string
	// Recorded is the recorded command's program as typed, when the
	// replay ran the recorded command; empty for Options.Argv.
	Recorded string
	Err      error // the lookup's error
}

func (e *AgentNotFoundError) Error() string {
	switch {
	case e.Recorded == "":
		return fmt.Sprintf("%v: agent %q not found", ErrStart, e.Program)
	case e.Recorded != e.Program:
		return fmt.Sprintf("%v: the recorded agent %q (at %s when recorded) is not there", ErrStart, e.Recorded, e.Program)
	case strings.ContainsRune(e.Program, filepath.Separator):
		return fmt.Sprintf("%v: the recorded agent %s does not exist", ErrStart, e.Program)
	}
	return fmt.Sprintf("%v: the recorded agent %q is not in PATH", ErrStart, e.Program)
}

func (e *AgentNotFoundError) Unwrap() []error { return []error{ErrStart, e.Err} }

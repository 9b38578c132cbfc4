package replay

import "errors"

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
)

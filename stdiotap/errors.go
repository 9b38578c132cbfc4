package stdiotap

import "errors"

var (
	// ErrNoCommand is returned by Start when Config.Argv is empty.
	ErrNoCommand = errors.New("stdiotap: no agent command")

	// ErrNotFound is returned, wrapped together with the lookup error
	// that names the command, by Start when the agent's executable
	// cannot be found.
	ErrNotFound = errors.New("stdiotap: agent command not found")
)

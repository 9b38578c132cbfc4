package tapproc

import "errors"

var (
	// ErrNoCommand is Start's error when Config.Command is empty.
	ErrNoCommand = errors.New("no command for the tap process")
	// ErrNotTap is Start's error when the command ran but did not answer
	// as the tap process does.
	ErrNotTap = errors.New("the command did not answer as acptap's tap process")
	// ErrEnded is Close's error when the tap process ended before Close
	// asked it to: the exchanges it held then were lost.
	ErrEnded = errors.New("the tap process ended early")
)

// Stage is the step of the tap process's start that failed.
type Stage string

const (
	StageTap   Stage = "tap"   // the tap could not start (its CA, a listener)
	StageRoute Stage = "route" // a base-URL route could not be added
	StageEnv   Stage = "env"   // the agent's environment could not be made
)

// A StartError is why the tap process could not start the tap.
type StartError struct {
	Stage Stage
	// Var is the route's variable, with StageRoute.
	Var string
	Err error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

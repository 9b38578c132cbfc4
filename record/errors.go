package record

import (
	"errors"
	"fmt"

	"github.com/acptap/acptap/internal/redact"
)

// Errors of Prepare and Run. Each is wrapped with the detail (the agent,
// the variable, the file); callers tell them apart with errors.Is and say
// how to fix them in their own terms.
var (
	// ErrNoCommand is returned when Options.Argv is empty.
	ErrNoCommand = errors.New("no agent command")

	// ErrAgentNotFound is returned when the agent's program is not found.
	ErrAgentNotFound = errors.New("not found")

	// ErrAgent is returned when the agent cannot be started.
	ErrAgent = errors.New("cannot run agent")

	// ErrName is returned for a recording name the store refuses.
	ErrName = errors.New("invalid recording name")

	// ErrBaseURL is returned for a base-URL route that cannot be set up.
	// The more precise ErrBaseURLTwice, ErrBaseURLUnknown and
	// ErrBaseURLUpstream match too where they are the cause.
	ErrBaseURL = errors.New("invalid base URL")
	// ErrBaseURLTwice: the same variable has two routes.
	ErrBaseURLTwice = errors.New("given twice")
	// ErrBaseURLUnknown: no upstream was given, the variable is not set,
	// and it is not a well-known one.
	ErrBaseURLUnknown = errors.New("not set and not a well-known variable")
	// ErrBaseURLUpstream: the upstream is not an http or https URL the
	// tap can forward to (see proxy.ParseUpstream): no host, or
	// credentials, a query or a fragment in it.
	ErrBaseURLUpstream = errors.New("not an http or https URL")

	// ErrUpstreamCA is returned when Options.UpstreamCA cannot be read or
	// holds no PEM certificate.
	ErrUpstreamCA = errors.New("invalid upstream CA file")

	// ErrCA is returned when the interception CA cannot be loaded or
	// created.
	ErrCA = errors.New("interception CA")

	// ErrSnapshot is returned when the working directory cannot be
	// archived for Options.Snapshot; it wraps snapshot.ErrTooLarge and
	// snapshot.ErrTooManyFiles where those are the cause.
	ErrSnapshot = errors.New("snapshot")

	// ErrTap is returned when the HTTP tap cannot be started.
	ErrTap = errors.New("http tap")

	// ErrSave is returned when the recording cannot be finished in the
	// store; what was committed before the failure is kept.
	ErrSave = errors.New("saving the recording")
)

// classified is err in the class kind: it reads as err alone, and both
// kind and err match with errors.Is and errors.As.
type classified struct{ kind, err error }

func (e *classified) Error() string   { return e.err.Error() }
func (e *classified) Unwrap() []error { return []error{e.kind, e.err} }

// classify returns err, described by format and args, in the class kind.
func classify(kind error, format string, args ...any) error {
	return &classified{kind: kind, err: fmt.Errorf(format, args...)}
}

// A BaseURLError is a base-URL route that cannot be set up. It matches
// ErrBaseURL and its Err.
type BaseURLError struct {
	Var      string
	Upstream string // empty when the route has none yet
	Err      error
}

// Error quotes the upstream with its credentials masked: the error is
// printed, and stored with a recording that could not start.
func (e *BaseURLError) Error() string {
	if e.Upstream == "" {
		return e.Var + ": " + e.Err.Error()
	}
	return e.Var + "=" + redact.New(nil).Text(e.Upstream) + ": " + e.Err.Error()
}

func (e *BaseURLError) Unwrap() []error { return []error{ErrBaseURL, e.Err} }

package scenario

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrSyntax means a scenario file is not one JSON object.
	ErrSyntax = errors.New("not JSON")
	// ErrInvalid means a scenario file is JSON but not a scenario: a
	// member of the wrong type, a value out of range, a file missing.
	ErrInvalid = errors.New("invalid scenario")
	// ErrAgent means the agent did not play its part: it answered a
	// request with an error, closed its stdout early, or offered no
	// option of the kind the scenario answers with.
	ErrAgent = errors.New("the agent failed the scenario")
)

// FieldError is a member that no object of its kind in a scenario file
// has: a misspelling, or a field of another version.
type FieldError struct {
	// Field is the member's path, such as sessions[1].promts.
	Field string
	// Known are the members an object of that kind may have.
	Known []string
	// Near is the known member Field most likely means, or "".
	Near string
}

func (e *FieldError) Error() string {
	if e.Near != "" {
		return fmt.Sprintf("unknown field %s (did you mean %s?)", e.Field, e.Near)
	}
	return fmt.Sprintf("unknown field %s; the fields here are %s", e.Field, strings.Join(e.Known, ", "))
}

// Is makes a FieldError an ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

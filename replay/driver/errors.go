package driver

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

var (
	// ErrTimeout is wrapped by a *WaitError when the agent sent nothing
	// and read nothing for Options.Timeout while Run waited.
	ErrTimeout = errors.New("driver: timed out waiting for the agent")

	// ErrOutputClosed is wrapped by a *WaitError when the agent's output
	// ended (the fromAgent channel was closed) while Run still waited.
	ErrOutputClosed = errors.New("driver: the agent's output ended")

	// ErrInvalidFault means a fault spec or a Fault of Options.Faults is
	// not one Run can inject: malformed, or naming a frame that is not
	// the editor's.
	ErrInvalidFault = errors.New("invalid stdio fault")
)

// A WaitError reports that a recorded editor frame could not be sent, or
// the end of the recording not reached, because the agent output it waits
// for never came.
type WaitError struct {
	// Frame is the index in Options.Recorded of the frame that waited, or
	// len(Options.Recorded) when Run waited for the output recorded after
	// the last editor frame, or -1 when a write of an error response to
	// an unrecorded agent request blocked.
	Frame int

	// Subject names what waited: "frame 12 (session/prompt id=3)",
	// "frame 14 (answer to fs/read_text_file #1)", or "the end of the
	// recording".
	Subject string

	// Waited is how long it waited; Silent is how much of that, at the
	// end, the agent sent nothing and read nothing.
	Waited, Silent time.Duration

	// Missing says what had not been seen, one item each: "the response
	// to editor request id=2 (session/prompt)", "1 more
	// session/request_permission request", "1 more session/update
	// (tool_call)", "12 more bytes of session/update (agent_message_chunk)
	// text", or "the agent to read it" when a write to the agent blocked.
	Missing []string

	// Err is ErrTimeout, ErrOutputClosed, or the cause of the context's
	// end.
	Err error

	// ClosedBy is, when Run had closed the agent's stdin by a FaultClose
	// or FaultSever of frame Frame and waited for the agent to answer
	// the editor requests it was sent before, that fault's kind; Subject
	// then names the frame by what it is ("session/prompt id=3"), and
	// Missing are the answers that never came. 0 for other waits.
	ClosedBy FaultKind
}

func (e *WaitError) Error() string {
	var b strings.Builder
	switch e.ClosedBy {
	case FaultClose:
		fmt.Fprintf(&b, "the agent did not answer after its stdin was closed in place of %s: waited %v", e.Subject, e.Waited.Round(time.Millisecond))
	case FaultSever:
		fmt.Fprintf(&b, "the agent did not answer after its stdin was closed in the middle of %s: waited %v", e.Subject, e.Waited.Round(time.Millisecond))
	default:
		fmt.Fprintf(&b, "%s waited %v", e.Subject, e.Waited.Round(time.Millisecond))
	}
	if e.Silent < e.Waited {
		fmt.Fprintf(&b, " (the last %v without a sign of the agent)", e.Silent.Round(time.Millisecond))
	}
	b.WriteString(" for: ")
	b.WriteString(strings.Join(e.Missing, "; "))
	switch e.Err {
	case ErrTimeout:
	case ErrOutputClosed:
		b.WriteString("; then the agent's output ended")
	default:
		fmt.Fprintf(&b, "; then: %v", e.Err)
	}
	return b.String()
}

func (e *WaitError) Unwrap() error { return e.Err }

// A MismatchError reports an agent request that the recording cannot
// answer: its method was never recorded, or the agent sent more requests
// of it than recorded. The agent got a JSON-RPC error response instead
// and Run went on.
type MismatchError struct {
	Method   string // the request's method
	N        int    // its number among the agent's requests of Method, from 1
	Recorded int    // how many requests of Method the recording holds
}

func (e *MismatchError) Error() string {
	if e.Recorded == 0 {
		return fmt.Sprintf("the agent sent a %s request, which the recording never has; it got an error response", e.Method)
	}
	return fmt.Sprintf("the agent sent %s request #%d, but the recording has only %d; it got an error response", e.Method, e.N, e.Recorded)
}

// A MissingError reports an agent request that the recording holds but the
// live agent skipped: it ended the turn the request was recorded in (it
// answered that turn's session/prompt) without sending it. Run went on.
type MissingError struct {
	Method string // the request's method
	N      int    // its number among the recorded requests of Method, from 1
	Live   int    // how many requests of Method the live agent had sent then
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("the agent did not send %s #%d (recorded; it sent %d) before ending the turn it was recorded in", e.Method, e.N, e.Live)
}

// A PermissionKindError reports a permission request whose recorded
// answer chose an option of a kind the live agent no longer offers. The
// agent got "cancelled" instead and Run went on.
type PermissionKindError struct {
	N       int      // the request's number among the agent's session/request_permission requests, from 1
	Kind    string   // the kind the recorded answer chose
	Offered []string // the kinds the live request offered
}

func (e *PermissionKindError) Error() string {
	offered := "none"
	if len(e.Offered) > 0 {
		offered = strings.Join(e.Offered, ", ")
	}
	return fmt.Sprintf("session/request_permission #%d offers no %s option (it offers %s), which the recorded answer chose; it got cancelled", e.N, e.Kind, offered)
}

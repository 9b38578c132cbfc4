package llmserver

import (
	"fmt"
	"strconv"
	"strings"
)

// A FaultKind is a kind of failure a replay injects.
type FaultKind uint8

const (
	// FaultStatus answers Fault.Status, with Fault.RetryAfter, and an
	// error body in the wire format's shape instead of the recorded
	// response. Spec: status:CODE[:retry-after=S].
	FaultStatus FaultKind = iota + 1
	// FaultHang never answers: the request waits until the agent, or the
	// tap closing, cancels it. Spec: hang.
	FaultHang
	// FaultCut sends the recorded status, headers and first Fault.Events
	// events (SSE events, NDJSON lines), then ends the body with an error,
	// so that the agent sees a stream broken off. Spec: cut:K.
	FaultCut
	// FaultReset sends what FaultCut does and then resets the connection
	// (see proxy.ErrReset). Spec: reset[:K].
	FaultReset
	// FaultMalformed sends the whole recorded response with one event
	// garbled: the event in the middle of the stream, among those with a
	// data line (SSE) or a value (NDJSON), has that JSON payload cut in
	// half; a body that is not a stream is cut in half. Spec: malformed.
	FaultMalformed
)

// A Fault is a failure injected in place of, or into, one recorded
// exchange's response. It is applied once, to the first request the
// exchange is due for. FaultStatus, FaultHang, FaultCut and FaultReset
// leave the exchange unconsumed, so that the agent's retry gets the
// recorded response whole; FaultMalformed consumes it, since its response
// is complete.
type Fault struct {
	Kind FaultKind

	// Status is the status code of a FaultStatus, from 400 to 599.
	Status int
	// RetryAfter, if not empty, is sent as the Retry-After header of a
	// FaultStatus: a number of seconds.
	RetryAfter string

	// Events is how many events FaultCut and FaultReset send before the
	// cut; if the stream has fewer, all are sent. A negative value means
	// half of the stream's events, rounded down, which is what a FaultReset
	// spec without K asks for.
	Events int
}

// faultSyntax is the grammar of fault specs, for error messages.
const faultSyntax = "status:CODE[:retry-after=S], hang, cut:K, reset[:K] or malformed"

// ParseFault parses a fault spec: status:CODE[:retry-after=S] (CODE from
// 400 to 599, S seconds), hang, cut:K (K events, 0 or more), reset[:K]
// (half the events without K), or malformed. The "N=" that names the
// exchange is the caller's to split off.
func ParseFault(spec string) (Fault, error) {
	name, arg, hasArg := strings.Cut(spec, ":")
	bad := func(why string) (Fault, error) {
		return Fault{}, fmt.Errorf("%w %q: %s", ErrInvalidFault, spec, why)
	}
	switch name {
	case "status":
		if !hasArg {
			return bad("status needs a code, as in status:429")
		}
		code, rest, hasRest := strings.Cut(arg, ":")
		n, ok := parseCount(code, 3)
		if !ok || n < 400 || n > 599 {
			return bad("the status code must be a number from 400 to 599")
		}
		f := Fault{Kind: FaultStatus, Status: n}
		if hasRest {
			v, ok := strings.CutPrefix(rest, "retry-after=")
			if !ok {
				return bad("after the status code, want :retry-after=SECONDS")
			}
			s, ok := parseCount(v, 9)
			if !ok {
				return bad("retry-after must be a number of seconds")
			}
			f.RetryAfter = strconv.Itoa(s)
		}
		return f, nil
	case "hang", "malformed":
		if hasArg {
			return bad(name + " takes no argument")
		}
		if name == "hang" {
			return Fault{Kind: FaultHang}, nil
		}
		return Fault{Kind: FaultMalformed}, nil
	case "cut", "reset":
		f := Fault{Kind: FaultCut}
		if name == "reset" {
			f = Fault{Kind: FaultReset, Events: -1}
			if !hasArg {
				return f, nil
			}
		} else if !hasArg {
			return bad("cut needs a number of events, as in cut:3")
		}
		k, ok := parseCount(arg, 9)
		if !ok {
			return bad("the number of events must be a number, 0 or more")
		}
		f.Events = k
		return f, nil
	}
	return bad("want " + faultSyntax)
}

// parseCount parses a decimal number of at most maxDigits digits, which
// keeps it well within an int.
func parseCount(s string, maxDigits int) (int, bool) {
	if s == "" || len(s) > maxDigits {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// String returns f's spec, which ParseFault reads back as f.
func (f Fault) String() string {
	switch f.Kind {
	case FaultStatus:
		s := "status:" + strconv.Itoa(f.Status)
		if f.RetryAfter != "" {
			s += ":retry-after=" + f.RetryAfter
		}
		return s
	case FaultHang:
		return "hang"
	case FaultCut:
		return "cut:" + strconv.Itoa(f.Events)
	case FaultReset:
		if f.Events < 0 {
			return "reset"
		}
		return "reset:" + strconv.Itoa(f.Events)
	case FaultMalformed:
		return "malformed"
	}
	return fmt.Sprintf("fault(%d)", f.Kind)
}

// validate reports why f cannot be injected, if it cannot.
func (f Fault) validate() error {
	bad := func(why string) error {
		return fmt.Errorf("%w %s: %s", ErrInvalidFault, f, why)
	}
	switch f.Kind {
	case FaultStatus:
		if f.Status < 400 || f.Status > 599 {
			return bad("the status code must be from 400 to 599")
		}
		if _, ok := parseCount(f.RetryAfter, 9); f.RetryAfter != "" && !ok {
			return bad("retry-after must be a number of seconds")
		}
	case FaultCut:
		if f.Events < 0 {
			return bad("the number of events must be 0 or more")
		}
	case FaultHang, FaultReset, FaultMalformed:
	default:
		return bad("unknown kind; want " + faultSyntax)
	}
	return nil
}

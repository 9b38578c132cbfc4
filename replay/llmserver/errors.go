package llmserver

import (
	"errors"
	"fmt"
)

// Errors returned by this package, wrapped with context; test for them with
// errors.Is.
var (
	// ErrInvalidFault means a fault spec or a Fault is not one this
	// package can inject, or, from New, a cut, reset or malformed fault for
	// an exchange recorded without a response.
	ErrInvalidFault = errors.New("invalid fault")

	// ErrInvalidOptions means New was given options it cannot serve: an
	// exchange without its Exchange, a fault for a number that is not
	// recorded, a negative Speed.
	ErrInvalidOptions = errors.New("invalid replay options")
)

// errNoExchange is a LoadError's when Exchanges.Load returns no exchange
// and no error.
var errNoExchange = errors.New("no exchange was returned")

// errBodyClosed is what a replayed body's Read returns after Close.
var errBodyClosed = errors.New("read on a closed replay body")

// A LoadError is a recorded exchange that Exchanges.Load failed to return
// when a request came for it.
type LoadError struct {
	Number int    // the exchange's
	Seq    uint64 // its event's
	Err    error  // Load's
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("llm #%d (event %d): %v", e.Number, e.Seq, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

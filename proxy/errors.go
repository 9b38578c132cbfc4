package proxy

import (
	"errors"

	"github.com/acptap/acptap/internal/hop"
)

// Errors returned by this package, wrapped with context; test for them with
// errors.Is.
var (
	// ErrClosed means the Tap was closed. An exchange cut short by Close is
	// recorded with End exchange.EndTapClosed.
	ErrClosed = errors.New("tap closed")

	// ErrInvalidUpstream means a base-URL upstream is not an http or https
	// URL with a host, or carries credentials, a query or a fragment.
	ErrInvalidUpstream = errors.New("invalid upstream URL")

	// ErrInvalidSecret means a Config.Secret is too short or has a
	// character that is not base64url.
	ErrInvalidSecret = errors.New("invalid tap secret")

	// ErrInvalidCA means the CA files exist but cannot be used: unreadable
	// PEM, a key that is not ECDSA, a certificate that is not a CA.
	ErrInvalidCA = errors.New("invalid CA files")

	// ErrCAMismatch means the CA certificate is not the key's: one of the
	// two files was replaced.
	ErrCAMismatch = errors.New("CA files do not match")

	// ErrReset, wrapped in the error that a response body from
	// Config.Transport returns from Read, makes the tap reset the agent's
	// connection after the bytes read so far: an HTTP/1 connection is
	// closed with a TCP RST, and the stream of an HTTP/2 one is reset. Any
	// other body error aborts the response, which the agent sees as a
	// stream cut short. The replay server uses it to inject resets.
	ErrReset = hop.ErrReset
)

// A RouteError is a base-URL route the tap refused (Tap.Wire).
type RouteError struct {
	Route Route
	Err   error // AddBaseURL's
}

func (e *RouteError) Error() string { return "base URL " + e.Route.Var + ": " + e.Err.Error() }
func (e *RouteError) Unwrap() error { return e.Err }

package proxy

import "errors"

// Errors returned by this package, wrapped with context; test for them with
// errors.Is.
var (
	// ErrClosed means the Tap was closed. An exchange cut short by Close is
	// recorded with an Error that says so.
	ErrClosed = errors.New("tap closed")

	// ErrInvalidUpstream means a base-URL upstream is not an http or https
	// URL with a host, or carries credentials, a query or a fragment.
	ErrInvalidUpstream = errors.New("invalid upstream URL")

	// ErrInvalidCA means the CA files exist but cannot be used: unreadable
	// PEM, a key that is not ECDSA, a certificate that is not a CA.
	ErrInvalidCA = errors.New("invalid CA files")
)

package wire

import "errors"

var (
	// ErrUnknownFormat is returned by Reassemble for a Format it does not
	// know.
	ErrUnknownFormat = errors.New("wire: unknown format")
	// ErrMalformed is wrapped by Reassemble's errors for a body or event
	// that is not what the format sends.
	ErrMalformed = errors.New("wire: malformed")
	// ErrTruncated is wrapped by Reassemble's error for a stream that
	// stops inside an event.
	ErrTruncated = errors.New("wire: stream ends inside an event")
)

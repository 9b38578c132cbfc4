package ndjson

import "errors"

// ErrNotJSON is wrapped by Line.Err for a line that is not one JSON value.
var ErrNotJSON = errors.New("ndjson: not a JSON value")

package exchange

import "errors"

// ErrUnknownEnd means an exchange's end is not one this package knows:
// the exchange was written by a newer acptap, or is damaged. Unmarshal
// returns it wrapped.
var ErrUnknownEnd = errors.New("unknown exchange end")

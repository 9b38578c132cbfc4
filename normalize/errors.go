package normalize

import "errors"

// ErrRules is wrapped by the errors of ParseRules and LoadRules for a rules
// file that is not a valid list of rules.
var ErrRules = errors.New("normalize: invalid rules")

// ErrOrder is wrapped by the error of ParseOrder for a name that is not
// an Order's.
var ErrOrder = errors.New("normalize: unknown order")

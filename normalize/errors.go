package normalize

import "errors"

// ErrRules is wrapped by the errors of ParseRules and LoadRules for a rules
// file that is not a valid list of rules.
var ErrRules = errors.New("normalize: invalid rules")

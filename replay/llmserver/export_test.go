package llmserver

import "context"

// SetHooks installs test hooks on s, before its first request: wait is
// called when a request starts waiting for its cancellation; sleep when a
// request or body waits for a recorded time, which may be past; read
// before a body that has returned sent bytes returns more or its end, an
// error from read ending the body. Any of them may be nil.
func SetHooks(s *Server, wait, sleep func(number int), read func(ctx context.Context, number, sent int) error) {
	s.hooks = hooks{wait: wait, sleep: sleep, read: read}
}

//go:build !linux

package record

// loopbackWatch watches nothing where there is no /proc to read the
// agent's sockets from: a recording there keeps no Loopback.
type loopbackWatch struct{}

func watchLoopback(int) *loopbackWatch { return nil }

func (*loopbackWatch) finish() *loopbackSeen { return nil }

package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interruption catches SIGINT, SIGTERM and SIGHUP for a command that
// stops its work cleanly on them, and remembers the first.
type interruption struct {
	sigs   chan os.Signal
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex // guards first
	first os.Signal
}

// interruptible returns a context cancelled by the first SIGINT, SIGTERM
// or SIGHUP. Later ones are caught too, so that the cleanup the first
// started is not cut short; stop restores the default handling.
func interruptible() (context.Context, *interruption) {
	ctx, cancel := context.WithCancel(context.Background())
	in := &interruption{sigs: make(chan os.Signal, 1), cancel: cancel, done: make(chan struct{})}
	signal.Notify(in.sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for {
			select {
			case sig := <-in.sigs:
				in.mu.Lock()
				if in.first == nil {
					in.first = sig
				}
				in.mu.Unlock()
				cancel()
			case <-in.done:
				return
			}
		}
	}()
	return ctx, in
}

// signal returns the first signal caught, nil if none.
func (in *interruption) signal() os.Signal {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.first
}

// stop stops catching the signals. It is idempotent.
func (in *interruption) stop() {
	select {
	case <-in.done:
		return
	default:
	}
	signal.Stop(in.sigs)
	close(in.done)
	in.cancel()
}

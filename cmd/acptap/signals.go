package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// onInterrupt returns a context that SIGINT, SIGTERM or SIGHUP cancels,
// and a function to call once the command has cleaned up: if a signal
// came, it kills acptap with it, as if acptap had not caught it, so that
// the exit status says so. For export, import, cp and mv, which stop
// between two files or events and undo what they had begun.
func onInterrupt() (context.Context, func()) {
	ctx, in := interruptible()
	return ctx, func() {
		in.stop()
		if s := in.signal(); s != nil {
			die(s)
		}
	}
}

// onInterruptDo runs cleanup when SIGINT, SIGTERM or SIGHUP comes, then
// kills acptap with the signal; for commands that cannot stop early. The
// function returned stops that; it waits for a cleanup under way.
func onInterruptDo(cleanup func()) func() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case s := <-sigs:
			cleanup()
			die(s)
		case <-done:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			wg.Wait()
		})
	}
}

// die kills acptap with s, its default action restored.
func die(s os.Signal) {
	signal.Reset(s)
	if sig, ok := s.(syscall.Signal); ok {
		syscall.Kill(os.Getpid(), sig)
		// The signal is delivered asynchronously.
		time.Sleep(time.Second)
		os.Exit(128 + int(sig))
	}
	os.Exit(1)
}

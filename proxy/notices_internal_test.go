package proxy

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestNoNoticeAfterClose: the tap's notices, its own and net/http's,
// reach Config.Logf until Close returns and never after, however many
// connection goroutines are still logging: a test's t.Logf called after
// its test ended is a data race in package testing.
func TestNoNoticeAfterClose(t *testing.T) {
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var closed atomic.Bool
	var before, after atomic.Int64
	tap, err := New(Config{CA: ca, Logf: func(format string, args ...any) {
		if closed.Load() {
			after.Add(1)
		} else {
			before.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Loggers like a connection's goroutine: they go on past Close.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				tap.errorLog.Printf("http: TLS handshake error from 127.0.0.1:1: EOF")
				tap.logf("http tap: a notice")
			}
		})
	}
	tap.logf("http tap: before Close")
	if err := tap.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed.Store(true)
	for range 1000 {
		tap.logf("http tap: after Close")
		tap.errorLog.Printf("http: after Close")
	}
	close(stop)
	wg.Wait()
	if before.Load() == 0 {
		t.Errorf("no notice reached Logf before Close, want every one")
	}
	if n := after.Load(); n != 0 {
		t.Errorf("%d notices reached Logf after Close returned, want none", n)
	}
}

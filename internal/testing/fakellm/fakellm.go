// Package fakellm is what acptap's scripted LLM upstreams share: the log of the requests they got, the signal that ends their stalled streams, and loopback listeners, plain or TLS with a CA file for the client.
package fakellm

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"slices"
	"sync"
	"time"
)

// Log is a fake server's record of the requests it got, of type R, and
// the signal that ends its stalled streams. The zero value is ready;
// servers embed it.
type Log[R any] struct {
	mu       sync.Mutex    // guards the fields below
	requests []R           // in the order they came
	done     chan struct{} // closed by Close; made on first use
	closed   bool
}

// Keep records r.
func (l *Log[R]) Keep(r R) {
	l.mu.Lock()
	l.requests = append(l.requests, r)
	l.mu.Unlock()
}

// Requests returns the requests kept so far, in order.
func (l *Log[R]) Requests() []R {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.requests)
}

// Done is closed once Close is called: streams that wait for their client
// to go away end then.
func (l *Log[R]) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	return l.done
}

// Close ends the streams that wait for their client to go away. It may be
// called any number of times.
func (l *Log[R]) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	if !l.closed {
		l.closed = true
		close(l.done)
	}
}

// Listen serves h over plain HTTP on a loopback port.
func Listen(h http.Handler) *httptest.Server { return httptest.NewServer(h) }

// ListenTLS serves h over HTTPS on a loopback port, with httptest's
// certificate (valid for 127.0.0.1, ::1 and example.com, not localhost),
// and writes the certificate to a PEM file in dir, named after name, for
// the client's trust (acptap record --upstream-ca).
func ListenTLS(h http.Handler, dir, name string) (srv *httptest.Server, caFile string, err error) {
	srv = httptest.NewUnstartedServer(h)
	// Clients that do not trust the certificate are the client's
	// problem, not noise for the test log.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	f, err := os.CreateTemp(dir, name+"-ca-*.pem")
	if err != nil {
		srv.Close()
		return nil, "", err
	}
	err = pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		srv.Close()
		return nil, "", err
	}
	return srv, f.Name(), nil
}

// RandomHex returns n random bytes in hex, for the fresh ids real APIs
// give every response.
func RandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Follow calls show for each request that requests returns beyond those
// already shown, polling until the process is interrupted (SIGINT): the
// loop of the fakes' commands, which print what an agent sent as it
// arrives.
func Follow[R any](requests func() []R, show func(R)) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	seen := 0
	for {
		select {
		case <-sigs:
			return
		case <-time.After(100 * time.Millisecond):
		}
		reqs := requests()
		for _, r := range reqs[seen:] {
			show(r)
		}
		seen = len(reqs)
	}
}

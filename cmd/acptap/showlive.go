package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/acptap/acptap/store"
	"github.com/acptap/acptap/timeline"
)

// How the live page of show --html --follow is kept up to date.
const (
	// livePoll is how long the page's request for an update waits for
	// one before it is answered 204 and asked again: under the timeouts
	// of browsers and proxies.
	livePoll = 25 * time.Second
	// liveMinBuild is the shortest time between two builds of the page;
	// a page that takes long to build is built at most a fifth of the
	// time, so that a long recording's page does not take a CPU.
	liveMinBuild = 100 * time.Millisecond
	// liveGone is how long, after the recording ended, a page that asked
	// for updates but asks no more (its tab was closed) is waited for.
	liveGone = 5 * time.Second
)

// errLiveStopped ends follow when a signal stops show.
var errLiveStopped = errors.New("the live page was stopped")

// showLive serves the page of recording rec, being recorded, on a
// loopback port and prints its URL: the page asks for the page again as
// the recording grows and shows it where the user is, without a reload.
// It returns once the recording ended and its whole page was fetched (or
// the page that was open is gone), or, killed by the signal, when SIGINT,
// SIGTERM or SIGHUP comes; either way nothing is left: no file, no
// listener.
func showLive(st *store.Store, rec store.Recording, opts *showOptions) error {
	ctx, in := interruptible()
	defer func() {
		in.stop()
		if s := in.signal(); s != nil {
			die(s)
		}
	}()
	// Only this process's user can know the address's token: the page
	// shows the recording, and other users of the machine reach
	// 127.0.0.1 too.
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return fmt.Errorf("making the live page's address: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return usageErrorf("cannot serve the live page on 127.0.0.1: %v", err)
	}
	l := &livePage{live: timeline.NewLive(), changed: make(chan struct{}), host: ln.Addr().String(), base: "/" + hex.EncodeToString(tok) + "/", quit: ctx.Done()}
	srv := &http.Server{Handler: l, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		// The page has what it asked for: nothing waits long on a
		// handler, which the signal or the final version woke.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
		<-served
	}()
	url := "http://" + l.host + l.base
	if _, err := fmt.Fprintln(opts.IO.Out, url); err != nil {
		return err
	}
	if opts.Open {
		if err := openInBrowser(url, opts.IO); err != nil {
			return err
		}
	}

	if err := l.publish(st, rec.Name, false); err != nil {
		return recordingError(err, opts.StorePath)
	}
	err = follow(st, rec, func(e store.Event) error {
		l.mu.Lock()
		l.live.Add(e)
		l.dirty = true
		l.mu.Unlock()
		return nil
	}, func() error {
		if ctx.Err() != nil {
			return errLiveStopped
		}
		if l.due() {
			return l.publish(st, rec.Name, false)
		}
		return nil
	})
	if errors.Is(err, errLiveStopped) {
		return nil
	}
	if err != nil {
		return recordingError(err, opts.StorePath)
	}
	if err := l.publish(st, rec.Name, true); err != nil {
		return recordingError(err, opts.StorePath)
	}
	// Until the whole page is fetched, or the page that asked for
	// updates is gone.
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
		if l.finished() {
			return nil
		}
	}
}

// livePage serves the page of a recording in progress: the page at base,
// its updates at base+"data".
type livePage struct {
	host string // the listener's address, which requests must name
	base string // "/TOKEN/"
	quit <-chan struct{}

	mu      sync.Mutex
	live    *timeline.Live
	dirty   bool          // events were added since the last build
	built   time.Time     // when the page was last built
	cost    time.Duration // how long that took
	page    *timeline.Page
	body    []byte        // page as JSON
	changed chan struct{} // closed, and made anew, when page changes
	// What the page asked for: whether it was ever fetched, whether its
	// last version was, how many requests for updates are waiting and
	// when the last one ended.
	fetched   bool
	delivered bool
	waiting   int
	lastSeen  time.Time
}

// due says whether the page should be built again: events came, and
// enough time went by since the last build.
func (l *livePage) due() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dirty && time.Since(l.built) >= max(liveMinBuild, 5*l.cost)
}

// publish builds the page from the events so far and the recording's
// metadata as it is now, and wakes the requests waiting for it; done
// says it is the last one.
func (l *livePage) publish(st *store.Store, name string, done bool) error {
	rec, err := st.Get(name)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	start := time.Now()
	p := l.live.Page(rec)
	n := 1
	if l.page != nil {
		n = l.page.Live.Version + 1
	}
	p.Live = &timeline.LiveState{URL: "data", Version: n, Done: done}
	p.Acptap = version()
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encoding the live page: %w", err)
	}
	l.page, l.body, l.dirty = p, body, false
	l.built, l.cost = time.Now(), time.Since(start)
	close(l.changed)
	l.changed = make(chan struct{})
	return nil
}

// finished says whether the live page is done with: the recording's last
// page was fetched, or the page that asked for updates is gone.
func (l *livePage) finished() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.delivered || l.fetched && l.waiting == 0 && time.Since(l.lastSeen) > liveGone
}

// ServeHTTP implements http.Handler.
func (l *livePage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A page of another site that a DNS name rebound to 127.0.0.1 names
	// that name: it gets nothing.
	if r.Host != l.host {
		http.Error(w, "misdirected request", http.StatusMisdirectedRequest)
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	switch r.URL.Path {
	case l.base:
		l.servePage(w)
	case l.base + "data":
		l.serveData(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (l *livePage) servePage(w http.ResponseWriter) {
	l.mu.Lock()
	p := l.page
	l.fetched = true
	l.lastSeen = time.Now()
	l.delivered = l.delivered || p.Live.Done
	l.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = timeline.Write(w, p) // a page not written was closed: it asks again
}

// serveData answers a request for the version after ?after=N: at once if
// there is one, else when there is, or 204 after livePoll.
func (l *livePage) serveData(w http.ResponseWriter, r *http.Request) {
	after, err := strconv.Atoi(r.URL.Query().Get("after"))
	if err != nil {
		http.Error(w, "want ?after=VERSION", http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	l.fetched = true
	l.waiting++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.waiting--
		l.lastSeen = time.Now()
		l.mu.Unlock()
	}()
	timeout := time.NewTimer(livePoll)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		p, body, changed := l.page, l.body, l.changed
		if p.Live.Version > after {
			l.delivered = l.delivered || p.Live.Done
		}
		l.mu.Unlock()
		if p.Live.Version > after {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body) // a page that went away asks again, or not
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			w.WriteHeader(http.StatusNoContent)
			return
		case <-l.quit:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case <-r.Context().Done():
			return
		}
	}
}

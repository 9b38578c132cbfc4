package record

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/acptap/acptap/internal/mcpconf"
	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/internal/stale"
	"github.com/acptap/acptap/lane"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/proxy/tapproc"
	"github.com/acptap/acptap/record/mcprelay"
	"github.com/acptap/acptap/store"
)

// mcpTap takes the MCP servers an editor passes the agent in session/new,
// session/load and session/resume into the recording, each under the
// index it is named in, in order. The frame forwarded to the agent runs
// each stdio server through acptap's relay (package mcprelay), which
// reports the server's lines over a unix socket in a private directory,
// stamped from the recording's shared clock, which places them on the one
// timeline as lanes of their own; it gives each HTTP or SSE server the
// URL of a route of an HTTP tap of the tap's own (proxy.Tap.AddMCP),
// whose exchanges are recorded as the LLM's are, with the server's
// number. The frame recorded is the editor's.
type mcpTap struct {
	relay   string   // the relay's program, acptap itself; "" to leave stdio servers alone
	clock   *os.File // the shared clock's file, sent to each relay; nil without relay
	seqr    *sequencer
	w       *store.Writer
	secrets *redact.Redactor
	logf    func(format string, args ...any)
	// httpCfg configures the HTTP tap, started for the first HTTP or
	// SSE server.
	httpCfg proxy.Config

	mu      sync.Mutex // guards the fields below
	servers int        // the servers named, and so the next index
	conns   map[*net.UnixConn]bool
	// ln listens on socket, in dir, a directory of record's own removed
	// by close; all three are set when the first stdio server is
	// registered.
	ln      *net.UnixListener
	socket  string
	dir     string
	httpTap *proxy.Tap     // set for the first HTTP or SSE server
	closed  bool           // close has begun: no listening any more
	done    sync.WaitGroup // the accept loop and the relays' connections
}

// newMCPTap returns a tap whose relays are the program relay; it listens
// for them once the editor names a stdio server, and starts its HTTP tap,
// configured by httpCfg, once it names an HTTP or SSE one.
func newMCPTap(relay string, clock *os.File, seqr *sequencer, w *store.Writer, secrets *redact.Redactor, httpCfg proxy.Config, logf func(string, ...any)) *mcpTap {
	return &mcpTap{relay: relay, clock: clock, seqr: seqr, w: w, secrets: secrets, httpCfg: httpCfg, logf: logf, conns: map[*net.UnixConn]bool{}}
}

// listenLocked starts listening for relays, if not yet. t.mu is held.
func (t *mcpTap) listenLocked() error {
	switch {
	case t.ln != nil:
		return nil
	case t.closed:
		return errors.New("the recording is ending")
	}
	// The directories of recorders killed with SIGKILL go first.
	stale.Remove(os.TempDir(), stale.MCPPrefix)
	dir, err := os.MkdirTemp("", stale.Dir(stale.MCPPrefix))
	if err != nil {
		return err
	}
	socket := filepath.Join(dir, "relay.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	t.ln, t.socket, t.dir = ln, socket, dir
	t.done.Go(func() { t.serve(ln) })
	return nil
}

// serve accepts relays until the listener closes.
func (t *mcpTap) serve(ln *net.UnixListener) {
	for {
		conn, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		t.mu.Lock()
		t.conns[conn] = true
		t.mu.Unlock()
		t.done.Go(func() {
			t.handle(conn)
			t.mu.Lock()
			delete(t.conns, conn)
			t.mu.Unlock()
			conn.Close()
		})
	}
}

// handle takes one relay: its hello, the clock it is sent, then its
// records until it ends.
func (t *mcpTap) handle(conn *net.UnixConn) {
	br := bufio.NewReader(conn)
	index, err := mcprelay.ReadHello(br)
	if err == nil {
		t.mu.Lock()
		if index >= t.servers {
			err = fmt.Errorf("no MCP server %d was started through this recording", index)
		}
		t.mu.Unlock()
	}
	if err != nil {
		t.logf("an MCP relay: %v", err)
		return
	}
	if _, _, err := conn.WriteMsgUnix([]byte{1}, syscall.UnixRights(int(t.clock.Fd())), nil); err != nil {
		t.logf("MCP server %d: sending the clock: %v", index, err)
		return
	}
	for {
		rec, err := mcprelay.ReadRecord(br)
		if err != nil {
			return
		}
		e := store.Event{Kind: store.KindFrame, Lane: lane.MCP(index, rec.Dir), Data: t.secrets.Bytes(redact.Members(rec.Data))}
		if rec.Continued {
			e.Flags |= store.FlagContinued
		}
		if rec.NoNewline {
			e.Flags |= store.FlagNoNewline
		}
		t.seqr.event(rec.Stamp, e)
	}
}

// close stops taking relays, gives those still connected grace to report
// their last lines (the agent has exited; its servers follow), and
// removes the tap's directory.
func (t *mcpTap) close(grace time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.closed = true
	if t.ln != nil {
		t.ln.Close()
	}
	httpTap := t.httpTap
	t.mu.Unlock()
	if httpTap != nil {
		// Ends the exchanges still open (an SSE stream the agent kept)
		// and waits for the last to be recorded.
		if err := httpTap.Close(); err != nil {
			t.logf("MCP servers: %v", err)
		}
	}
	wait := make(chan struct{})
	go func() {
		t.done.Wait()
		close(wait)
	}()
	select {
	case <-wait:
	case <-time.After(grace):
		t.mu.Lock()
		for c := range t.conns {
			c.Close()
		}
		t.mu.Unlock()
		<-wait
	}
	if t.clock != nil {
		t.clock.Close()
	}
	if t.dir != "" {
		os.RemoveAll(t.dir)
	}
}

// register takes a server into the recording under the next index and
// returns the command line or URL to give the agent in its place, or
// false to leave it as the editor named it (the relay is off, the
// recording has no lanes left for a stdio server, a tap cannot start),
// which it says; such a server is listed with why it was not recorded.
func (t *mcpTap) register(s mcpconf.Server) (mcpconf.Server, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := t.servers
	t.servers++
	out, err := t.routeLocked(i, s)
	entry := store.MCPServer{Name: s.Name, Argv: t.secrets.Argv(s.Argv)}
	if s.Type != mcpconf.Stdio {
		entry.Type, entry.URL = s.Type, t.secrets.URL(s.URL)
	}
	if err != nil {
		entry.NotRecorded = err.Error()
		t.logf("MCP server %s not recorded: %v", s.Name, err)
	}
	t.w.Update(func(r *store.Recording) {
		r.MCPServers = append(r.MCPServers, entry)
	})
	return out, err == nil
}

// routeLocked returns what the agent is to be given in place of server
// s, index i: a stdio server's command through the relay, another's URL
// on the HTTP tap. t.mu is held.
func (t *mcpTap) routeLocked(i int, s mcpconf.Server) (mcpconf.Server, error) {
	if s.Type == mcpconf.Stdio {
		switch {
		case t.relay == "":
			return s, errors.New("stdio MCP servers are not relayed in this recording")
		case i >= lane.MaxMCPServers:
			return s, fmt.Errorf("a recording holds the stdio of %d", lane.MaxMCPServers)
		}
		if err := t.listenLocked(); err != nil {
			return s, err
		}
		s.Argv = append([]string{t.relay, mcprelay.Command, t.socket, strconv.Itoa(i), "--"}, s.Argv...)
		return s, nil
	}
	if t.httpTap == nil {
		if t.closed {
			return s, errors.New("the recording is ending")
		}
		tap, err := proxy.New(t.httpCfg)
		if err != nil {
			return s, err
		}
		t.httpTap = tap
	}
	local, err := t.httpTap.AddMCP(i+1, s.URL)
	if err != nil {
		return s, err
	}
	s.URL = local
	return s, nil
}

// rewrite is stdiotap.Config.RewriteStdin: an editor line that is a
// session/new, session/load or session/resume request with MCP servers
// goes to the agent with each server routed through the tap, registered;
// any other line, or one it cannot read, as it is.
func (t *mcpTap) rewrite(line []byte) []byte {
	return mcpconf.Rewrite(line, t.register)
}

// startMCP starts taking the MCP servers the editor names into the
// recording: stdio ones if Options.MCPRelay says so (and the clock is
// shared with the relays), HTTP and SSE ones through an HTTP tap of its
// own configured as cfg, recording into seqr.
func (p *Plan) startMCP(shared *tapproc.SharedClock, seqr *sequencer, w *store.Writer, cfg proxy.Config) *mcpTap {
	relay := p.opts.MCPRelay
	var clock *os.File
	if relay != "" && shared != nil {
		var err error
		if clock, err = shared.Dup(); err != nil {
			p.opts.Logf("stdio MCP servers will not be recorded: %v", err)
			relay = ""
		}
	} else {
		relay = ""
	}
	return newMCPTap(relay, clock, seqr, w, p.secrets, cfg, p.opts.Logf)
}

// rewriteStdin returns the tap's rewrite of the editor's lines, nil
// without a tap.
func (t *mcpTap) rewriteStdin() func([]byte) []byte {
	if t == nil {
		return nil
	}
	return t.rewrite
}

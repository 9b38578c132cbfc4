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
	"github.com/acptap/acptap/proxy/tapproc"
	"github.com/acptap/acptap/record/mcprelay"
	"github.com/acptap/acptap/store"
)

// mcpTap takes the stdio MCP servers an editor passes the agent in
// session/new, session/load and session/resume into the recording: the
// frame forwarded to the agent runs each server through acptap's relay
// (package mcprelay), the frame recorded is the editor's, and each relay
// reports the server's lines over a unix socket in a private directory,
// stamped from the recording's shared clock, which places them on the one
// timeline as lanes of their own.
type mcpTap struct {
	relay   string   // the relay's program, acptap itself
	clock   *os.File // the shared clock's file, sent to each relay
	seqr    *sequencer
	w       *store.Writer
	secrets *redact.Redactor
	logf    func(format string, args ...any)

	mu      sync.Mutex // guards the fields below
	servers int        // the servers registered, and so the next index
	conns   map[*net.UnixConn]bool
	// ln listens on socket, in dir, a directory of record's own removed
	// by close; all three are set when the first server is registered.
	ln     *net.UnixListener
	socket string
	dir    string
	closed bool           // close has begun: no listening any more
	done   sync.WaitGroup // the accept loop and the relays' connections
}

// newMCPTap returns a tap whose relays are the program relay; it listens
// for them once the editor names a stdio server.
func newMCPTap(relay string, clock *os.File, seqr *sequencer, w *store.Writer, secrets *redact.Redactor, logf func(string, ...any)) *mcpTap {
	return &mcpTap{relay: relay, clock: clock, seqr: seqr, w: w, secrets: secrets, logf: logf, conns: map[*net.UnixConn]bool{}}
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
	t.mu.Unlock()
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
	t.clock.Close()
	if t.dir != "" {
		os.RemoveAll(t.dir)
	}
}

// register takes a server into the recording and returns its index, or
// -1 when it cannot (the recording has no lanes left for it, or the tap
// cannot listen), which it says.
func (t *mcpTap) register(name string, argv []string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.servers >= lane.MaxMCPServers {
		t.logf("MCP server %s not recorded: a recording holds %d", name, lane.MaxMCPServers)
		return -1
	}
	if err := t.listenLocked(); err != nil {
		t.logf("MCP server %s not recorded: %v", name, err)
		return -1
	}
	i := t.servers
	t.servers++
	masked := t.secrets.Argv(argv)
	t.w.Update(func(r *store.Recording) {
		r.MCPServers = append(r.MCPServers, store.MCPServer{Name: name, Argv: masked})
	})
	return i
}

// rewrite is stdiotap.Config.RewriteStdin: an editor line that is a
// session/new, session/load or session/resume request with stdio MCP
// servers goes to the agent with each server's command run through the
// relay, registered; any other line, or one it cannot read, as it is.
func (t *mcpTap) rewrite(line []byte) []byte {
	return mcpconf.Rewrite(line, func(name string, argv []string) ([]string, bool) {
		index := t.register(name, argv)
		if index < 0 {
			return nil, false
		}
		return append([]string{t.relay, mcprelay.Command, t.socket, strconv.Itoa(index), "--"}, argv...), true
	})
}

// startMCP starts taking the agent's stdio MCP servers into the
// recording, if Options.MCPRelay says so; nil if not, or if the tap
// cannot start, which it says: the session is recorded without them.
func (p *Plan) startMCP(shared *tapproc.SharedClock, seqr *sequencer, w *store.Writer) *mcpTap {
	if p.opts.MCPRelay == "" || shared == nil {
		return nil
	}
	clock, err := shared.Dup()
	if err != nil {
		p.opts.Logf("MCP servers will not be recorded: %v", err)
		return nil
	}
	return newMCPTap(p.opts.MCPRelay, clock, seqr, w, p.secrets, p.opts.Logf)
}

// rewriteStdin returns the tap's rewrite of the editor's lines, nil
// without a tap.
func (t *mcpTap) rewriteStdin() func([]byte) []byte {
	if t == nil {
		return nil
	}
	return t.rewrite
}

package stdiotap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/acptap/acptap/internal/stamp"
)

// A Session is a running agent and the pumps around its stdio.
type Session struct {
	pid     int
	started time.Time
	grace   time.Duration

	agentStdin *os.File // our end of the agent's stdin
	stdinOnce  sync.Once
	stdoutR    *os.File // our end of the agent's stdout
	stderrR    *os.File // our end of the agent's stderr
	flows      [3]*flow // indexed by Stream
	tape       *tape    // nil without Config.OnLine
	outputs    sync.WaitGroup

	// exited is closed once the agent has been reaped and state and
	// waitErr are set.
	exited  chan struct{}
	state   *os.ProcessState
	waitErr error

	mu     sync.Mutex // guards reaped
	reaped bool       // the agent's pid may name another process: signal nothing

	pipeSigs chan os.Signal // SIGPIPE, caught and dropped
	fwdSigs  chan os.Signal // nil unless Config.ForwardSignals
	done     chan struct{}  // closed when Wait is done; stops the relay

	waitOnce sync.Once
	exit     Exit  // result of Wait, set by waitOnce
	err      error // result of Wait, set by waitOnce
}

// Start starts the agent described by cfg and the pumps that forward its
// stdio. The caller must call Wait.
//
// Start returns ErrNoCommand if cfg.Argv is empty, and an error wrapping
// ErrNotFound and the lookup error, which names the command, if the
// agent's executable cannot be found.
func Start(cfg Config) (*Session, error) {
	if len(cfg.Argv) == 0 {
		return nil, ErrNoCommand
	}
	path, err := lookPath(cfg.Argv[0], cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	s := &Session{
		grace:  cfg.Grace,
		exited: make(chan struct{}),
		done:   make(chan struct{}),
	}
	if s.grace <= 0 {
		s.grace = DefaultGrace
	}
	ends, err := newPipes()
	if err != nil {
		return nil, err
	}
	s.agentStdin, s.stdoutR, s.stderrR = ends[Stdin][1], ends[Stdout][0], ends[Stderr][0]
	cmd := &exec.Cmd{
		Path:        path,
		Args:        cfg.Argv,
		Dir:         cfg.Dir,
		Env:         cfg.Env,
		Stdin:       ends[Stdin][0],
		Stdout:      ends[Stdout][1],
		Stderr:      ends[Stderr][1],
		SysProcAttr: sysProcAttr(),
	}

	// Catch the signals before the agent exists, so that none arriving
	// in between kills this process and leaves the agent unsignalled.
	// Caught signals are reset to their default in the child.
	s.pipeSigs = make(chan os.Signal, 1)
	signal.Notify(s.pipeSigs, syscall.SIGPIPE)
	if cfg.ForwardSignals {
		s.fwdSigs = make(chan os.Signal, 4)
		signal.Notify(s.fwdSigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	}

	startErr := make(chan error, 1)
	go s.run(cmd, startErr)
	if err := <-startErr; err != nil {
		s.stopSignals()
		ends.close()
		return nil, fmt.Errorf("stdiotap: start %s: %w", cfg.Argv[0], err)
	}
	for _, f := range []*os.File{ends[Stdin][0], ends[Stdout][1], ends[Stderr][1]} {
		f.Close() // the agent has its copies; ours would hide its EOF
	}
	if s.fwdSigs != nil {
		go s.relay()
	}
	s.startPumps(cfg)
	return s, nil
}

// pipes are the agent's stdio pipes, [stream]{read, write}. The child's
// ends are *os.File so that exec hands them to the agent as they are,
// without copying goroutines of its own.
type pipes [3][2]*os.File

// newPipes makes the three pipes, or none.
func newPipes() (pipes, error) {
	var ends pipes
	for i := range ends {
		r, w, err := os.Pipe()
		if err != nil {
			ends.close()
			return pipes{}, fmt.Errorf("stdiotap: create %v pipe: %w", Stream(i), err)
		}
		ends[i] = [2]*os.File{r, w}
	}
	return ends, nil
}

// close closes every end made.
func (ends pipes) close() {
	for _, e := range ends {
		for _, f := range e {
			if f != nil {
				f.Close()
			}
		}
	}
}

// startPumps starts copying between the editor's stdio (cfg's, or this
// process's) and the agent's, framing lines on the tape if cfg.OnLine is
// set.
func (s *Session) startPumps(cfg Config) {
	stdin, stdout, stderr := cfg.Stdin, cfg.Stdout, cfg.Stderr
	if stdin == nil {
		stdin = os.Stdin
	}
	if stdout == nil {
		stdout = os.Stdout
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	if cfg.OnLine != nil {
		maxLine := cfg.MaxLine
		if maxLine <= 0 {
			maxLine = defaultMaxLine
		}
		var frames [3]*framer
		for i := range frames {
			frames[i] = &framer{stream: Stream(i), max: maxLine, emit: cfg.OnLine}
		}
		clock := cfg.Clock
		if clock == nil {
			clock = stamp.NewClock()
		}
		s.tape = newTape(frames, clock, cfg.MaxBacklog, cfg.OnBacklog, cfg.FrameAtOnce)
	}
	for i := range s.flows {
		s.flows[i] = &flow{stream: Stream(i), tape: s.tape}
	}
	s.outputs.Add(2)
	go func() {
		defer s.outputs.Done()
		pump(s.stdoutR, stdout, s.flows[Stdout], false)
	}()
	go func() {
		defer s.outputs.Done()
		pump(s.stderrR, stderr, s.flows[Stderr], false)
	}()
	go func() {
		var dst io.Writer = s.agentStdin
		var rw *lineRewriter
		if cfg.RewriteStdin != nil {
			rw = &lineRewriter{w: s.agentStdin, rewrite: cfg.RewriteStdin}
			dst = rw
		}
		pump(stdin, dst, s.flows[Stdin], true)
		if rw != nil {
			rw.flush()
		}
		s.closeAgentStdin()
		s.stop()
	}()
}

// lookPath finds the executable for name the way the agent's exec will:
// a name without a slash in PATH, a relative path relative to dir. It
// returns the path to give exec.Cmd.Path.
func lookPath(name, dir string) (string, error) {
	if !strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	p := name
	if dir != "" && !filepath.IsAbs(name) {
		p = filepath.Join(dir, name)
	}
	if _, err := exec.LookPath(p); err != nil {
		return "", err
	}
	return name, nil // exec resolves a relative Path against Dir
}

// run starts cmd, reports the outcome on started, and, if the agent
// started, reaps it and closes s.exited.
//
// Pdeathsig is sent when the thread that forked the agent exits, not
// when this process does, and the Go runtime ends a thread when a
// goroutine locked to it returns without unlocking. A goroutine locked
// elsewhere could thus end the forking thread and take the agent with
// it, unless the thread stays locked to this goroutine from the fork
// until the agent is gone.
func (s *Session) run(cmd *exec.Cmd, started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	s.started = time.Now() // before the fork, so no Line.At precedes it
	if err := cmd.Start(); err != nil {
		started <- err
		return
	}
	s.pid = cmd.Process.Pid
	started <- nil

	// Until the agent is reaped its pid, which is also its process group
	// id, cannot be reused, so Signal may use it. Where the platform can
	// wait for the agent to become a zombie without reaping it, Signal
	// works up to its very end; elsewhere it stops a moment after.
	if blockUntilWaitable(s.pid) {
		s.endGroup()
		s.markReaped()
	}
	err := cmd.Wait()
	s.markReaped()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		s.waitErr = fmt.Errorf("stdiotap: wait for agent %d: %w", s.pid, err)
	}
	s.state = cmd.ProcessState
	close(s.exited)
}

// endGroup ends the processes the agent left in its process group (a
// wrapper's background job, a server it spawned): the session is over.
// It sends them SIGTERM, then SIGKILL if any is left after Grace. It runs
// while the exited agent is a zombie, whose pid, the group's id, cannot
// name another group until it is reaped.
func (s *Session) endGroup() {
	if !groupHasOthers(s.pid) {
		return
	}
	syscall.Kill(-s.pid, syscall.SIGTERM)
	deadline := time.Now().Add(s.grace)
	for time.Now().Before(deadline) {
		if !groupHasOthers(s.pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	syscall.Kill(-s.pid, syscall.SIGKILL)
}

func (s *Session) markReaped() {
	s.mu.Lock()
	s.reaped = true
	s.mu.Unlock()
}

// relay forwards the signals caught for Config.ForwardSignals.
func (s *Session) relay() {
	for {
		select {
		case sig := <-s.fwdSigs:
			s.Signal(sig) // fails only once the agent is gone
		case <-s.done:
			return
		}
	}
}

func (s *Session) stopSignals() {
	signal.Stop(s.pipeSigs)
	if s.fwdSigs != nil {
		signal.Stop(s.fwdSigs)
	}
}

// closeAgentStdin closes our end of the agent's stdin, so the agent
// reads EOF and a write blocked on it returns.
func (s *Session) closeAgentStdin() {
	s.stdinOnce.Do(func() { s.agentStdin.Close() })
}

// stop ends an agent that does not exit after its stdin was closed:
// after Grace it sends SIGTERM to its process group, after another Grace
// SIGKILL.
func (s *Session) stop() {
	t := time.NewTimer(s.grace)
	defer t.Stop()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case <-s.exited:
			return
		case <-t.C:
		}
		s.Signal(sig) // fails only once the agent is gone
		t.Reset(s.grace)
	}
}

// Pid returns the agent's process id, which is also its process group id.
func (s *Session) Pid() int { return s.pid }

// Started returns the time just before the agent was started. No Line is
// read before it.
func (s *Session) Started() time.Time { return s.started }

// Then calls fn once every Line of a chunk read before Then was called
// has been handed to Config.OnLine: from the goroutine that calls OnLine,
// in order with its calls, or, once the last Line has been handed out (or
// without OnLine), at once. An event seen elsewhere, stamped from
// Config.Clock, whose Stamp is below those of the Lines yet to come can
// so be recorded in its place among them, as soon as the Lines before it
// are. fn must not block for long: framing waits for it.
func (s *Session) Then(fn func()) {
	if s.tape == nil {
		fn()
		return
	}
	s.tape.then(fn)
}

// Signal sends sig to the agent's process group. Once the agent has
// exited it returns os.ErrProcessDone.
func (s *Session) Signal(sig os.Signal) error {
	ss, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("stdiotap: signal agent: unsupported signal %v", sig)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reaped {
		return os.ErrProcessDone
	}
	if err := syscall.Kill(-s.pid, ss); err != nil {
		return fmt.Errorf("stdiotap: signal agent group %d: %w", s.pid, err)
	}
	return nil
}

// Wait waits for the agent to exit and for its stdout and stderr to be
// forwarded and framed to the end, and returns how the agent ended. An
// agent that exits with a non-zero status or is killed by a signal is
// not an error: the error is non-nil only if the agent's status could
// not be obtained, and the Exit is then {Code: -1}.
//
// If a process that inherited the agent's stdout or stderr keeps them
// open, Wait stops reading them after Config.Grace; if a write to
// Config.Stdout or Config.Stderr is still blocked another Grace later,
// Wait returns anyway and the rest of that stream is neither forwarded
// nor framed. Bytes the editor sent that were forwarded but did not end
// in a newline are framed with NoNewline. No OnLine call happens after
// Wait returns. Wait may be called any number of times, concurrently.
func (s *Session) Wait() (Exit, error) {
	s.waitOnce.Do(s.finish)
	return s.exit, s.err
}

func (s *Session) finish() {
	<-s.exited
	// Closing the agent's stdin first unblocks a forwarding write, which
	// the stdin pump makes holding its flow's lock.
	s.closeAgentStdin()

	drained := make(chan struct{})
	go func() {
		s.outputs.Wait()
		close(drained)
	}()
	t := time.NewTimer(s.grace)
	select {
	case <-drained:
	case <-t.C:
		// Something else holds the agent's stdout or stderr open. A
		// deadline in the past makes blocked and future reads fail.
		past := time.Unix(1, 0)
		s.stdoutR.SetReadDeadline(past)
		s.stderrR.SetReadDeadline(past)
		t.Reset(s.grace)
		select {
		case <-drained:
		case <-t.C:
		}
	}
	t.Stop()

	for _, l := range s.flows {
		l.close()
	}
	if s.tape != nil {
		s.tape.close() // frames what is left on it
	}
	s.stopSignals()
	close(s.done)
	s.stdoutR.Close()
	s.stderrR.Close()

	s.exit, s.err = exitOf(s.state), s.waitErr
}

// exitOf describes how the process of ps ended.
func exitOf(ps *os.ProcessState) Exit {
	if ps == nil {
		return Exit{Code: -1}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return Exit{Code: 128 + int(ws.Signal()), Signal: ws.Signal()}
	}
	return Exit{Code: ps.ExitCode()}
}

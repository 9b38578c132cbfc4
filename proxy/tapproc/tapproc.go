// Package tapproc runs acptap's HTTP tap in a process of its own, which only forwards, and carries each exchange it sees to the process that records it.
//
// Forwarding and recording in one Go process share its scheduler, its
// collector and its caches: on 2 busy cores an SSE event's 99th
// percentile through a tap that recorded in its own process was 1.17×
// that of httputil.ReverseProxy in a process of its own, and 0.91× with
// the recording moved to another process (docs/benchmarks-history.md,
// "The tap in a process of its own"). The tap process
// forwards and keeps what it forwarded, as proxy.Tap does; the recording's
// process masks, encodes, compresses and commits.
package tapproc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acptap/acptap/proxy"

	"github.com/acptap/acptap/internal/stamp"
)

// Config configures a tap process. Path and Args are required.
type Config struct {
	// Path is the tap process's program and Args its argv, Args[0]
	// included: a program whose main calls Run when so started.
	Path string
	Args []string

	// Tap configures the tap as proxy.New takes it, split across the two
	// processes: its Secret, its Start and its CA (by the CA's
	// directory, which the tap process loads) go to the tap process;
	// Recorder, Redact and Logf stay in this process, which records.
	// Transport and UpstreamCAs are not used: the tap process dials
	// upstreams itself, trusting UpstreamCAs below. If Tap.CA is nil,
	// proxy.DefaultCADir()'s CA is used; if Tap.Secret is empty,
	// proxy.NewSecret()'s; if Tap.Start is zero, the time Start was
	// called. Tap.Recorder's Started and Ended get each exchange's Stamp,
	// taken from Clock as its request arrives, as its id (its Begin is
	// not called).
	Tap proxy.Config
	// UpstreamCAs are extra roots (PEM) trusted for upstream TLS, as
	// Tap.UpstreamCAs, which cannot cross to another process; nil for
	// none.
	UpstreamCAs []byte

	// Env is the agent's environment before the tap's variables, and
	// Routing how the agent reaches the tap (proxy.Tap.Wire).
	Env     []string
	Routing proxy.Routing

	// Clock stamps the exchanges. If nil, Start makes one. A
	// SharedClock serves one Start.
	Clock *SharedClock
}

// startTimeout bounds how long the tap process may take to start the
// tap; closeTimeout how long it may take to end once told to, its last
// exchanges sent, before it is killed.
const (
	startTimeout = 30 * time.Second
	closeTimeout = 10 * time.Second
)

// A Process is a running tap process.
type Process struct {
	// Env is the agent's environment.
	Env []string
	// Local is each route's local URL, by variable.
	Local map[string]string

	cfg    Config
	cmd    *exec.Cmd
	stdin  *os.File // the tap process's stdin: closing it closes the tap
	stderr *tail
	done   chan struct{} // closed once the process has ended and what it sent is read
	// closing is set by Close before it closes stdin: an end before that
	// was early.
	closing atomic.Bool
	endErr  error // how the process ended; set before done is closed

	closeOnce sync.Once
	closeErr  error

	waited bool // Start's failure has waited for the process already
}

// Start starts the tap process and waits for its tap to serve. A
// *StartError says why the tap could not start; other errors, why the
// process could not run.
func Start(cfg Config) (*Process, error) {
	if cfg.Path == "" || len(cfg.Args) == 0 {
		return nil, ErrNoCommand
	}
	if cfg.Tap.Logf == nil {
		cfg.Tap.Logf = func(string, ...any) {}
	}
	if cfg.Tap.Start.IsZero() {
		cfg.Tap.Start = time.Now()
	}
	if cfg.Clock == nil {
		var err error
		if cfg.Clock, err = NewSharedClock(); err != nil {
			return nil, err
		}
	}
	p, outR, err := spawn(cfg)
	if err != nil {
		return nil, err
	}
	out := bufio.NewReaderSize(outR, 64<<10)
	outR.SetReadDeadline(time.Now().Add(startTimeout))
	if err := p.handshake(out); err != nil {
		p.stdin.Close()
		if !p.waited {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
		outR.Close()
		return nil, err
	}
	outR.SetReadDeadline(time.Time{})
	go p.watch(out, outR)
	return p, nil
}

// spawn starts the tap process with its pipes and the clock's file, and
// returns it with our end of its stdout.
func spawn(cfg Config) (_ *Process, outR *os.File, err error) {
	var closeLater []*os.File // the pipes' ends the tap process has, and ours on failure
	defer func() {
		for _, f := range closeLater {
			f.Close()
		}
	}()
	pipe := func() (r, w *os.File) {
		if err == nil {
			if r, w, err = os.Pipe(); err == nil {
				closeLater = append(closeLater, r, w)
			}
		}
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	// The tap process has the clock's file as its fd 3; the mapping
	// here outlives it.
	closeLater = append(closeLater, cfg.Clock.file)
	if err != nil {
		return nil, nil, fmt.Errorf("starting the tap process: %w", err)
	}
	p := &Process{
		cfg:    cfg,
		stdin:  inW,
		stderr: &tail{},
		done:   make(chan struct{}),
	}
	p.cmd = &exec.Cmd{
		Path:        cfg.Path,
		Args:        cfg.Args,
		Stdin:       inR,
		Stdout:      outW,
		Stderr:      p.stderr,
		ExtraFiles:  []*os.File{cfg.Clock.file},
		SysProcAttr: sysProcAttr(),
	}
	if err := p.cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting the tap process: %w", err)
	}
	// The pipes' ends that are the tap process's are closed here at once,
	// so that its exit ends the pipes; ours are kept.
	for _, f := range []*os.File{inR, outW, cfg.Clock.file} {
		f.Close()
	}
	closeLater = nil
	return p, outR, nil
}

// handshake reads the tap process's hello, sends it its settings and
// reads whether its tap serves (ready, with the agent's environment and
// the routes' local URLs) or why not (failed).
func (p *Process) handshake(out *bufio.Reader) error {
	cfg := p.cfg
	hello, err := readMessage(out, uint32(len(helloMagic)))
	if err != nil || hello.kind != kindHello || string(hello.payload) != helloMagic {
		return p.notTap(err)
	}
	s := settings{
		Env:         cfg.Env,
		Routing:     cfg.Routing,
		UpstreamCAs: cfg.UpstreamCAs,
		Secret:      cfg.Tap.Secret,
		Start:       stamp.NanosOf(cfg.Tap.Start),
	}
	if cfg.Tap.CA != nil {
		s.CADir = filepath.Dir(cfg.Tap.CA.CertFile())
	}
	if s.Secret == "" {
		s.Secret = proxy.NewSecret()
	}
	payload, err := json.Marshal(s)
	if err == nil {
		_, err = p.stdin.Write(appendMessage(nil, message{kind: kindSettings, payload: payload}))
	}
	if err != nil {
		return fmt.Errorf("sending the tap process its settings: %w", err)
	}
	answer, err := readMessage(out, maxSettings)
	if err != nil {
		return p.notTap(err)
	}
	switch answer.kind {
	case kindReady:
		var r ready
		if err := json.Unmarshal(answer.payload, &r); err != nil {
			return p.notTap(err)
		}
		p.Env, p.Local = r.Env, r.Local
		return nil
	case kindFailed:
		var f failure
		if err := json.Unmarshal(answer.payload, &f); err != nil {
			return p.notTap(err)
		}
		return &StartError{Stage: f.Stage, Var: f.Var, Err: errors.New(f.Error)}
	default:
		return p.notTap(fmt.Errorf("message of kind %d before ready", answer.kind))
	}
}

// watch reads what the tap process sends until the pipe ends, which it
// does when the process does (or when what it sent cannot be read); then
// it waits for the process and says how it ended.
func (p *Process) watch(out *bufio.Reader, outR *os.File) {
	p.readMessages(out)
	outR.Close()
	err := p.cmd.Wait()
	switch {
	case !p.closing.Load():
		how := "it exited"
		if err != nil {
			how = err.Error()
		}
		p.endErr = fmt.Errorf("%w (%s)%s", ErrEnded, how, p.stderr.say())
		p.cfg.Tap.Logf("http tap: %v; the agent's HTTP requests through the tap fail from now on", p.endErr)
	case err != nil:
		p.endErr = fmt.Errorf("the tap process: %v%s", err, p.stderr.say())
	}
	close(p.done)
}

// notTap is Start's error when what the process said, or did not say,
// before ready was not the tap process's: err, with how the process ended
// and what it said on stderr if it has ended.
func (p *Process) notTap(err error) error {
	p.stdin.Close()
	p.waited = true
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case werr := <-exited:
		if werr == nil {
			werr = errors.New("exited")
		}
		return fmt.Errorf("%w (%s): %v%s", ErrNotTap, p.cfg.Path, werr, p.stderr.say())
	case <-time.After(time.Second):
		p.cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%w (%s): %v%s", ErrNotTap, p.cfg.Path, err, p.stderr.say())
	}
}

// readMessages records what the tap process sends until it ends.
func (p *Process) readMessages(r io.Reader) {
	for {
		m, err := readMessage(r, maxPayload)
		if err != nil {
			if err != io.EOF && !p.closing.Load() {
				p.cfg.Tap.Logf("http tap: reading from the tap process: %v", err)
				// What follows cannot be read in step: the process
				// must go, or it would wait on a full pipe.
				p.cmd.Process.Kill()
			}
			return
		}
		switch m.kind {
		case kindNotice:
			p.cfg.Tap.Logf("%s", m.payload)
		case kindStarted, kindEnded:
			p.record(m)
		default:
			p.cfg.Tap.Logf("http tap: a message of kind %d from the tap process, ignored", m.kind)
		}
	}
}

// record has the Recorder record the exchange of m.
func (p *Process) record(m message) {
	if p.cfg.Tap.Recorder == nil {
		return
	}
	x, err := decodeExchange(m.payload)
	if err != nil {
		p.cfg.Tap.Logf("http tap: not recording an exchange from the tap process: %v", err)
		return
	}
	if p.cfg.Tap.Redact != nil {
		p.cfg.Tap.Redact(x)
	}
	if m.kind == kindStarted {
		p.cfg.Tap.Recorder.Started(m.id, m.at, x)
	} else {
		p.cfg.Tap.Recorder.Ended(m.id, m.at, x)
	}
}

// Close closes the tap: the tap process ends the exchanges in flight,
// sends them and exits, and Close returns once they have been recorded.
// A tap process that does not end within closeTimeout is killed. The
// error says how the process ended if it ended early or failed. Calls
// after the first return the same.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		p.closing.Store(true)
		p.stdin.Close()
		select {
		case <-p.done:
		case <-time.After(closeTimeout):
			p.cmd.Process.Kill()
			<-p.done
			p.closeErr = fmt.Errorf("the tap process did not end within %v of being told to, and was killed", closeTimeout)
			return
		}
		p.closeErr = p.endErr
	})
	return p.closeErr
}

// tail keeps the end of what a process writes on stderr, for errors.
type tail struct {
	mu  sync.Mutex // guards buf
	buf []byte
}

// tailSize is how much of stderr a tail keeps.
const tailSize = 4 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

// say returns the last line written, as "; it said: LINE", or "" if none.
func (t *tail) say() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(bytes.ToValidUTF8(t.buf, []byte("?")))), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return ""
	}
	return "; it said: " + last
}

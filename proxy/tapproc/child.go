package tapproc

import (
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/proxy"

	"github.com/acptap/acptap/internal/stamp"
)

// settings are what the parent tells the tap process: the part of
// proxy.Config that can cross to another process, and the agent's
// environment and proxy.Routing for proxy.Tap.Wire.
type settings struct {
	// Env is the agent's environment before the tap's variables.
	Env []string `json:"env"`
	proxy.Routing
	// CADir holds the interception CA (proxy.LoadOrCreateCA); "" for
	// proxy.DefaultCADir().
	CADir string `json:"ca_dir"`
	// UpstreamCAs is PEM, or empty.
	UpstreamCAs []byte `json:"upstream_cas,omitempty"`
	Secret      string `json:"secret"`
	// Start is Config.Start as a reading of the system's monotonic clock
	// (stamp.NanosOf), which both processes share: the tap process counts
	// the exchanges' times from it.
	Start int64 `json:"start"`
}

// ready is the tap process's answer once the tap serves.
type ready struct {
	Env   []string          `json:"env"`   // the agent's environment
	Local map[string]string `json:"local"` // each route's local URL, by variable
}

// failure is the tap process's answer when the tap cannot start.
type failure struct {
	Stage Stage  `json:"stage"`
	Var   string `json:"var,omitempty"`
	Error string `json:"error"`
}

// maxSettings bounds the settings message: an environment and a few
// certificates.
const maxSettings = 64 << 20

// Run is the tap process's main, on the process's own stdin, stdout,
// stderr and fd 3 (see Main); it returns the exit code.
func Run() int {
	return Main(os.Stdin, os.Stdout, os.Stderr, os.NewFile(3, "acptap-clock"))
}

// Main runs the tap process: it answers hello on stdout, reads its
// settings from stdin, starts the tap and says ready (or why it could
// not), then serves, stamping each exchange from the SharedClock in file
// clock as its request arrives and sending it on stdout, until stdin
// ends; then it closes the tap, which ends the exchanges in flight and
// sends them, and returns. It returns 0 once it has served, 1 if the tap
// could not start, and 2 if what came on stdin was not settings or the
// clock could not be mapped. Its own errors go to stderr.
func Main(stdin io.Reader, stdout, stderr io.Writer, clock *os.File) int {
	stamps, err := openClock(clock)
	if err != nil {
		fmt.Fprintf(stderr, "tap process: %v\n", err)
		return 2
	}
	sh := &shipper{out: stdout, clock: stamps}
	if err := sh.send(message{kind: kindHello, payload: []byte(helloMagic)}); err != nil {
		fmt.Fprintf(stderr, "tap process: %v\n", err)
		return 2
	}
	m, err := readMessage(stdin, maxSettings)
	if err == nil && m.kind != kindSettings {
		err = fmt.Errorf("message of kind %d, not settings", m.kind)
	}
	var s settings
	if err == nil {
		err = json.Unmarshal(m.payload, &s)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tap process: reading its settings on stdin: %v\n", err)
		return 2
	}
	tap, r, fail := start(s, sh, stamp.FromNanos(s.Start))
	if fail != nil {
		payload, _ := json.Marshal(fail)
		sh.send(message{kind: kindFailed, payload: payload})
		return 1
	}
	payload, _ := json.Marshal(r)
	if err := sh.send(message{kind: kindReady, payload: payload}); err != nil {
		tap.Close()
		fmt.Fprintf(stderr, "tap process: %v\n", err)
		return 1
	}
	// Until the parent closes stdin, or dies.
	io.Copy(io.Discard, stdin)
	if err := tap.Close(); err != nil {
		sh.notice("%v", err)
	}
	return 0
}

// start starts the tap of s, recording into sh, with its times counted
// from start.
func start(s settings, sh *shipper, start time.Time) (*proxy.Tap, *ready, *failure) {
	fail := func(stage Stage, name string, err error) (*proxy.Tap, *ready, *failure) {
		return nil, nil, &failure{Stage: stage, Var: name, Error: err.Error()}
	}
	ca, err := proxy.LoadOrCreateCA(s.CADir)
	if err != nil {
		return fail(StageTap, "", fmt.Errorf("interception CA: %w", err))
	}
	cfg := proxy.Config{CA: ca, Recorder: sh, Start: start, Secret: s.Secret, Logf: sh.notice}
	if len(s.UpstreamCAs) > 0 {
		cfg.UpstreamCAs = x509.NewCertPool()
		if !cfg.UpstreamCAs.AppendCertsFromPEM(s.UpstreamCAs) {
			return fail(StageTap, "", errors.New("no PEM certificate among the upstream CAs"))
		}
	}
	tap, err := proxy.New(cfg)
	if err != nil {
		return fail(StageTap, "", err)
	}
	env, local, err := tap.Wire(s.Env, s.Routing)
	var re *proxy.RouteError
	switch {
	case errors.As(err, &re):
		tap.Close()
		return fail(StageRoute, re.Route.Var, re.Err)
	case err != nil:
		tap.Close()
		return fail(StageEnv, "", err)
	}
	return tap, &ready{Env: env, Local: local}, nil
}

// A shipper is the tap's Recorder in the tap process: it sends what the
// tap records to the parent, which records it.
type shipper struct {
	clock *stamp.Clock // the SharedClock's

	outMu sync.Mutex // guards out and buf
	out   io.Writer
	buf   []byte // the message being written
}

// Begin stamps an exchange as its request arrives, from the SharedClock:
// its Stamp is its id, which the parent reads its place and time from.
func (s *shipper) Begin() (uint64, time.Time) {
	st := s.clock.Exchange()
	return uint64(st), st.Time()
}

// Started sends the exchange in flight.
func (s *shipper) Started(id uint64, at time.Duration, x *exchange.Exchange) {
	s.exchange(kindStarted, id, at, x)
}

// Ended sends the exchange as it ended.
func (s *shipper) Ended(id uint64, at time.Duration, x *exchange.Exchange) {
	s.exchange(kindEnded, id, at, x)
}

// exchange sends x, encoded (appendExchange) straight into the buffer of
// the message that carries it.
func (s *shipper) exchange(k kind, id uint64, at time.Duration, x *exchange.Exchange) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.buf = appendMessage(s.buf[:0], message{kind: k, id: id, at: at})
	s.buf = appendExchange(s.buf, x)
	if n := len(s.buf) - headerSize; n > maxPayload {
		// More than the store keeps of one event: the parent could not
		// record it, and would take it for a broken pipe.
		// The URL without its query, which may hold a key.
		u, _, _ := strings.Cut(x.URL, "?")
		s.buf = appendMessage(nil, message{kind: kindNotice, payload: fmt.Appendf(nil,
			"http tap: not recording %s %s: the exchange takes %d bytes, more than %d", x.Method, u, n, maxPayload)})
	} else {
		binary.LittleEndian.PutUint32(s.buf[lengthAt:], uint32(n))
	}
	s.write()
}

// notice sends a notice for the parent's Logf.
func (s *shipper) notice(format string, args ...any) {
	s.send(message{kind: kindNotice, payload: fmt.Appendf(nil, format, args...)})
}

// send writes m to out.
func (s *shipper) send(m message) error {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.buf = appendMessage(s.buf[:0], m)
	return s.write()
}

// keepBuffer is the largest buffer kept from one message to the next: a
// conversation-sized exchange's is let go.
const keepBuffer = 1 << 20

// write writes the message in buf to out, in one write. s.outMu must be
// held.
func (s *shipper) write() error {
	_, err := s.out.Write(s.buf)
	if cap(s.buf) > keepBuffer {
		s.buf = nil
	}
	return err
}

// Package proxy is the loopback HTTP tap between an agent and its LLM: a forward proxy with TLS interception and base-URL reverse routes, streaming responses through unbuffered and recording each exchange.
//
// The agent reaches the tap in two ways (see Tap.Env): through
// HTTPS_PROXY/HTTP_PROXY, where CONNECT tunnels are intercepted with
// certificates of a local CA that the agent is made to trust, and through a
// base-URL variable rewritten to a loopback listener of the tap
// (Tap.AddBaseURL). Both end in the same handler, which forwards the request
// as it was sent and writes and flushes each piece of the response to the
// agent as soon as it arrives.
//
// Only the agent can use the tap: both ways carry a per-run secret
// (Config.Secret), the forward proxy's as Basic credentials in the proxy
// URL and a base-URL route's as the first segment of its path. Requests
// without it get 407 or 404 and are neither forwarded nor recorded.
//
// Each exchange is handed to the Recorder as an exchange.Exchange twice:
// in flight, once it has been for 10 ms, and again within 10 ms of its
// end, with its exchange.End saying how; an exchange that ends sooner is
// handed over once, ended. Recording waits so as not to compete with
// forwarding for the CPU, and so that the ends of exchanges that end close
// together are recorded together. Bodies are recorded decoded; a body that
// cannot be decoded is recorded as received, with its encoding field left
// empty (its Content-Encoding header still says how it was sent).
//
// The tap's notices (Config.Logf) name the tap, not the program: the
// program that runs the tap says who is speaking.
//
// # Configuration
//
// A tap is configured in two parts, each in one place: Config, how the
// tap itself runs (its CA, its secret, its recorder), and Routing, how an
// agent reaches it (its base-URL Routes, and whether its environment names
// the forward proxy). Tap.Wire applies a Routing and returns the agent's
// environment; record, the tap process (proxy/tapproc, whose settings are
// the part of Config that can cross to another process, and a Routing)
// and replay all start a tap that way. ParseUpstream is the one parser of
// a route's upstream, which record also uses to refuse a bad one before
// anything starts.
package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/redact"
)

// Recorder receives the exchanges the tap sees, as they happen. Its
// methods are called concurrently and must not block: Begin is called on
// the forwarding path, the others off it, but a slow Recorder holds up
// Close, which waits for them.
//
// Every exchange gets a call of Begin as its request arrives and one of
// Ended within 10 ms of its end, with those of the exchanges that ended
// meanwhile; in between, one of Started if it is still in flight 10 ms
// after its request arrived. What Started records is what a recording
// keeps of the exchange if the program stops before Ended: the request, in
// flight. An exchange that ends sooner has no Started: Ended records it
// whole, in place of nothing.
type Recorder interface {
	// Begin returns the id by which Started and Ended name a new
	// exchange. It is called as the request arrives, so that a Recorder
	// ordering exchanges and other events in one sequence places the
	// exchange where its request came. If at is not zero, it is the time
	// of that place, at or just after the request's arrival: the tap
	// counts the exchange's times (Started's and Ended's at, its time to
	// first byte, its chunks' times, its duration) from it rather than
	// from its own reading, so that they agree with the Recorder's order.
	Begin() (id uint64, at time.Time)
	// Started records exchange id, whose request arrived at (since
	// Config.Start): x holds the request, with End exchange.EndInFlight.
	// x is redacted, and the Recorder's to keep.
	Started(id uint64, at time.Duration, x *exchange.Exchange)
	// Ended records exchange id as it ended, in place of what Started
	// recorded, if it was called: x is the whole exchange, its End
	// anything but exchange.EndInFlight. at is when its request arrived,
	// Started's. x is redacted, and the Recorder's to keep.
	Ended(id uint64, at time.Duration, x *exchange.Exchange)
}

// KnownBaseURLs are the default upstreams of well-known base-URL variables,
// for `--base-url VAR` without =UPSTREAM when VAR is not set.
var KnownBaseURLs = map[string]string{
	"OPENAI_BASE_URL":        "https://api.openai.com/v1", // OpenAI SDKs, Codex
	"OPENAI_API_BASE":        "https://api.openai.com/v1", // older OpenAI clients, LiteLLM
	"OPENAI_HOST":            "https://api.openai.com",    // Goose
	"ANTHROPIC_BASE_URL":     "https://api.anthropic.com", // Anthropic SDKs, Claude Code
	"ANTHROPIC_HOST":         "https://api.anthropic.com", // Goose
	"GOOGLE_GEMINI_BASE_URL": "https://generativelanguage.googleapis.com",
	"GROQ_BASE_URL":          "https://api.groq.com",
	"OLLAMA_HOST":            "http://127.0.0.1:11434",
}

// Config configures a Tap. The zero value works.
type Config struct {
	// Transport sends requests upstream. If nil, an http.Transport is used
	// that trusts the system roots plus UpstreamCAs, speaks HTTP/2 where
	// the upstream offers it, uses no proxy from the environment, and
	// leaves bodies encoded so that the agent gets the upstream's bytes.
	// A Transport that decompresses transparently hands the agent the
	// decompressed body instead. Each request's context says by which
	// route it came (exchange.RouteFromContext).
	Transport http.RoundTripper

	// UpstreamCAs are roots trusted for upstream TLS besides the system
	// ones, by the default Transport only. If nil, only the system roots.
	UpstreamCAs *x509.CertPool

	// CA signs the certificates of intercepted TLS connections. If nil,
	// LoadOrCreateCA("") is used: the CA of DefaultCADir.
	CA *CA

	// Recorder receives the exchanges. If nil, nothing is recorded.
	Recorder Recorder

	// Redact is applied to every exchange before it reaches Recorder, and
	// may change it in place. If nil, exchanges are recorded as they are.
	Redact func(*exchange.Exchange)

	// Start is the time from which the times given to Recorder count. If
	// zero, the time New was called.
	Start time.Time

	// Secret is the per-run credential that only the agent is given: the
	// forward proxy's URL carries it as the password of its user info
	// (requests without it get 407) and each base-URL route's URL as its
	// first path segment (requests outside it get 404), so that no other
	// local process, or web page, can use the tap. It must be base64url
	// and at least 22 characters (128 bits); recorded URLs never hold it.
	// If empty, New makes one with NewSecret. A caller sets it to know it
	// beforehand, to mask it wherever the agent might echo it.
	Secret string

	// Logf receives the tap's own one-line notices: failed exchanges,
	// bodies recorded undecoded, TLS handshakes the agent refused, the
	// first request a listener refused for want of the secret. They
	// start "http tap: " and do not name the program, which the caller
	// may add. It is not called after Close returns: notices of
	// connections still closing then are dropped. If nil, they are
	// discarded.
	Logf func(format string, args ...any)
}

// Tap is a running HTTP tap. Its methods are safe for concurrent use.
type Tap struct {
	transport http.RoundTripper
	ca        *CA
	recorder  Recorder // nil for none
	redact    func(*exchange.Exchange)
	start     time.Time
	notes     *notices
	logf      func(format string, args ...any) // notes.printf
	errorLog  *log.Logger                      // logf as a log.Logger, for net/http and goproxy
	secret    string                           // Config.Secret

	proxyURL   string        // with the credentials
	proxyGuard guard         // of the forward proxy
	forward    *http.Server  // the forward proxy
	goproxy    http.Handler  // CONNECT dispatch and non-proxy requests of the forward proxy
	tunnels    *http.Server  // serves intercepted CONNECT tunnels
	tunnelLn   *connListener // hands tunnels to the tunnels server

	ctx    context.Context // cancelled by Close, with ErrClosed; upstream requests end with it
	cancel context.CancelCauseFunc

	// active counts handlers and recording goroutines, which Close waits
	// for. Add is called under mu while !closed, or by an active one.
	active sync.WaitGroup

	mu      sync.Mutex            // guards the fields below
	closed  bool                  // Close was called
	routes  map[string]*route     // base-URL and MCP routes by listener address
	servers []*http.Server        // their servers
	pending map[net.Conn]struct{} // CONNECT tunnels not yet handed to tunnels
	tempDir string                // files written by Env; "" until then

	ends endQueue // the recordings of ended exchanges, waiting for endDelay

	closeOnce sync.Once
	closeErr  error
}

// route is a base-URL route, or an MCP server's: a loopback listener
// reverse-proxying to one upstream.
type route struct {
	t         *Tap
	varName   string // a base-URL route's
	mcpServer int    // an MCP server's number (AddMCP); 0 for a base-URL route
	upstream  *url.URL
	localURL  string // with the secret
	guard     guard
}

// New starts a tap listening on 127.0.0.1 for the forward proxy.
func New(cfg Config) (*Tap, error) {
	start := cfg.Start
	if start.IsZero() {
		start = time.Now()
	}
	secret := cfg.Secret
	if secret == "" {
		secret = NewSecret()
	} else if err := checkSecret(secret); err != nil {
		return nil, fmt.Errorf("starting the HTTP tap: %w", err)
	}
	ca := cfg.CA
	if ca == nil {
		var err error
		if ca, err = LoadOrCreateCA(""); err != nil {
			return nil, fmt.Errorf("starting the HTTP tap: %w", err)
		}
	}
	transport := cfg.Transport
	if transport == nil {
		transport = newTransport(cfg.UpstreamCAs)
	}
	notes := &notices{logf: cfg.Logf}
	if notes.logf == nil {
		notes.logf = func(string, ...any) {}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting the HTTP tap: %w", err)
	}
	t := &Tap{
		transport: transport,
		ca:        ca,
		recorder:  cfg.Recorder,
		redact:    cfg.Redact,
		start:     start,
		notes:     notes,
		logf:      notes.printf,
		errorLog:  log.New(logWriter(notes.printf), "", 0),
		secret:    secret,
		proxyURL:  "http://" + proxyUser + ":" + secret + "@" + ln.Addr().String(),
		tunnelLn:  newConnListener(ln.Addr()),
		routes:    make(map[string]*route),
		pending:   make(map[net.Conn]struct{}),
	}
	t.proxyGuard = guard{t: t, where: "forward proxy"}
	t.ctx, t.cancel = context.WithCancelCause(context.Background())
	t.goproxy = t.newGoproxy()
	t.forward = &http.Server{
		Handler:           http.HandlerFunc(t.serveForward),
		ErrorLog:          t.errorLog,
		ReadHeaderTimeout: readHeaderTimeout,
	}
	t.tunnels = &http.Server{
		Handler:           http.HandlerFunc(t.serveTunnel),
		ConnContext:       tunnelContext,
		ErrorLog:          t.errorLog,
		ReadHeaderTimeout: readHeaderTimeout,
	}
	go t.forward.Serve(ln)
	go t.tunnels.Serve(t.tunnelLn)
	return t, nil
}

// readHeaderTimeout bounds the reading of a request's header, which a
// client sends at once; it does not limit idle connections or bodies.
const readHeaderTimeout = time.Minute

// newTransport returns the default Transport: with extra roots, one that
// verifies upstreams against them, and a second, speaking only
// HTTP/1.1, for WebSocket upgrades, which an HTTP/2 connection that the
// first's own TLS dial offers cannot carry.
func newTransport(extraRoots *x509.CertPool) http.RoundTripper {
	tr := newHTTPTransport(extraRoots, []string{"h2", "http/1.1"})
	if extraRoots == nil {
		// net/http dials HTTP/1.1 alone for an upgrade itself.
		return tr
	}
	return &splitTransport{http: tr, upgrades: newHTTPTransport(extraRoots, []string{"http/1.1"})}
}

// splitTransport sends upgrades by a transport of their own.
type splitTransport struct{ http, upgrades *http.Transport }

func (s *splitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if isUpgrade(r.Header) {
		return s.upgrades.RoundTrip(r)
	}
	return s.http.RoundTrip(r)
}

// newHTTPTransport returns an http.Transport that trusts extraRoots
// besides the system's, offering protos in its own TLS dials.
func newHTTPTransport(extraRoots *x509.CertPool, protos []string) *http.Transport {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext:           dialer.DialContext,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   64, // agents run several streams to one host at once
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   tlsHandshakeTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	if extraRoots != nil {
		tr.DialTLSContext = dialTLS(dialer, extraRoots, protos)
	}
	return tr
}

// tlsHandshakeTimeout bounds a TLS handshake with an upstream.
const tlsHandshakeTimeout = 10 * time.Second

// dialTLS returns a DialTLSContext that verifies the upstream's
// certificate against the system roots or else extra. A CertPool cannot be
// merged into the system's, so the chain is verified here, as crypto/tls
// does, once against each; the dial address gives the name to verify,
// which the ConnectionState lacks for an IP address.
func dialTLS(dialer *net.Dialer, extra *x509.CertPool, protos []string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		raw, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conn := tls.Client(raw, &tls.Config{
			ServerName:         host,
			NextProtos:         protos,
			MinVersion:         tls.VersionTLS12,
			InsecureSkipVerify: true, // verified by VerifyConnection
			VerifyConnection: func(cs tls.ConnectionState) error {
				return verifyChain(cs.PeerCertificates, host, extra)
			},
		})
		hctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
		defer cancel()
		if err := conn.HandshakeContext(hctx); err != nil {
			raw.Close()
			return nil, err
		}
		return conn, nil
	}
}

// verifyChain verifies a server's certificate chain for host against the
// system roots, or else extra.
func verifyChain(certs []*x509.Certificate, host string, extra *x509.CertPool) error {
	if len(certs) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	opts := x509.VerifyOptions{DNSName: host, Intermediates: x509.NewCertPool()}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := certs[0].Verify(opts) // nil Roots: the system's
	if err == nil {
		return nil
	}
	opts.Roots = extra
	_, err2 := certs[0].Verify(opts)
	if err2 == nil {
		return nil
	}
	if errors.As(err, new(x509.UnknownAuthorityError)) {
		// Unknown to the system: what the extra roots say is the news,
		// such as a chain they accept for another host.
		err = err2
	}
	return &tls.CertificateVerificationError{UnverifiedCertificates: certs, Err: err}
}

// notices passes the tap's notices to Config.Logf until the tap is
// closed. net/http logs from connection goroutines that Server.Close does
// not wait for, such as a TLS handshake failing on a closed connection;
// a caller's Logf, a test's t.Logf say, must not be called once Close
// has returned.
type notices struct {
	mu     sync.Mutex // guards closed, and is held across each call of logf
	closed bool
	logf   func(format string, args ...any)
}

// printf passes a notice to logf unless the tap is closed.
func (n *notices) printf(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.closed {
		n.logf(format, args...)
	}
}

// close drops every later notice, once any call of logf under way has
// returned.
func (n *notices) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
}

// logWriter adapts Logf to the io.Writer under a log.Logger.
type logWriter func(format string, args ...any)

func (f logWriter) Write(p []byte) (int, error) {
	f("http tap: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// ProxyURL returns the forward proxy's URL with its credentials,
// http://acptap:SECRET@127.0.0.1:PORT: clients that take a proxy URL send
// them in Proxy-Authorization, on CONNECT and plain requests alike.
func (t *Tap) ProxyURL() string { return t.proxyURL }

// AddBaseURL starts a loopback listener that reverse-proxies to upstream
// and returns its URL: upstream's path on the listener's address, under
// the secret (https://api.openai.com/v1 gives
// http://127.0.0.1:PORT/SECRET/v1). Requests outside /SECRET get 404; the
// others are forwarded, and recorded, with /SECRET cut off and the rest of
// their path unchanged, so clients that append to the base URL and
// clients that resolve against it reach what they would reach upstream.
// varName is the variable the URL is meant for; it is recorded with each
// exchange and set by Env. An upstream without a scheme, as OLLAMA_HOST
// allows, is taken as http.
func (t *Tap) AddBaseURL(varName, upstream string) (localURL string, err error) {
	if varName == "" || strings.ContainsAny(varName, "=\x00") {
		return "", fmt.Errorf("adding base URL route: invalid variable name %q", varName)
	}
	u, err := ParseUpstream(upstream)
	if err != nil {
		return "", fmt.Errorf("adding base URL route for %s: %w", varName, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("adding base URL route for %s: %w", varName, err)
	}
	addr := ln.Addr().String()
	rt := &route{t: t, varName: varName, upstream: u, localURL: "http://" + addr + "/" + t.secret + u.EscapedPath()}
	rt.guard = guard{t: t, where: varName + " route"}
	srv := &http.Server{Handler: rt, ErrorLog: t.errorLog, ReadHeaderTimeout: readHeaderTimeout}

	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		ln.Close()
		return "", fmt.Errorf("adding base URL route for %s: %w", varName, ErrClosed)
	}
	t.routes[addr] = rt
	t.servers = append(t.servers, srv)
	t.mu.Unlock()
	go srv.Serve(ln)
	return rt.localURL, nil
}

// ParseUpstream parses a base-URL upstream as AddBaseURL takes it: an
// http or https URL with a host, and neither credentials (they would end
// up in the recording) nor a query or fragment (the route would drop
// them); one without a scheme, as OLLAMA_HOST allows, is taken as http.
// It is the one parser of upstreams, for record to refuse one before
// anything starts and for the tap. Its errors wrap ErrInvalidUpstream and
// quote the upstream with its credentials masked.
func ParseUpstream(s string) (*url.URL, error) {
	raw := s
	if !strings.Contains(s, "://") {
		raw = "http://" + s
	}
	quoted := redact.New(nil).Text(s)
	u, err := url.Parse(raw)
	if err != nil {
		// url's errors quote the URL whole; what is wrong with it is
		// their Err.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w %q: %s", ErrInvalidUpstream, quoted, redact.New(nil).Text(err.Error()))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w %q: scheme is not http or https", ErrInvalidUpstream, quoted)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%w %q: no host", ErrInvalidUpstream, quoted)
	case u.User != nil:
		return nil, fmt.Errorf("%w %q: credentials in the URL", ErrInvalidUpstream, quoted)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("%w %q: a query or fragment", ErrInvalidUpstream, quoted)
	}
	return u, nil
}

// ServeHTTP forwards a request of the route to its upstream, at its path
// without the secret; one outside the secret gets 404.
func (rt *route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path, ok := stripSecret(r.URL.Path, rt.t.secret)
	if !ok {
		rt.guard.refused(r.Method + " of a path outside the route's secret prefix")
		http.Error(w, "acptap: not found", http.StatusNotFound)
		return
	}
	// The escaped form keeps the client's escapes after the secret; a
	// client that escaped a character of the secret itself has its path
	// escaped anew.
	rawPath, _ := stripSecret(r.URL.RawPath, rt.t.secret)
	u := &url.URL{
		Scheme:   rt.upstream.Scheme,
		Host:     rt.upstream.Host,
		Path:     path,
		RawPath:  rawPath,
		RawQuery: r.URL.RawQuery,
	}
	tg := target{url: u, route: exchange.RouteBaseURL, varName: rt.varName}
	if rt.mcpServer > 0 {
		tg = target{url: u, route: exchange.RouteMCP, mcp: rt}
	}
	rt.t.serveExchange(w, r, tg)
}

// ownRoute returns the route listening at u's address, if any.
func (t *Tap) ownRoute(u *url.URL) *route {
	if u.Scheme != "http" {
		return nil
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.Equal(net.IPv4(127, 0, 0, 1))) {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.routes[net.JoinHostPort("127.0.0.1", port)]
}

// begin registers an exchange or a tunnel with Close; it returns false once
// the tap is closed.
func (t *Tap) begin() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.active.Add(1)
	return true
}

// Close stops the tap: it closes its listeners and connections, ends the
// exchanges in flight, which are recorded with an error, waits for their
// recording to reach the Recorder, and removes the files written by Env.
// Calls after the first return the same.
func (t *Tap) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		servers := t.servers
		pending := t.pending
		t.pending = nil
		dir := t.tempDir
		t.mu.Unlock()

		t.cancel(ErrClosed)
		errs := []error{t.forward.Close(), t.tunnels.Close()}
		for _, s := range servers {
			errs = append(errs, s.Close())
		}
		for c := range pending {
			c.Close()
		}
		t.active.Wait()
		if dir != "" {
			errs = append(errs, os.RemoveAll(dir))
		}
		t.notes.close()
		if err := errors.Join(errs...); err != nil {
			t.closeErr = fmt.Errorf("closing the HTTP tap: %w", err)
		}
	})
	return t.closeErr
}

// goproxyLogger routes goproxy's warnings to the tap's log.
type goproxyLogger struct{ l *log.Logger }

func (g goproxyLogger) Printf(format string, v ...any) { g.l.Printf(format, v...) }

// newGoproxy returns the goproxy handler of the forward proxy, which
// dispatches CONNECT requests to the tap's tunnels.
func (t *Tap) newGoproxy() http.Handler {
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = goproxyLogger{t.errorLog}
	gp.NonproxyHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "acptap: this is an HTTP proxy: send absolute-URI requests or CONNECT", http.StatusBadRequest)
	})
	gp.OnRequest().HandleConnectFunc(func(host string, _ *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: t.hijackTunnel}, host
	})
	return gp
}

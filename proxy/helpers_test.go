package proxy_test

import (
	"bufio"
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/testing/testagent"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/proxy"
)

// agentEnv, set to 1, makes the test binary run the test agent instead of
// the tests, so that tests can run the agent as a real child process.
const agentEnv = "PROXY_TEST_RUN_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(agentEnv) == "1" {
		os.Exit(testagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	if os.Getenv(intruderEnv) == "1" {
		os.Exit(testkit.Intruder(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// hangGuard bounds every wait of the tests. It is not a timing assertion:
// the tests wait for events that must happen, and fail instead of hanging
// when they don't.
const hangGuard = 20 * time.Second

// call is a call of a Recorder's Started or Ended.
type call struct {
	ID    uint64
	At    time.Duration
	Ended bool   // a call of Ended, not Started
	Data  []byte // the exchange, as exchange.Marshal encodes it for a recording
}

// fakeRecorder keeps the recorded exchanges in memory, and what the tap
// did against the Recorder's contract.
type fakeRecorder struct {
	mu       sync.Mutex     // guards the fields below
	id       uint64         // the last id handed out
	calls    []call         // in the order of the calls
	state    map[uint64]int // by id: 1 begun, 2 started, 3 ended
	problems []string       // calls that break the contract
	changed  chan struct{}  // closed and replaced on each call
}

func newFakeRecorder() *fakeRecorder {
	return &fakeRecorder{state: map[uint64]int{}, changed: make(chan struct{})}
}

func (r *fakeRecorder) Begin() (uint64, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.id++
	r.state[r.id] = 1
	return r.id, time.Time{}
}

func (r *fakeRecorder) Started(id uint64, at time.Duration, x *exchange.Exchange) {
	r.record(id, at, x, false)
}

func (r *fakeRecorder) Ended(id uint64, at time.Duration, x *exchange.Exchange) {
	r.record(id, at, x, true)
}

func (r *fakeRecorder) record(id uint64, at time.Duration, x *exchange.Exchange, ended bool) {
	data, err := exchange.Marshal(x)
	r.mu.Lock()
	defer r.mu.Unlock()
	// Started comes after Begin; Ended after Begin or Started, and last.
	method, want, next := "Started", r.state[id] == 1, 2
	if ended {
		method, want, next = "Ended", r.state[id] == 1 || r.state[id] == 2, 3
	}
	switch {
	case err != nil:
		r.problems = append(r.problems, fmt.Sprintf("%s(%d): %v", method, id, err))
	case !want:
		r.problems = append(r.problems, fmt.Sprintf("%s(%d) in state %d", method, id, r.state[id]))
	case ended == (x.End == exchange.EndInFlight):
		r.problems = append(r.problems, fmt.Sprintf("%s(%d) of an exchange with end %v", method, id, x.End))
	}
	r.state[id] = next
	r.calls = append(r.calls, call{ID: id, At: at, Ended: ended, Data: data})
	close(r.changed)
	r.changed = make(chan struct{})
}

// all returns the calls so far.
func (r *fakeRecorder) all() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// waitFor waits until cond holds for the calls so far.
func (r *fakeRecorder) waitFor(t *testing.T, what string, cond func([]call) bool) []call {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		r.mu.Lock()
		calls, changed := slices.Clone(r.calls), r.changed
		r.mu.Unlock()
		if cond(calls) {
			return calls
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("gave up waiting for %s; recorded %d calls", what, len(calls))
		}
	}
}

// finished waits until n exchanges have ended and returns them in the
// order of their ids, checking that the tap kept the Recorder's contract.
func (r *fakeRecorder) finished(t *testing.T, n int) []*exchange.Exchange {
	t.Helper()
	calls := r.waitFor(t, fmt.Sprintf("%d finished exchanges", n), func(calls []call) bool {
		return len(endedCalls(calls)) >= n
	})
	r.mu.Lock()
	problems := slices.Clone(r.problems)
	r.mu.Unlock()
	for _, p := range problems {
		t.Errorf("the tap broke the Recorder's contract: %s", p)
	}
	finals := endedCalls(calls)
	if len(finals) != n {
		t.Fatalf("got %d finished exchanges, want %d", len(finals), n)
	}
	var out []*exchange.Exchange
	for _, c := range finals {
		checkCall(t, c)
		if first := calls[slices.IndexFunc(calls, func(x call) bool { return x.ID == c.ID })]; first.At != c.At {
			t.Errorf("first call for exchange %d at %v; want it at %v, as Ended", c.ID, first.At, c.At)
		}
		out = append(out, decode(t, c))
	}
	return out
}

// endedCalls returns the calls of Ended, in id order.
func endedCalls(calls []call) []call {
	var out []call
	for _, c := range calls {
		if c.Ended {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b call) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// decode decodes the exchange of a call.
func decode(t *testing.T, c call) *exchange.Exchange {
	t.Helper()
	x, err := exchange.Unmarshal(c.Data)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func checkCall(t *testing.T, c call) {
	t.Helper()
	if c.At < 0 {
		t.Errorf("exchange %d is at %v, want >= 0", c.ID, c.At)
	}
}

// testCA is a CA for the tests' upstream TLS servers, independent of the
// code under test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "upstream test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// serverCert returns a certificate for 127.0.0.1 and localhost, or for
// the DNS names given.
func (ca *testCA) serverCert(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if len(names) > 0 {
		tmpl.DNSNames, tmpl.IPAddresses = names, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startTLS starts h as a TLS server with a certificate of ca, offering
// HTTP/2 if h2.
func (ca *testCA) startTLS(t testing.TB, h http.Handler, h2 bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = h2
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.serverCert(t)}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// newCA returns a tap CA in a fresh directory.
func newCA(t testing.TB) *proxy.CA {
	t.Helper()
	ca, err := proxy.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// caPool returns a pool with the tap CA's certificate.
func caPool(t testing.TB, ca *proxy.CA) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(ca.CertFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s: no certificate", ca.CertFile())
	}
	return pool
}

// newTap starts a tap with cfg, filling in a fresh CA and the test's log;
// it is closed when the test ends.
func newTap(t testing.TB, cfg proxy.Config) *proxy.Tap {
	t.Helper()
	if cfg.CA == nil {
		cfg.CA = newCA(t)
	}
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	tap, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tap.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tap
}

// route says how a test client reaches an upstream through the tap.
type route struct {
	name     string
	tls      bool   // the upstream speaks TLS
	recorded string // the exchange.Route recorded
	// via returns a client and the URL to request for the upstream at
	// base (scheme://host:port), path appended.
	via func(t testing.TB, tap *proxy.Tap, ca *proxy.CA, base, path string) (*http.Client, string)
}

// routes are the ways through the tap that the tests try.
var routes = []route{
	{name: "proxy-https", tls: true, recorded: exchange.RouteProxy, via: viaProxy(false)},
	{name: "proxy-https-h2", tls: true, recorded: exchange.RouteProxy, via: viaProxy(true)},
	{name: "proxy-http", tls: false, recorded: exchange.RouteProxy, via: viaProxy(false)},
	{name: "base-url-https", tls: true, recorded: exchange.RouteBaseURL, via: viaBaseURL},
	{name: "base-url-http", tls: false, recorded: exchange.RouteBaseURL, via: viaBaseURL},
}

// viaProxy reaches the upstream through the forward proxy, speaking HTTP/2
// in intercepted tunnels if h2.
func viaProxy(h2 bool) func(t testing.TB, tap *proxy.Tap, ca *proxy.CA, base, path string) (*http.Client, string) {
	return func(t testing.TB, tap *proxy.Tap, ca *proxy.CA, base, path string) (*http.Client, string) {
		pu, err := url.Parse(tap.ProxyURL())
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{
			// Unlike ProxyFromEnvironment, ProxyURL proxies loopback
			// targets too.
			Proxy:              http.ProxyURL(pu),
			TLSClientConfig:    &tls.Config{RootCAs: caPool(t, ca)},
			ForceAttemptHTTP2:  h2,
			DisableCompression: true,
		}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}, base + path
	}
}

// viaBaseURL reaches the upstream through a base-URL route.
func viaBaseURL(t testing.TB, tap *proxy.Tap, _ *proxy.CA, base, path string) (*http.Client, string) {
	local, err := tap.AddBaseURL("TEST_BASE_URL", base+"/v1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(local, "/v1") {
		t.Fatalf("AddBaseURL(%q) = %q, want a URL ending in /v1", base+"/v1", local)
	}
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, strings.TrimSuffix(local, "/v1") + path
}

// setup starts an upstream serving h (TLS if rt.tls, with HTTP/2 if h2)
// and a tap recording into a fakeRecorder, and returns a client and URL
// for path through rt.
type setupResult struct {
	tap      *proxy.Tap
	rec      *fakeRecorder
	client   *http.Client
	url      string // the URL the client requests
	upstream string // the URL the exchange records
}

func setup(t testing.TB, rt route, h http.Handler, path string, cfg proxy.Config) *setupResult {
	t.Helper()
	var srv *httptest.Server
	if rt.tls {
		upCA := newTestCA(t)
		srv = upCA.startTLS(t, h, false)
		cfg.UpstreamCAs = upCA.pool
	} else {
		srv = httptest.NewServer(h)
		t.Cleanup(srv.Close)
	}
	res := &setupResult{upstream: srv.URL + path}
	if cfg.Recorder == nil {
		res.rec = newFakeRecorder()
		cfg.Recorder = res.rec
	}
	if cfg.CA == nil {
		cfg.CA = newCA(t)
	}
	res.tap = newTap(t, cfg)
	res.client, res.url = rt.via(t, res.tap, cfg.CA, srv.URL, path)
	return res
}

// ackStream is an upstream's view of a client acknowledging what it has
// received: the upstream waits for the acknowledgement of each piece
// before it sends the next, which proves that the tap forwarded the piece
// on its own.
type ackStream struct {
	mu    sync.Mutex // guards got
	got   int        // bytes the client has received
	moved chan struct{}
}

func newAckStream() *ackStream { return &ackStream{moved: make(chan struct{}, 1)} }

// received is called by the client with the bytes received so far.
func (a *ackStream) received(n int) {
	a.mu.Lock()
	a.got = n
	a.mu.Unlock()
	select {
	case a.moved <- struct{}{}:
	default:
	}
}

// count returns the bytes the client has received.
func (a *ackStream) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got
}

// waitReceived waits until the client has received n bytes; it returns
// false after hangGuard or when ctx ends.
func (a *ackStream) waitReceived(ctx context.Context, n int) bool {
	deadline := time.After(hangGuard)
	for {
		if a.count() >= n {
			return true
		}
		select {
		case <-a.moved:
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// readAcking reads body to the end, calling ack with the bytes received so
// far after every read.
func readAcking(body io.Reader, ack func(int)) ([]byte, error) {
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := body.Read(buf)
		got = append(got, buf[:n]...)
		if n > 0 {
			ack(len(got))
		}
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
	}
}

// rawConnect opens a CONNECT tunnel to target through the tap's forward
// proxy.
func rawConnect(t testing.TB, tap *proxy.Tap, target string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, connect := dialProxy(t, tap, target)
	conn.Write(connect)
	br := bufio.NewReader(conn)
	if err := readConnectResponse(br); err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return conn, br
}

// dialProxy connects to the tap's forward proxy, with hangGuard as the
// connection's deadline, and returns the connection and a CONNECT request
// to target with the proxy's credentials, unsent.
func dialProxy(t testing.TB, tap *proxy.Tap, target string) (net.Conn, []byte) {
	t.Helper()
	pu, err := url.Parse(tap.ProxyURL())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(hangGuard))
	pw, _ := pu.User.Password()
	connect := fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, testkit.BasicAuth(pu.User.Username(), pw))
	return conn, []byte(connect)
}

// readConnectResponse reads the response to a CONNECT request, which must
// be a 200.
func readConnectResponse(br *bufio.Reader) error {
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return fmt.Errorf("reading the CONNECT response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("CONNECT: %s, want 200", resp.Status)
	}
	return nil
}

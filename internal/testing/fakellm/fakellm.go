// Package fakellm is acptap's scripted LLM server: what every wire format's fake shares (the request each records, the log of them, the signal that ends stalled streams, the scripted answers, loopback endpoints plain or TLS with a CA file for the client), with one package per wire format beside it (fakeanthropic, fakegemini, fakeresponses) and one command for all of them (cmd/fakellm).
package fakellm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"slices"
	"strings"
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

// Request is what a fake records of each request it gets; a wire
// format's fake adds what it reads of its own requests.
type Request struct {
	Method, Path string
	Header       http.Header
	// Encoding is the request's Content-Encoding, if the fake decodes
	// bodies; Body is decoded from it.
	Encoding string
	Body     []byte
	// Step is what the script answered ("text", "shell", "tool-answer",
	// "slow", and the format's own), or "error" for a request it refused.
	Step string
	// Tools are the names of the tools the request offered.
	Tools []string
}

// Line is the request in one line, as the fakellm command prints it.
func (r Request) Line() string {
	return fmt.Sprintf("%s %s encoding=%q step=%s tools=%s", r.Method, r.Path, r.Encoding, r.Step, strings.Join(r.Tools, ","))
}

// Answer is the text answer a fake gives a prompt.
func Answer(prompt string) string {
	return fmt.Sprintf("Hello from the fake model. You said: %q.", strings.TrimSpace(prompt))
}

// ToolAnswer is a fake's answer to the output of a tool call that was to
// print want.
func ToolAnswer(output, want string) string {
	if strings.Contains(output, want) {
		return "The command printed: " + want
	}
	line, _, _ := strings.Cut(strings.TrimSpace(output), "\n")
	return "The command did not print what I expected: " + line
}

// SlowAnswer is the text a "slowly" answer streams before it stalls, one
// word per event.
const SlowAnswer = "Thinking about it"

// Endpoint is where a fake serves: its httptest server, the base URL to
// give the agent, and for TLS the CA file the client is to trust.
type Endpoint struct {
	HTTP *httptest.Server
	// URL is the base URL to give the agent: the server's URL and the
	// path the format's clients expect in it (/v1 for OpenAI's).
	URL string
	// CAFile is, for a TLS endpoint, a PEM file of the certificate that
	// signs the server's, for the client's trust (--upstream-ca,
	// NODE_EXTRA_CA_CERTS); empty for plain HTTP.
	CAFile string
}

// At returns e: a fake of any format embeds its Endpoint, and says where
// it serves by this method.
func (e Endpoint) At() Endpoint { return e }

// Serve serves h over plain HTTP on a loopback port, its base URL the
// server's and path.
func Serve(h http.Handler, path string) Endpoint {
	srv := httptest.NewServer(h)
	return Endpoint{HTTP: srv, URL: srv.URL + path}
}

// ServeTLS serves h over HTTPS on a loopback port, with httptest's
// certificate (valid for 127.0.0.1, ::1 and example.com, not localhost),
// and writes the certificate to a PEM file in dir, named after name, for
// the client's trust (acptap record --upstream-ca).
func ServeTLS(h http.Handler, path, dir, name string) (Endpoint, error) {
	srv := httptest.NewUnstartedServer(h)
	// Clients that do not trust the certificate are the client's
	// problem, not noise for the test log.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	f, err := os.CreateTemp(dir, name+"-ca-*.pem")
	if err != nil {
		srv.Close()
		return Endpoint{}, err
	}
	err = pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		srv.Close()
		return Endpoint{}, err
	}
	return Endpoint{HTTP: srv, URL: srv.URL + path, CAFile: f.Name()}, nil
}

// ServeTLSAt is ServeTLS on a loopback address other than 127.0.0.1,
// such as 127.0.0.2, with a certificate of its own for that address: an
// upstream that an agent reaches through acptap's forward proxy without
// record --proxy-loopback, since NO_PROXY names 127.0.0.1, localhost and
// ::1 only. It is for agents that run an HTTP server of their own on
// 127.0.0.1 (opencode), whose calls --proxy-loopback would send through
// the tap too.
func ServeTLSAt(h http.Handler, ip, path, dir, name string) (Endpoint, error) {
	addr := net.ParseIP(ip)
	if addr == nil || !addr.IsLoopback() {
		return Endpoint{}, fmt.Errorf("fakellm: %q is no loopback address", ip)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return Endpoint{}, err
	}
	cert, der, err := selfSigned(addr)
	if err != nil {
		ln.Close()
		return Endpoint{}, err
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	f, err := os.CreateTemp(dir, name+"-ca-*.pem")
	if err != nil {
		srv.Close()
		return Endpoint{}, err
	}
	err = pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		srv.Close()
		return Endpoint{}, err
	}
	return Endpoint{HTTP: srv, URL: srv.URL + path, CAFile: f.Name()}, nil
}

// selfSigned returns a fresh self-signed certificate for ip, and its DER.
func selfSigned(ip net.IP) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "fakellm " + ip.String()},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{ip},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, der, nil
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

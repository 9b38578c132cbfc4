package proxy_test

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/proxy"
)

// TestHTTP2Upstream: the tap speaks HTTP/2 to an upstream that offers it
// and records the protocol; agents that offer HTTP/2 in an intercepted
// tunnel get it too.
func TestHTTP2Upstream(t *testing.T) {
	for _, rt := range routes {
		if !rt.tls {
			continue
		}
		t.Run(rt.name, func(t *testing.T) {
			upCA := newTestCA(t)
			protos := make(chan string, 1)
			srv := upCA.startTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				protos <- r.Proto
				io.WriteString(w, "data: hi\n\n")
			}), true)
			ca := newCA(t)
			rec := newFakeRecorder()
			tap := newTap(t, proxy.Config{CA: ca, Recorder: rec, UpstreamCAs: upCA.pool})
			client, u := rt.via(t, tap, ca, srv.URL, "/v1/messages")
			resp, err := client.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "data: hi\n\n" {
				t.Errorf("client got %q", body)
			}
			if p := <-protos; p != "HTTP/2.0" {
				t.Errorf("upstream got %s, want HTTP/2.0", p)
			}
			wantClient := "HTTP/1.1"
			if rt.name == "proxy-https-h2" {
				wantClient = "HTTP/2.0"
			}
			if resp.Proto != wantClient {
				t.Errorf("client got %s, want %s", resp.Proto, wantClient)
			}
			if x := rec.finished(t, 1)[0]; x.Proto != "HTTP/2.0" {
				t.Errorf("recorded proto %q, want HTTP/2.0", x.Proto)
			}
		})
	}
}

// echoHandler answers with the request's method, path, query and body.
var echoHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" "+string(body))
})

// TestConnectPlainHTTP: a client that sends CONNECT for an http:// target
// gets plain HTTP served in the tunnel, request after request.
func TestConnectPlainHTTP(t *testing.T) {
	srv := httptest.NewServer(echoHandler)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	rec := newFakeRecorder()
	tap := newTap(t, proxy.Config{Recorder: rec})
	conn, br := rawConnect(t, tap, host)
	for i, body := range []string{`{"n":0}`, `{"n":1}`} {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/chat/completions?i=%d", srv.URL, i), strings.NewReader(body))
		if err := req.Write(conn); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("request %d in the tunnel: %v", i, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "POST " + req.URL.RequestURI() + " " + body; string(got) != want {
			t.Errorf("request %d got %q, want %q", i, got, want)
		}
	}
	for i, x := range rec.finished(t, 2) {
		want := fmt.Sprintf("%s/v1/chat/completions?i=%d", srv.URL, i)
		if x.Route != exchange.RouteProxy || x.URL != want || x.Status != http.StatusOK {
			t.Errorf("exchange %d: route %q, URL %s, status %d; want proxy, %s, 200", i, x.Route, x.URL, x.Status, want)
		}
	}
}

// TestConnectPipelined: a client that sends the start of its tunnel in
// the same write as the CONNECT request, without waiting for the response,
// loses none of it, whether the tunnel carries plain HTTP or TLS.
func TestConnectPipelined(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		srv := httptest.NewServer(echoHandler)
		defer srv.Close()
		host := strings.TrimPrefix(srv.URL, "http://")
		rec := newFakeRecorder()
		tap := newTap(t, proxy.Config{Recorder: rec})
		conn := dialPipelined(t, tap, host)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"n":0}`))
		if err := req.Write(conn); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), req)
		if err != nil {
			t.Fatalf("the request sent with the CONNECT: %v", err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := `POST /v1/chat/completions {"n":0}`; string(got) != want {
			t.Errorf("got %q, want %q", got, want)
		}
		if x := rec.finished(t, 1)[0]; x.URL != srv.URL+"/v1/chat/completions" || x.Status != http.StatusOK {
			t.Errorf("recorded %s, status %d; want %s/v1/chat/completions, 200", x.URL, x.Status, srv.URL)
		}
	})
	t.Run("tls", func(t *testing.T) {
		upCA := newTestCA(t)
		srv := upCA.startTLS(t, echoHandler, false)
		host := strings.TrimPrefix(srv.URL, "https://")
		rec := newFakeRecorder()
		ca := newCA(t)
		tap := newTap(t, proxy.Config{CA: ca, Recorder: rec, UpstreamCAs: upCA.pool})
		// The ClientHello is the first write, and goes with the CONNECT.
		conn := tls.Client(dialPipelined(t, tap, host), &tls.Config{RootCAs: caPool(t, ca), ServerName: "127.0.0.1"})
		if err := conn.Handshake(); err != nil {
			t.Fatalf("TLS handshake sent with the CONNECT: %v", err)
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/responses", strings.NewReader(`{"n":1}`))
		if err := req.Write(conn); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := `POST /v1/responses {"n":1}`; string(got) != want {
			t.Errorf("got %q, want %q", got, want)
		}
		if x := rec.finished(t, 1)[0]; x.URL != srv.URL+"/v1/responses" || x.Status != http.StatusOK {
			t.Errorf("recorded %s, status %d; want %s/v1/responses, 200", x.URL, x.Status, srv.URL)
		}
	})
}

// pipelinedConn is a connection to the tap's forward proxy whose first
// write carries a CONNECT request to target in front of what it is given,
// and whose reads start after the CONNECT response.
type pipelinedConn struct {
	net.Conn
	connect []byte // sent with the first write; nil after it
	br      *bufio.Reader
	read    bool // the CONNECT response has been read
}

func dialPipelined(t testing.TB, tap *proxy.Tap, target string) *pipelinedConn {
	t.Helper()
	// Bytes that the tap loses would leave it waiting for them, until
	// dialProxy's deadline.
	conn, connect := dialProxy(t, tap, target)
	return &pipelinedConn{Conn: conn, connect: connect, br: bufio.NewReader(conn)}
}

func (c *pipelinedConn) Write(p []byte) (int, error) {
	if c.connect == nil {
		return c.Conn.Write(p)
	}
	_, err := c.Conn.Write(append(c.connect, p...))
	c.connect = nil
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *pipelinedConn) Read(p []byte) (int, error) {
	if !c.read {
		c.read = true
		if err := readConnectResponse(c.br); err != nil {
			return 0, err
		}
	}
	return c.br.Read(p)
}

// TestOwnListenersRecordedOnce: an agent that sends a base-URL request
// through the forward proxy anyway (ignoring NO_PROXY) is served by the
// route, and the exchange is recorded once.
func TestOwnListenersRecordedOnce(t *testing.T) {
	var mu sync.Mutex
	upstreamGot := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		upstreamGot++
		mu.Unlock()
		echoHandler(w, r)
	}))
	defer srv.Close()
	rec := newFakeRecorder()
	ca := newCA(t)
	tap, err := proxy.New(proxy.Config{CA: ca, Recorder: rec, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	local, err := tap.AddBaseURL("OPENAI_BASE_URL", srv.URL+"/v1")
	if err != nil {
		t.Fatal(err)
	}

	// An absolute-URI request to the route through the proxy.
	client, _ := viaProxy(false)(t, tap, ca, "", "")
	resp, err := client.Get(local + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// A CONNECT tunnel to the route.
	lu, _ := url.Parse(local)
	conn, br := rawConnect(t, tap, lu.Host)
	req, _ := http.NewRequest(http.MethodGet, local+"/models?tunnel=1", nil)
	req.Write(conn)
	resp, err = http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	if err := tap.Close(); err != nil { // waits until everything is recorded
		t.Fatal(err)
	}
	xs := rec.finished(t, 2)
	for i, want := range []string{srv.URL + "/v1/models", srv.URL + "/v1/models?tunnel=1"} {
		if x := xs[i]; x.Route != exchange.RouteBaseURL || x.BaseURLVar != "OPENAI_BASE_URL" || x.URL != want || x.Status != http.StatusOK {
			t.Errorf("exchange %d: route %q var %q, URL %s, status %d; want base-url OPENAI_BASE_URL, %s, 200", i, x.Route, x.BaseURLVar, x.URL, x.Status, want)
		}
	}
	if upstreamGot != 2 {
		t.Errorf("the upstream got %d requests, want 2", upstreamGot)
	}
}

// TestRedact: Redact sees every exchange before the Recorder does, both
// the incomplete and the finished one, and changes nothing that is
// forwarded.
func TestRedact(t *testing.T) {
	const secret = "sk-live-0123456789"
	redact := func(x *exchange.Exchange) {
		x.RequestHeaders.Set("Authorization", "[redacted]")
		x.URL = strings.ReplaceAll(x.URL, secret, "[redacted]")
		x.RequestBody = bytes.ReplaceAll(x.RequestBody, []byte(secret), []byte("[redacted]"))
		for i := range x.Chunks {
			x.Chunks[i].Data = bytes.ReplaceAll(x.Chunks[i].Data, []byte(secret), []byte("[redacted]"))
		}
	}
	h := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "Bearer "+secret || !bytes.Contains(body, []byte(secret)) || r.URL.Query().Get("key") != secret {
			t.Errorf("upstream got Authorization %q, body %q, URL %s; want the secret in all", r.Header.Get("Authorization"), body, r.URL)
		}
		io.WriteString(w, "data: your key is "+secret+"\n\n")
	}
	for _, rt := range []route{routes[0], routes[4]} {
		t.Run(rt.name, func(t *testing.T) {
			s := setup(t, rt, http.HandlerFunc(h), "/v1/chat?key="+secret, proxy.Config{Redact: redact})
			req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{"prompt":"`+secret+`"}`))
			req.Header.Set("Authorization", "Bearer "+secret)
			resp, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), secret) {
				t.Errorf("client got %q; redaction must not touch what is forwarded", body)
			}
			s.rec.finished(t, 1)
			for _, c := range s.rec.all() {
				x := decode(t, c)
				if bytes.Contains(c.Data, []byte(secret)) || bytes.Contains(x.RequestBody, []byte(secret)) || bytes.Contains(x.Body(), []byte(secret)) {
					t.Errorf("exchange %v reached the recorder unredacted: URL %s, request body %q, body %q", x.End, x.URL, x.RequestBody, x.Body())
				}
				if got := x.RequestHeaders.Get("Authorization"); got != "[redacted]" {
					t.Errorf("exchange %v has Authorization %q, want [redacted]", x.End, got)
				}
			}
		})
	}
}

// TestCAFiles: the CA is created once, with a private key file, reused
// on the next load, issued again from the same key when its certificate
// is lost, and created once by concurrent loads.
func TestCAFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "acptap")
	ca, err := proxy.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "ca.pem"); ca.CertFile() != want {
		t.Errorf("CertFile() = %s, want %s", ca.CertFile(), want)
	}
	for name, want := range map[string]fs.FileMode{".": fs.ModeDir | 0o700, "ca-key.pem": 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %v, want %v", name, fi.Mode(), want)
		}
	}
	cert := readCert(t, ca.CertFile())
	if !cert.IsCA || cert.PublicKeyAlgorithm != x509.ECDSA || cert.PublicKey.(*ecdsa.PublicKey).Curve != elliptic.P256() {
		t.Errorf("CA certificate: IsCA %v, key %v; want an ECDSA P-256 CA", cert.IsCA, cert.PublicKeyAlgorithm)
	}
	keyPEM, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	certPEM, _ := os.ReadFile(ca.CertFile())

	if _, err := proxy.LoadOrCreateCA(dir); err != nil {
		t.Fatal(err)
	}
	keyPEM2, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	certPEM2, _ := os.ReadFile(ca.CertFile())
	if !bytes.Equal(keyPEM, keyPEM2) || !bytes.Equal(certPEM, certPEM2) {
		t.Errorf("the second load changed the CA files")
	}

	os.Remove(ca.CertFile())
	if _, err := proxy.LoadOrCreateCA(dir); err != nil {
		t.Fatal(err)
	}
	again := readCert(t, ca.CertFile())
	if !again.PublicKey.(*ecdsa.PublicKey).Equal(cert.PublicKey) || again.Subject.String() != cert.Subject.String() {
		t.Errorf("the certificate issued again has key %v and subject %s; want the old key and %s", again.PublicKey, again.Subject, cert.Subject)
	}

	t.Run("concurrent", func(t *testing.T) {
		dir := t.TempDir()
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { _, errs[i] = proxy.LoadOrCreateCA(dir) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		ca, err := proxy.LoadOrCreateCA(dir)
		if err != nil {
			t.Fatal(err)
		}
		keyPEM, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
		block, _ := pem.Decode(keyPEM)
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !key.(*ecdsa.PrivateKey).PublicKey.Equal(readCert(t, ca.CertFile()).PublicKey) {
			t.Errorf("after concurrent creation, ca.pem does not match ca-key.pem")
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 2 {
			t.Errorf("the CA directory holds %d files, want ca.pem and ca-key.pem", len(entries))
		}
	})

	t.Run("corrupt-key", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "ca-key.pem"), []byte("not a key"), 0o600)
		if _, err := proxy.LoadOrCreateCA(dir); !errors.Is(err, proxy.ErrInvalidCA) {
			t.Errorf("LoadOrCreateCA with a corrupt key: %v, want ErrInvalidCA", err)
		}
	})

	// A certificate of another key is refused, and left as it is: issuing
	// a new one would make useless the one clients trust (issue 24).
	t.Run("mismatch", func(t *testing.T) {
		a, b := t.TempDir(), t.TempDir()
		for _, dir := range []string{a, b} {
			if _, err := proxy.LoadOrCreateCA(dir); err != nil {
				t.Fatal(err)
			}
		}
		other, err := os.ReadFile(filepath.Join(b, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(a, "ca.pem"), other, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := proxy.LoadOrCreateCA(a); !errors.Is(err, proxy.ErrCAMismatch) || !strings.Contains(err.Error(), filepath.Join(a, "ca.pem")) {
			t.Errorf("LoadOrCreateCA with another key's certificate: %v, want ErrCAMismatch naming ca.pem", err)
		}
		if got, _ := os.ReadFile(filepath.Join(a, "ca.pem")); !bytes.Equal(got, other) {
			t.Errorf("the certificate was rewritten")
		}
	})
}

func readCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM", file)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestLeafCertificates: intercepted connections get a certificate for the
// CONNECT host, the same one each time.
func TestLeafCertificates(t *testing.T) {
	upCA := newTestCA(t)
	srv := upCA.startTLS(t, echoHandler, false)
	ca := newCA(t)
	tap := newTap(t, proxy.Config{CA: ca, UpstreamCAs: upCA.pool})
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]

	leafOf := func(host string) *x509.Certificate {
		t.Helper()
		client, u := viaProxy(false)(t, tap, ca, "https://"+host+":"+port, "/v1/x") // a fresh connection each time
		var leaf *x509.Certificate
		client.Transport.(*http.Transport).TLSClientConfig.VerifyConnection = func(cs tls.ConnectionState) error {
			leaf = cs.PeerCertificates[0]
			return nil
		}
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return leaf
	}
	a, b, c := leafOf("127.0.0.1"), leafOf("127.0.0.1"), leafOf("localhost")
	if !bytes.Equal(a.Raw, b.Raw) {
		t.Errorf("two connections to 127.0.0.1 got different certificates; want the cached one")
	}
	if len(a.IPAddresses) != 1 || a.IPAddresses[0].String() != "127.0.0.1" || len(a.DNSNames) != 0 {
		t.Errorf("certificate for 127.0.0.1 has IPs %v, names %v", a.IPAddresses, a.DNSNames)
	}
	if !slices.Equal(c.DNSNames, []string{"localhost"}) || bytes.Equal(a.Raw, c.Raw) {
		t.Errorf("certificate for localhost has names %v; want its own, for localhost", c.DNSNames)
	}
}

// TestEnv: the environment points every kind of client at the tap, trusts
// its CA, exempts the tap's own listeners and loopback from the proxy, and
// its files go with Close.
func TestEnv(t *testing.T) {
	ca := newCA(t)
	tap, err := proxy.New(proxy.Config{CA: ca, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	local, err := tap.AddBaseURL("OPENAI_BASE_URL", "https://api.openai.com/v1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	extra := filepath.Join(dir, "extra.pem")
	os.WriteFile(extra, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: newTestCA(t).cert.Raw}), 0o600)
	in := []string{
		"PATH=/usr/bin",
		"HTTPS_PROXY=http://corporate:3128",
		"no_proxy=localhost,127.0.0.1",
		"OPENAI_BASE_URL=https://api.openai.com/v1",
		"NODE_EXTRA_CA_CERTS=" + extra,
	}
	out, err := tap.Env(in, proxy.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range out {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := env[k]; dup {
			t.Errorf("%s is set twice", k)
		}
		env[k] = v
	}
	if env["PATH"] != "/usr/bin" {
		t.Errorf("PATH = %q, want it kept", env["PATH"])
	}
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"} {
		if env[k] != tap.ProxyURL() {
			t.Errorf("%s = %q, want %s", k, env[k], tap.ProxyURL())
		}
	}
	pu, _ := url.Parse(tap.ProxyURL())
	lu, _ := url.Parse(local)
	want := []string{pu.Host, lu.Host, "localhost", "127.0.0.1", "::1"}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		got := strings.Split(env[k], ",")
		if !slices.Equal(got, want) {
			t.Errorf("%s = %q, want the tap's listeners and loopback %q", k, got, want)
		}
	}
	// With ProxyLoopback, only the tap's listeners are exempt.
	proxied, err := tap.Env(in, proxy.EnvOptions{ProxyLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		var got []string
		for _, kv := range proxied {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				got = append(got, strings.Split(v, ",")...)
			}
		}
		if want := want[:2]; !slices.Equal(got, want) {
			t.Errorf("with ProxyLoopback, %s = %q, want only the tap's listeners %q", k, got, want)
		}
	}
	if env["OPENAI_BASE_URL"] != local {
		t.Errorf("OPENAI_BASE_URL = %q, want the route's %s", env["OPENAI_BASE_URL"], local)
	}
	caCert := readCert(t, ca.CertFile())
	bundle := env["SSL_CERT_FILE"]
	for _, k := range []string{"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "CODEX_CA_CERTIFICATE"} {
		if env[k] != bundle {
			t.Errorf("%s = %q, want the bundle %s", k, env[k], bundle)
		}
	}
	certs := readCerts(t, bundle)
	if !slices.ContainsFunc(certs, caCert.Equal) {
		t.Errorf("the bundle lacks the tap's CA")
	}
	if roots, err := x509.SystemCertPool(); err == nil && !roots.Equal(x509.NewCertPool()) && len(certs) < 2 {
		t.Errorf("the bundle has %d certificates; want the system roots too", len(certs))
	}
	node := readCerts(t, env["NODE_EXTRA_CA_CERTS"])
	if len(node) != 2 || !slices.ContainsFunc(node, caCert.Equal) {
		t.Errorf("NODE_EXTRA_CA_CERTS has %d certificates; want the earlier one and the tap's CA", len(node))
	}

	// An SSL_CERT_FILE of the environment replaces the system roots.
	out, err = tap.Env([]string{"SSL_CERT_FILE=" + extra}, proxy.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var own string
	for _, kv := range out {
		if v, ok := strings.CutPrefix(kv, "SSL_CERT_FILE="); ok {
			own = v
		}
	}
	if got := readCerts(t, own); len(got) != 2 || !slices.ContainsFunc(got, caCert.Equal) {
		t.Errorf("with SSL_CERT_FILE set, the bundle has %d certificates; want that file's and the tap's CA", len(got))
	}

	if err := tap.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{bundle, own, env["NODE_EXTRA_CA_CERTS"]} {
		if _, err := os.Stat(f); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there after Close (%v)", f, err)
		}
	}
	if _, err := os.Stat(ca.CertFile()); err != nil {
		t.Errorf("Close removed the CA: %v", err)
	}
}

func readCerts(t *testing.T, file string) []*x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			certs = append(certs, c)
		}
	}
}

// TestAddBaseURL checks the local URLs, under the secret, and the refused
// upstreams.
func TestAddBaseURL(t *testing.T) {
	const secret = "0123456789abcdefABCDEF-_"
	tap := newTap(t, proxy.Config{Secret: secret})
	for _, c := range []struct{ upstream, wantPath string }{
		{"https://api.openai.com/v1", "/v1"},
		{"https://api.openai.com/v1/", "/v1/"},
		{"https://api.anthropic.com", ""},
		{"127.0.0.1:11434", ""}, // OLLAMA_HOST style
	} {
		local, err := tap.AddBaseURL("X", c.upstream)
		if err != nil {
			t.Errorf("AddBaseURL(%q): %v", c.upstream, err)
			continue
		}
		u, err := url.Parse(local)
		if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Path != "/"+secret+c.wantPath {
			t.Errorf("AddBaseURL(%q) = %q, want http://127.0.0.1:PORT/%s%s", c.upstream, local, secret, c.wantPath)
		}
	}
	for _, bad := range []string{"ftp://example.com", "https://", "https://user:pw@example.com", "https://example.com/v1?x=1", "https://example.com/#f"} {
		if _, err := tap.AddBaseURL("X", bad); !errors.Is(err, proxy.ErrInvalidUpstream) {
			t.Errorf("AddBaseURL(%q): %v, want ErrInvalidUpstream", bad, err)
		}
	}
	if _, err := tap.AddBaseURL("", "https://example.com"); err == nil {
		t.Errorf("AddBaseURL with no variable name succeeded")
	}
}

// TestNotAProxyRequest: the forward proxy refuses requests that are not
// proxy requests, even with the credentials.
func TestNotAProxyRequest(t *testing.T) {
	tap := newTap(t, proxy.Config{})
	pu, _ := url.Parse(tap.ProxyURL())
	pw, _ := pu.User.Password()
	req, _ := http.NewRequest(http.MethodGet, "http://"+pu.Host+"/v1/models", nil)
	req.Header.Set("Proxy-Authorization", testkit.BasicAuth(pu.User.Username(), pw))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("got %s, want 400", resp.Status)
	}
}

// TestZeroConfig: the zero Config works: the CA goes to the user's config
// directory, nothing is recorded, streams still flow.
func TestZeroConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	dir, err := proxy.DefaultCADir()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dir, home) || filepath.Base(dir) != "acptap" {
		t.Fatalf("DefaultCADir() = %s, want an acptap directory under %s", dir, home)
	}
	tap, err := proxy.New(proxy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	if _, err := os.Stat(filepath.Join(dir, "ca.pem")); err != nil {
		t.Errorf("the default CA was not created: %v", err)
	}
	ack := newAckStream()
	events := [][]byte{[]byte("{\"a\":1}\n"), []byte("{\"a\":2}\n"), []byte("{\"done\":true}\n")}
	srv := httptest.NewServer(pacedHandler(t, ack, "application/x-ndjson", events))
	defer srv.Close()
	local, err := tap.AddBaseURL("OLLAMA_HOST", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(local+"/api/chat", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAcking(resp.Body, ack.received)
	resp.Body.Close()
	if d := diff(got, bytes.Join(events, nil)); err != nil || d != "" {
		t.Errorf("unrecorded stream: %v %s", err, d)
	}
}

// routeTransport answers every request with the route its context says
// it came by.
type routeTransport struct{}

func (routeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	route, varName, ok := exchange.RouteFromContext(req.Context())
	body := fmt.Sprintf("%s %s %v", route, varName, ok)
	return &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/plain"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

// TestTransportSeesRoute: the Transport learns from each request's context
// by which route it reached the tap, on every route.
func TestTransportSeesRoute(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			ca := newCA(t)
			tap := newTap(t, proxy.Config{CA: ca, Transport: routeTransport{}})
			scheme := "http"
			if rt.tls {
				scheme = "https"
			}
			client, u := rt.via(t, tap, ca, scheme+"://upstream.test", "/v1/anything")
			resp, err := client.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := exchange.RouteProxy + "  true"
			if rt.recorded == exchange.RouteBaseURL {
				want = exchange.RouteBaseURL + " TEST_BASE_URL true"
			}
			if string(body) != want {
				t.Errorf("the Transport saw route %q, want %q", body, want)
			}
		})
	}
}

// TestEnvRemovesStaleFiles: the files Env writes live in a directory
// named after the process, which Close removes; one that a process killed
// with SIGKILL left behind is removed by the next tap that writes its
// own, while those of running processes stay.
func TestEnvRemovesStaleFiles(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(tmp, fmt.Sprintf("acptap-tap-%d-123", dead.Process.Pid))
	live := filepath.Join(tmp, fmt.Sprintf("acptap-tap-%d-456", os.Getppid()))
	other := filepath.Join(tmp, "acptap-tap-notapid")
	for _, d := range []string{stale, live, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	tap, err := proxy.New(proxy.Config{CA: newCA(t), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tap.Env(nil, proxy.EnvOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the directory of a dead process is still there (%v)", err)
	}
	for _, d := range []string{live, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
	own, _ := filepath.Glob(filepath.Join(tmp, fmt.Sprintf("acptap-tap-%d-*", os.Getpid())))
	if len(own) != 1 {
		t.Fatalf("the tap's own directories: %q, want one", own)
	}
	tap.Close()
	if _, err := os.Stat(own[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Close left the tap's directory (%v)", err)
	}
}

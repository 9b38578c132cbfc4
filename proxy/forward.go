package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"

	"github.com/elazarl/goproxy"

	"github.com/acptap/acptap/internal/exchange"
)

// serveForward serves the forward proxy. Absolute-URI requests (plain
// HTTP through HTTP_PROXY) are forwarded here rather than by goproxy,
// whose response copy (v1.9.3) flushes only text/event-stream bodies, so
// that NDJSON and other chunked streams would wait in the server's buffer,
// answers an unreachable upstream with 500, and ends a stream the upstream
// cut like a complete one. goproxy handles CONNECT, handing each tunnel to
// hijackTunnel, and requests that are not proxy requests. Every request
// must carry the credentials of ProxyURL; requests in a tunnel are
// authorized by the CONNECT that opened it.
func (t *Tap) serveForward(w http.ResponseWriter, r *http.Request) {
	if !t.proxyAuthorized(r) {
		t.refuseProxy(w, r)
		return
	}
	if r.Method == http.MethodConnect && r.ProtoMajor == 1 {
		// goproxy takes an HTTP/1 CONNECT over by Hijack.
		kept := new(connectRest)
		t.goproxy.ServeHTTP(restKeeper{w, kept}, r.WithContext(context.WithValue(r.Context(), connectRestKey{}, kept)))
		return
	}
	if !r.URL.IsAbs() {
		t.goproxy.ServeHTTP(w, r)
		return
	}
	u := &url.URL{
		Scheme:   r.URL.Scheme,
		Host:     r.URL.Host,
		Path:     r.URL.Path,
		RawPath:  r.URL.RawPath,
		RawQuery: r.URL.RawQuery,
	}
	t.serveTarget(w, r, target{url: u, host: r.Host, route: exchange.RouteProxy})
}

// serveTarget serves a request of the forward proxy. One for a base-URL
// route of the tap itself (an agent ignoring NO_PROXY) is served by that
// route here and now, so that it is forwarded and recorded once.
//
// One for a loopback URL under the tap's secret is for a route of the
// same run served elsewhere (an MCP server's route in the recording
// process while this tap runs in a process of its own, a replay's MCP
// stand-in): it is passed there by a direct connection, unrecorded, since
// that route records what it serves. An agent whose MCP client ignores
// NO_PROXY sends its MCP requests so.
func (t *Tap) serveTarget(w http.ResponseWriter, r *http.Request, tg target) {
	if rt := t.ownRoute(tg.url); rt != nil {
		rt.ServeHTTP(w, r)
		return
	}
	if t.sameRun(tg.url) {
		tg.passOn = true
	}
	t.serveExchange(w, r, tg)
}

// tlsRecordHandshake is the first byte of a TLS ClientHello.
const tlsRecordHandshake = 0x16

// hijackTunnel takes over the client connection of a CONNECT request:
// it confirms the tunnel, looks at the first byte the client sends, and
// hands the connection to the tunnels server, behind a TLS server with a
// certificate for the CONNECT host if that byte starts a ClientHello, or as
// it is, for plain HTTP, otherwise (some clients CONNECT even for http://
// targets). What the client sent right behind the CONNECT request, before
// the response (a ClientHello in the same write, say), comes first.
func (t *Tap) hijackTunnel(r *http.Request, client net.Conn, _ *goproxy.ProxyCtx) {
	if !t.trackPending(client, true) {
		client.Close()
		return
	}
	handed := false
	defer func() {
		if !handed {
			t.trackPending(client, false)
			client.Close()
		}
	}()
	if _, err := fmt.Fprintf(client, "HTTP/%d.%d 200 Connection established\r\n\r\n", r.ProtoMajor, r.ProtoMinor); err != nil {
		return
	}
	var src io.Reader = client
	if kept, _ := r.Context().Value(connectRestKey{}).(*connectRest); kept != nil && len(kept.rest) > 0 {
		src = io.MultiReader(bytes.NewReader(kept.rest), client)
	}
	br := bufio.NewReader(src)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	tun := &tunnelConn{Conn: client, r: br, authority: r.URL.Host, tls: first[0] == tlsRecordHandshake}
	var c net.Conn = tun
	if tun.tls {
		c = tls.Server(tun, t.interceptConfig(r.URL.Hostname()))
	}
	if !t.trackPending(client, false) {
		return // Close came first
	}
	handed = t.tunnelLn.push(c)
}

// connectRest holds the bytes that the HTTP server had read from a
// connection past its CONNECT request when the connection was hijacked:
// goproxy's ConnectHijack (v1.9.3) hands the bare connection to
// hijackTunnel and drops the server's buffer, and with it the start of the
// tunnel of a client that does not wait for the response.
type connectRest struct{ rest []byte }

// connectRestKey is the context key of the *connectRest of a CONNECT
// request.
type connectRestKey struct{}

// restKeeper is the ResponseWriter of a CONNECT request, given to goproxy:
// its Hijack keeps what the server has buffered in kept.
type restKeeper struct {
	http.ResponseWriter
	kept *connectRest
}

func (k restKeeper) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(k.ResponseWriter).Hijack()
	if err == nil {
		if n := rw.Reader.Buffered(); n > 0 {
			p, _ := rw.Reader.Peek(n)
			k.kept.rest = bytes.Clone(p)
		}
	}
	return c, rw, err
}

// Unwrap lets http.ResponseController reach the server's ResponseWriter.
func (k restKeeper) Unwrap() http.ResponseWriter { return k.ResponseWriter }

// trackPending adds c to, or removes it from, the tunnels Close must close
// itself because no server owns them yet. It returns false once the tap is
// closed.
func (t *Tap) trackPending(c net.Conn, add bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if add {
		t.pending[c] = struct{}{}
	} else {
		delete(t.pending, c)
	}
	return true
}

// interceptConfig is the TLS configuration of a tunnel to host: a
// certificate for host, and for the name the client asks for if that
// differs (SNI), speaking HTTP/2 or HTTP/1.1.
func (t *Tap) interceptConfig(host string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return t.ca.leaf(host, hello.ServerName)
		},
	}
}

// tunnelConn is the client side of a CONNECT tunnel.
type tunnelConn struct {
	net.Conn
	r         *bufio.Reader // holds the byte peeked at
	authority string        // the CONNECT target, host:port
	tls       bool          // the client speaks TLS in the tunnel
}

func (c *tunnelConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite lets the server half-close the connection after a response
// that closes it, as it does on its own connections.
func (c *tunnelConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// tunnelKey is the context key of the *tunnelConn a request came through.
type tunnelKey struct{}

// tunnelContext is the tunnels server's ConnContext.
func tunnelContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if tun, ok := c.(*tunnelConn); ok {
		ctx = context.WithValue(ctx, tunnelKey{}, tun)
	}
	return ctx
}

// serveTunnel serves a request that came through a CONNECT tunnel.
func (t *Tap) serveTunnel(w http.ResponseWriter, r *http.Request) {
	tun, _ := r.Context().Value(tunnelKey{}).(*tunnelConn)
	if tun == nil {
		http.Error(w, "acptap: request on a connection that is no tunnel", http.StatusInternalServerError)
		return
	}
	scheme := "http"
	if tun.tls {
		scheme = "https"
	}
	u := &url.URL{
		Scheme:   scheme,
		Host:     urlHost(scheme, tun.authority),
		Path:     r.URL.Path,
		RawPath:  r.URL.RawPath,
		RawQuery: r.URL.RawQuery,
	}
	t.serveTarget(w, r, target{url: u, host: r.Host, route: exchange.RouteProxy})
}

// urlHost returns authority without the scheme's default port.
func urlHost(scheme, authority string) string {
	host, port, err := net.SplitHostPort(authority)
	if err != nil || !(scheme == "https" && port == "443" || scheme == "http" && port == "80") {
		return authority
	}
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		return "[" + host + "]"
	}
	return host
}

// connListener is a net.Listener of connections handed to it by push.
type connListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{} // closed by Close
	once  sync.Once
}

func newConnListener(addr net.Addr) *connListener {
	return &connListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c to Accept; it returns false if the listener is closed.
func (l *connListener) push(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }

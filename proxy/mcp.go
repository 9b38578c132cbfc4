package proxy

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// AddMCP starts a loopback listener that reverse-proxies to the HTTP MCP
// server at upstream, the URL an editor gave for it, and returns the URL
// to give the agent in its place: upstream's path and query on the
// listener's address, under the secret, as AddBaseURL makes one. Its
// exchanges are recorded with exchange.RouteMCP and server, the server's
// number in the recording (exchange.Exchange.MCPServer). Unlike a
// base-URL route it sets no variable, and upstream may have a query.
//
// A server of the older HTTP+SSE transport names, in the first event of
// its GET stream (an "endpoint" event), the URL the agent is to POST its
// messages to, most often a path on its own host: the route gives the
// agent that path under the secret, or its own address in place of the
// server's, so that the messages come through it too. The recorded event
// is the server's.
func (t *Tap) AddMCP(server int, upstream string) (localURL string, err error) {
	if server < 1 {
		return "", fmt.Errorf("adding MCP route: invalid server number %d", server)
	}
	u, err := parseMCPUpstream(upstream)
	if err != nil {
		return "", fmt.Errorf("adding MCP route for server %d: %w", server, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("adding MCP route for server %d: %w", server, err)
	}
	addr := ln.Addr().String()
	local := &url.URL{Scheme: "http", Host: addr, Path: "/" + t.secret + u.Path, RawPath: rawPathUnder(t.secret, u), RawQuery: u.RawQuery}
	rt := &route{t: t, mcpServer: server, upstream: u, localURL: local.String()}
	rt.guard = guard{t: t, where: fmt.Sprintf("MCP server %d route", server)}
	srv := &http.Server{Handler: rt, ErrorLog: t.errorLog, ReadHeaderTimeout: readHeaderTimeout}

	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		ln.Close()
		return "", fmt.Errorf("adding MCP route for server %d: %w", server, ErrClosed)
	}
	t.routes[addr] = rt
	t.servers = append(t.servers, srv)
	t.mu.Unlock()
	go srv.Serve(ln)
	return rt.localURL, nil
}

// sameRun reports whether u is a loopback http URL under the tap's secret:
// one of the same run's routes, which only the agent was given.
func (t *Tap) sameRun(u *url.URL) bool {
	if u.Scheme != "http" || !isLoopbackHost(u.Hostname()) {
		return false
	}
	_, ok := stripSecret(u.Path, t.secret)
	return ok
}

// isLoopbackHost reports whether host is localhost or a loopback IP.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameRunTransport reaches the same run's routes: directly, without a
// proxy, keeping bodies as they are.
var sameRunTransport http.RoundTripper = &http.Transport{
	Proxy:              nil,
	DialContext:        (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
	DisableCompression: true,
	MaxIdleConns:       16,
	IdleConnTimeout:    30 * time.Second,
}

// rawPathUnder returns the escaped path of u under /secret, "" when its
// default escaping is u's.
func rawPathUnder(secret string, u *url.URL) string {
	if u.RawPath == "" {
		return ""
	}
	return "/" + secret + u.RawPath
}

// parseMCPUpstream parses an MCP server's URL as ParseUpstream parses a
// base URL, but keeping a query: an MCP server's URL is the endpoint
// itself, and some carry their session or a key in it (a recorded query
// is masked as every recorded URL's is).
func parseMCPUpstream(s string) (*url.URL, error) {
	base, query, _ := strings.Cut(s, "?")
	u, err := ParseUpstream(base)
	if err != nil {
		return nil, err
	}
	if strings.Contains(query, "#") {
		return nil, fmt.Errorf("%w %q: a fragment", ErrInvalidUpstream, base)
	}
	u.RawQuery = query
	return u, nil
}

// endpointRewriter passes an HTTP+SSE MCP server's stream to the agent
// with the URL of its endpoint event put under the route (see AddMCP),
// and everything else as it is. It holds back what it is given until
// the stream's first event is whole (or it has held more than
// maxEndpointEvent, when it gives up); the endpoint event comes first.
type endpointRewriter struct {
	rt   *route
	held []byte
	done bool
}

// maxEndpointEvent bounds what endpointRewriter holds back.
const maxEndpointEvent = 16 << 10

// rewrite returns the bytes to pass on for p, the next bytes of the
// stream: none while it holds them back.
func (e *endpointRewriter) rewrite(p []byte) []byte {
	if e.done {
		return p
	}
	e.held = append(e.held, p...)
	end := eventEnd(e.held)
	if end < 0 && len(e.held) <= maxEndpointEvent {
		return nil
	}
	e.done = true
	out := e.held
	e.held = nil
	if end < 0 {
		return out
	}
	return append(e.rt.endpointEvent(out[:end]), out[end:]...)
}

// flush returns what is held back, at the end of the stream.
func (e *endpointRewriter) flush() []byte {
	out := e.held
	e.held, e.done = nil, true
	return out
}

// eventEnd returns the offset just past the blank line that ends the
// first SSE event of b, -1 if it has not ended.
func eventEnd(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' && b[i] != '\r' {
			continue
		}
		j := i + 1
		if b[i] == '\r' && j < len(b) && b[j] == '\n' {
			j++
		}
		if j < len(b) && (b[j] == '\n' || b[j] == '\r') {
			k := j + 1
			if b[j] == '\r' && k < len(b) && b[k] == '\n' {
				k++
			}
			return k
		}
	}
	return -1
}

// endpointEvent returns an SSE event, whole, with its data put under the
// route if it is an endpoint event naming a path, or a URL, on the
// server's host; any other event as it is.
func (rt *route) endpointEvent(ev []byte) []byte {
	lines := bytes.SplitAfter(ev, []byte("\n"))
	endpoint := false
	for _, l := range lines {
		if v, ok := bytes.CutPrefix(bytes.TrimRight(l, "\r\n"), []byte("event:")); ok && string(bytes.TrimSpace(v)) == "endpoint" {
			endpoint = true
		}
	}
	if !endpoint {
		return ev
	}
	var out []byte
	for _, l := range lines {
		body := bytes.TrimRight(l, "\r\n")
		v, ok := bytes.CutPrefix(body, []byte("data:"))
		if !ok {
			out = append(out, l...)
			continue
		}
		data := strings.TrimPrefix(string(v), " ")
		out = append(out, "data: "...)
		out = append(out, rt.localEndpoint(data)...)
		out = append(out, l[len(body):]...)
	}
	return out
}

// localEndpoint returns the URL the agent is to use for an endpoint the
// server named: a path on the route, under the secret, for a path or a
// URL on the server's own host; anything else as it is.
func (rt *route) localEndpoint(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint
	}
	switch {
	case u.Scheme == "" && u.Host == "" && strings.HasPrefix(u.Path, "/"):
	case u.Scheme == rt.upstream.Scheme && u.Host == rt.upstream.Host:
	default:
		return endpoint
	}
	local, err := url.Parse(rt.localURL)
	if err != nil {
		return endpoint
	}
	local.Path = "/" + rt.t.secret + u.Path
	local.RawPath = rawPathUnder(rt.t.secret, u)
	local.RawQuery = u.RawQuery
	if u.Scheme == "" {
		local.Scheme, local.Host = "", ""
	}
	return local.String()
}

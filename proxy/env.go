package proxy

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/acptap/acptap/internal/stale"
)

// proxyVars point clients at the forward proxy; clients differ in which
// spelling and which of them they read.
var proxyVars = []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"}

// bundleVars name a file of trusted roots that replaces a client's
// defaults: OpenSSL, Go and Rust's native-tls (SSL_CERT_FILE), Python
// requests, curl, and Codex.
var bundleVars = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "CODEX_CA_CERTIFICATE"}

// systemBundles are the usual places of the system's roots, as crypto/x509
// looks for them.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine, macOS, BSDs
}

// loopbackHosts are the names of loopback that Env puts in NO_PROXY, as
// hosts without ports, an entry that exempts the host on every port for
// the clients that read NO_PROXY: Node's and Bun's (which, unlike Go's,
// proxy loopback unless NO_PROXY names it), curl, Python's and Rust's.
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// EnvOptions qualify the environment that Env makes. The zero value is
// the default: the agent's own loopback servers are left out of the tap.
type EnvOptions struct {
	// ProxyLoopback sends the agent's loopback destinations through the
	// tap too: NO_PROXY names only the tap's own listeners. It is for an
	// LLM on loopback that the agent reaches by the forward proxy (a
	// base-URL route is reached directly either way). By default NO_PROXY
	// also names localhost, 127.0.0.1 and ::1, so that an HTTP server the
	// agent runs and calls on loopback (a front end and its backend in one
	// process tree) is reached directly, never recorded, and never
	// answered by a replay from a previous process's recording.
	ProxyLoopback bool
}

// Env returns env with the variables that make a child process use the
// tap:
//
//   - HTTPS_PROXY, HTTP_PROXY and ALL_PROXY, in upper and lower case, set
//     to ProxyURL;
//   - NO_PROXY and no_proxy listing the tap's own listeners (host:port),
//     and localhost, 127.0.0.1 and ::1 (hosts without ports) unless
//     opts.ProxyLoopback: everything else, the LLM and any other host,
//     goes through the tap;
//   - SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and
//     CODEX_CA_CERTIFICATE naming a bundle of the system roots (those of
//     env's SSL_CERT_FILE if it has a readable one) and the tap's CA;
//   - NODE_EXTRA_CA_CERTS naming the CA certificate, with the certificates
//     of env's NODE_EXTRA_CA_CERTS if it has one;
//   - the variable of each base-URL route set to its local URL.
//
// Routes added later are not in the result. The files are written to a
// temporary directory that Close removes.
func (t *Tap) Env(env []string, opts EnvOptions) ([]string, error) {
	dir, routes, err := t.envDir()
	if err != nil {
		return nil, fmt.Errorf("setting up the agent's environment: %w", err)
	}
	getenv := func(name string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], name+"="); ok {
				return v
			}
		}
		return ""
	}
	caPEM, err := os.ReadFile(t.ca.CertFile())
	if err != nil {
		return nil, fmt.Errorf("setting up the agent's environment: %w", err)
	}

	roots := readRoots(getenv("SSL_CERT_FILE"))
	if roots == nil {
		t.logf("http tap: no system CA bundle found: the agent will trust the tap's CA only")
	}
	bundle, err := writeEnvFile(dir, "ca-bundle-*.pem", roots, caPEM)
	if err != nil {
		return nil, fmt.Errorf("setting up the agent's environment: %w", err)
	}
	nodeCAs := t.ca.CertFile()
	if f := getenv("NODE_EXTRA_CA_CERTS"); f != "" {
		if extra, err := os.ReadFile(f); err == nil {
			if nodeCAs, err = writeEnvFile(dir, "node-ca-*.pem", extra, caPEM); err != nil {
				return nil, fmt.Errorf("setting up the agent's environment: %w", err)
			}
		}
	}

	noProxy := []string{hostPort(t.proxyURL)}
	for _, rt := range routes {
		noProxy = append(noProxy, hostPort(rt.localURL))
	}
	if !opts.ProxyLoopback {
		noProxy = append(noProxy, loopbackHosts...)
	}
	var set [][2]string
	for _, v := range proxyVars {
		set = append(set, [2]string{v, t.proxyURL})
	}
	set = append(set, [2]string{"NO_PROXY", strings.Join(noProxy, ",")}, [2]string{"no_proxy", strings.Join(noProxy, ",")})
	for _, v := range bundleVars {
		set = append(set, [2]string{v, bundle})
	}
	set = append(set, [2]string{"NODE_EXTRA_CA_CERTS", nodeCAs})
	for _, rt := range routes {
		set = append(set, [2]string{rt.varName, rt.localURL})
	}

	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(set, func(s [2]string) bool { return s[0] == name }) {
			out = append(out, kv)
		}
	}
	for _, s := range set {
		out = append(out, s[0]+"="+s[1])
	}
	return out, nil
}

// BaseURLEnv returns env with the variable of each base-URL route set to
// its local URL and nothing else changed: for an agent that reaches the
// LLM only through base-URL routes (no proxy variables, no CA files), as
// `record --no-proxy-env` starts it and replay starts such a recording.
func (t *Tap) BaseURLEnv(env []string) []string {
	t.mu.Lock()
	routes := t.sortedRoutes()
	t.mu.Unlock()
	isRoute := func(name string) bool {
		return slices.ContainsFunc(routes, func(rt *route) bool { return rt.varName == name })
	}
	out := make([]string, 0, len(env)+len(routes))
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !isRoute(name) {
			out = append(out, kv)
		}
	}
	for _, rt := range routes {
		out = append(out, rt.varName+"="+rt.localURL)
	}
	return out
}

// envDir returns the directory for Env's files, creating it on first use,
// and the routes, by variable name.
func (t *Tap) envDir() (string, []*route, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return "", nil, ErrClosed
	}
	if t.tempDir == "" {
		removeStaleEnvDirs(os.TempDir())
		dir, err := os.MkdirTemp("", envDirPrefix+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			return "", nil, err
		}
		t.tempDir = dir
	}
	return t.tempDir, t.sortedRoutes(), nil
}

// sortedRoutes returns the base-URL routes in a stable order, by
// variable name. t.mu must be held.
func (t *Tap) sortedRoutes() []*route {
	routes := make([]*route, 0, len(t.routes))
	for _, rt := range t.routes {
		if rt.mcpServer == 0 {
			routes = append(routes, rt)
		}
	}
	slices.SortFunc(routes, func(a, b *route) int {
		return strings.Compare(a.varName+" "+a.localURL, b.varName+" "+b.localURL)
	})
	return routes
}

// readRoots returns the PEM bundle of the system roots: the file named by
// sslCertFile if readable, else the first readable usual bundle; nil if
// none is found.
func readRoots(sslCertFile string) []byte {
	files := systemBundles
	if sslCertFile != "" {
		files = append([]string{sslCertFile}, files...)
	}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return b
		}
	}
	return nil
}

// writeEnvFile writes the PEM parts, one after the other, to a new file in
// dir and returns its path.
func writeEnvFile(dir, pattern string, parts ...[]byte) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		if _, err = f.Write(p); err == nil && p[len(p)-1] != '\n' {
			_, err = f.Write([]byte{'\n'})
		}
		if err != nil {
			break
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return filepath.Clean(f.Name()), nil
}

// hostPort returns the host:port of a URL of the tap.
func hostPort(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	return u.Host
}

// envDirPrefix starts the name of the directory of Env's files, followed
// by the pid of the process whose tap wrote them.
const envDirPrefix = stale.TapPrefix

// removeStaleEnvDirs removes the directories of Env's files that taps of
// processes no longer running left in tmp: Close removes a tap's own, but
// a process killed with SIGKILL cannot. A directory whose pid is running
// (or was reused) is left alone.
func removeStaleEnvDirs(tmp string) { stale.Remove(tmp, envDirPrefix) }

// Route is one base-URL route: Var is set in the agent's environment to a
// loopback URL of the tap that forwards to Upstream (see AddBaseURL).
type Route struct {
	Var      string `json:"var"`
	Upstream string `json:"upstream"`
}

// Routing says how an agent reaches a tap: by its base-URL Routes and,
// unless NoProxyEnv, by the forward proxy its environment names. It is
// what record, the tap process and replay are told, and it crosses to the
// tap process as it is.
type Routing struct {
	Routes []Route `json:"routes"`
	// NoProxyEnv leaves the forward proxy's variables and the CA files
	// out of the agent's environment: only the routes reach the tap.
	NoProxyEnv bool `json:"no_proxy_env"`
	// ProxyLoopback is EnvOptions.ProxyLoopback; it means nothing with
	// NoProxyEnv.
	ProxyLoopback bool `json:"proxy_loopback"`
}

// Wire puts t between an agent and its LLM as r says: it adds r's routes
// and returns env with the variables that make the agent use t (Env, or
// with NoProxyEnv only BaseURLEnv), and each route's local URL by
// variable. A route t refuses fails Wire with a *RouteError; any other
// error is the environment's (Env's). Routes added before a failure stay
// until Close.
func (t *Tap) Wire(env []string, r Routing) (agentEnv []string, local map[string]string, err error) {
	local = make(map[string]string, len(r.Routes))
	for _, rt := range r.Routes {
		u, err := t.AddBaseURL(rt.Var, rt.Upstream)
		if err != nil {
			return nil, nil, &RouteError{Route: rt, Err: err}
		}
		local[rt.Var] = u
	}
	if r.NoProxyEnv {
		return t.BaseURLEnv(env), local, nil
	}
	agentEnv, err = t.Env(env, EnvOptions{ProxyLoopback: r.ProxyLoopback})
	if err != nil {
		return nil, nil, err
	}
	return agentEnv, local, nil
}

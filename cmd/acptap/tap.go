package main

import (
	"crypto/x509"
	"fmt"
	"net/url"

	"os"
	"strings"

	"github.com/acptap/acptap/proxy"
)

// baseURLRoute is one --base-url VAR[=UPSTREAM].
type baseURLRoute struct {
	Var      string
	Upstream string
}

// baseURLRoutes resolves --base-url values: an explicit UPSTREAM, else the
// variable's current value, else the public endpoint of a well-known name.
func baseURLRoutes(specs []string, env []string) ([]baseURLRoute, error) {
	current := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			current[k] = v
		}
	}
	var routes []baseURLRoute
	seen := map[string]bool{}
	for _, spec := range specs {
		name, upstream, explicit := strings.Cut(spec, "=")
		if name == "" || strings.ContainsAny(name, " \t") {
			return nil, usageErrorf("record: --base-url %q: want VAR or VAR=UPSTREAM, e.g. --base-url OPENAI_BASE_URL", spec)
		}
		if seen[name] {
			return nil, usageErrorf("record: --base-url %s given twice; give each variable once", name)
		}
		seen[name] = true
		if !explicit {
			upstream = current[name]
		}
		if upstream == "" {
			upstream = proxy.KnownBaseURLs[name]
		}
		if upstream == "" {
			return nil, usageErrorf("record: --base-url %s: %s is not set and is not a well-known variable; pass --base-url %s=UPSTREAM", name, name, name)
		}
		if err := checkUpstream(upstream); err != nil {
			return nil, usageErrorf("record: --base-url %s=%s: %v; pass an http or https URL", name, upstream, err)
		}
		routes = append(routes, baseURLRoute{Var: name, Upstream: upstream})
	}
	return routes, nil
}

// checkUpstream refuses upstreams the tap cannot forward to, before
// anything is started or recorded. A bare host:port is taken as http, as
// OLLAMA_HOST allows.
func checkUpstream(upstream string) error {
	if !strings.Contains(upstream, "://") {
		upstream = "http://" + upstream
	}
	u, err := url.Parse(upstream)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("no host")
	}
	return nil
}

// tapConfig builds the parts of the tap's configuration that come from
// flags and can fail before anything is started.
func tapConfig(opts *recordOptions) (proxy.Config, error) {
	var cfg proxy.Config
	if opts.UpstreamCA != "" {
		pem, err := os.ReadFile(opts.UpstreamCA)
		if err != nil {
			return cfg, usageErrorf("record: --upstream-ca: %v; pass a readable PEM file", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return cfg, usageErrorf("record: --upstream-ca %s: no PEM certificate in it; pass a PEM file of CA certificates", opts.UpstreamCA)
		}
		cfg.UpstreamCAs = pool
	}
	dir := opts.CADir
	if dir == "" {
		d, err := proxy.DefaultCADir()
		if err != nil {
			return cfg, usageErrorf("record: %v; pass --ca-dir", err)
		}
		dir = d
	}
	ca, err := proxy.LoadOrCreateCA(dir)
	if err != nil {
		return cfg, usageErrorf("record: interception CA: %v; pass another --ca-dir", err)
	}
	cfg.CA = ca
	return cfg, nil
}

// startTap starts the HTTP tap and returns the agent's environment and
// the local URL of each base-URL route, by variable.
func startTap(cfg proxy.Config, routes []baseURLRoute, env []string, noProxyEnv bool) ([]string, map[string]string, *proxy.Tap, error) {
	tap, err := proxy.New(cfg)
	if err != nil {
		return nil, nil, nil, usageErrorf("record: starting the HTTP tap: %v", err)
	}
	local := map[string]string{}
	for _, r := range routes {
		u, err := tap.AddBaseURL(r.Var, r.Upstream)
		if err != nil {
			tap.Close()
			return nil, nil, nil, usageErrorf("record: --base-url %s=%s: %v", r.Var, r.Upstream, err)
		}
		local[r.Var] = u
	}
	childEnv, err := tap.Env(env)
	if err != nil {
		tap.Close()
		return nil, nil, nil, usageErrorf("record: preparing the agent's environment: %v", err)
	}
	if noProxyEnv {
		childEnv = withoutProxyVars(childEnv, env, routes)
	}
	return childEnv, local, tap, nil
}

// withoutProxyVars keeps the original env plus the base-URL variables.
func withoutProxyVars(childEnv, env []string, routes []baseURLRoute) []string {
	isRoute := map[string]bool{}
	for _, r := range routes {
		isRoute[r.Var] = true
	}
	out := make([]string, 0, len(env)+len(routes))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !isRoute[k] {
			out = append(out, kv)
		}
	}
	for _, kv := range childEnv {
		if k, _, _ := strings.Cut(kv, "="); isRoute[k] {
			out = append(out, kv)
		}
	}
	return out
}

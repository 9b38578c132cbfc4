package record

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/wire"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/store"
)

// An LLM on loopback (a local Ollama or LM Studio, a company gateway on
// localhost) goes around the tap: the agent's NO_PROXY names loopback, so
// that the agent's own servers keep working. Recorded without --base-url,
// such an agent leaves no LLM exchange in the recording, whose replay then
// fails in a way that does not say why. So, while the agent runs, record
// watches the sockets of its process group (on Linux, see
// loopback_linux.go) for connections to loopback ports other than the
// tap's, tells its own servers (ports its processes listen on) from other
// programs', and keeps what it saw in the recording's metadata
// (store.Recording.Loopback), for LoopbackNotice to say at the end of the
// recording, in show's header and before a replay.

// loopbackPollInterval is how often the watch looks at the agent's
// sockets: a connection that opens and closes between two looks is
// missed, but an LLM's lasts as long as its answer streams, and HTTP
// clients keep it open for the next call.
const loopbackPollInterval = 50 * time.Millisecond

// A conn is a TCP connection of the agent's process group between two
// loopback ports.
type conn struct{ local, remote int }

// loopbackSeen is what a watch saw, for loopbackResult to make sense of
// once the agent has ended: a listener seen after a connection to it
// still makes it the agent's own.
type loopbackSeen struct {
	listens map[int]bool  // ports a process of the group listened on
	conns   map[conn]bool // connections between loopback ports
}

// result says what the watch saw: nil if nothing but connections to the
// ports of exclude (the tap's) and accepted ones (whose local port is a
// listener of the group). The variables of env name the ports they hold.
func (s *loopbackSeen) result(exclude map[int]bool, env []string) *store.Loopback {
	own, other := map[int]bool{}, map[int]bool{}
	for c := range s.conns {
		switch {
		case s.listens[c.local]:
			// The server's end of a connection to the group's own
			// listener, or of one from another program: not outgoing.
		case s.listens[c.remote]:
			own[c.remote] = true
		case !exclude[c.remote]:
			other[c.remote] = true
		}
	}
	if len(own) == 0 && len(other) == 0 {
		return nil
	}
	l := &store.Loopback{}
	for p := range own {
		l.Own = append(l.Own, p)
	}
	slices.Sort(l.Own)
	for p := range other {
		l.Ports = append(l.Ports, store.LoopbackPort{Port: p, Var: portVar(env, p)})
	}
	slices.SortFunc(l.Ports, func(a, b store.LoopbackPort) int { return a.Port - b.Port })
	return l
}

// portVar returns the variable of env whose value is a URL, or a
// host:port, of port on loopback, for --base-url; "" if none is. Of
// several, a well-known base-URL variable wins, else the first by name.
// The proxy variables are not base URLs, and are the tap's anyway.
func portVar(env []string, port int) string {
	var found []string
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" || isProxyVar(name) || slices.Contains(found, name) {
			continue
		}
		if p, ok := loopbackPort(value); ok && p == port {
			found = append(found, name)
		}
	}
	if len(found) == 0 {
		return ""
	}
	slices.Sort(found)
	for _, name := range found {
		if _, ok := proxy.KnownBaseURLs[name]; ok {
			return name
		}
	}
	return found[0]
}

// isProxyVar says whether name is a proxy variable (HTTPS_PROXY,
// no_proxy, ...), which holds no base URL.
func isProxyVar(name string) bool {
	return strings.HasSuffix(strings.ToUpper(name), "_PROXY")
}

// loopbackPort returns the port of value if it is an http(s) URL, or a
// host:port as OLLAMA_HOST allows, of a loopback host (localhost, 127/8,
// ::1, or the unspecified address, which reaches loopback too).
func loopbackPort(value string) (int, bool) {
	var host, port string
	if strings.Contains(value, "://") {
		u, err := url.Parse(value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return 0, false
		}
		host, port = u.Hostname(), u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
	} else {
		var err error
		if host, port, err = net.SplitHostPort(value); err != nil {
			return 0, false
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	if host == "localhost" || host == "" {
		return n, true
	}
	ip := net.ParseIP(host)
	return n, ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}

// loopbackTapPorts returns the ports of the tap's listeners that the
// agent is given: its base-URL routes' (local) and, unless noProxyEnv,
// the forward proxy's, from the proxy variables of the agent's env.
func loopbackTapPorts(local map[string]string, env []string, noProxyEnv bool) map[int]bool {
	ports := map[int]bool{}
	add := func(raw string) {
		if p, ok := loopbackPort(raw); ok {
			ports[p] = true
		}
	}
	for _, u := range local {
		add(u)
	}
	if !noProxyEnv {
		for _, name := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"} {
			add(getenv(env, name))
		}
	}
	return ports
}

// LLMExchanges counts the exchanges of the recording name of st that are
// the agent's conversation with its LLM (wire.ClassLLM). It reads the
// events only if the recording has exchanges.
func LLMExchanges(st *store.Store, name string) (int, error) {
	rec, err := st.Get(name)
	if err != nil || rec.Exchanges == 0 {
		return 0, err
	}
	n := 0
	err = st.Events(name, func(e store.Event) error {
		if e.Kind != store.KindExchange {
			return nil
		}
		if x, err := exchange.Unmarshal(e.Data); err == nil && wire.ClassOfExchange(x) == wire.ClassLLM {
			n++
		}
		return nil
	})
	return n, err
}

// LoopbackNotice says that the recording rec of st, which has no LLM
// exchange, connected to loopback ports of other programs, which may be
// its LLM, and how to record them: with --base-url for the variable that
// holds a port's URL, else with --proxy-loopback. It returns "" when
// there is nothing to say: no such port was seen, or the recording has an
// LLM exchange. The text reads after "has": "no LLM exchange, but ...".
func LoopbackNotice(st *store.Store, rec store.Recording) (string, error) {
	if rec.Loopback == nil || len(rec.Loopback.Ports) == 0 {
		return "", nil
	}
	if n, err := LLMExchanges(st, rec.Name); err != nil || n > 0 {
		return "", err
	}
	return loopbackText(rec.Loopback.Ports, rec.ProxyEnv), nil
}

// loopbackText is LoopbackNotice's text for ports; proxyEnv says whether
// the agent had the proxy variables, without which --proxy-loopback is
// no help.
func loopbackText(ports []store.LoopbackPort, proxyEnv bool) string {
	nums := make([]string, len(ports))
	var vars []string
	unnamed := "" // the first port no variable names
	for i, p := range ports {
		nums[i] = strconv.Itoa(p.Port)
		switch {
		case p.Var == "" && unnamed == "":
			unnamed = nums[i]
		case p.Var != "" && !slices.Contains(vars, p.Var):
			vars = append(vars, p.Var)
		}
	}
	what, which := "port "+nums[0], "that is"
	if len(nums) > 1 {
		what = "ports " + strings.Join(nums[:len(nums)-1], ", ") + " and " + nums[len(nums)-1]
		which = "one of them is"
	}
	var fix string
	switch {
	case unnamed == "":
		flags := make([]string, len(vars))
		for i, v := range vars {
			flags[i] = "--base-url " + v
		}
		holds := "holds its URL"
		if len(ports) > 1 {
			holds = "hold their URLs"
		}
		fix = strings.Join(flags, " ") + " (" + strings.Join(vars, ", ") + " " + holds + ")"
	case proxyEnv:
		fix = "--proxy-loopback"
	default:
		// --proxy-loopback needs the proxy variables.
		fix = "--base-url VAR=http://127.0.0.1:" + unnamed + " for the variable the agent reads its LLM's URL from"
	}
	return fmt.Sprintf("no LLM exchange, but the agent connected to loopback %s, which went around the tap: if %s its LLM, record it with %s", what, which, fix)
}

// A loopbackRun is the watch of one recording's agent.
type loopbackRun struct {
	w       *loopbackWatch
	exclude map[int]bool // the tap's ports
	env     []string     // the agent's environment before the tap's variables
}

// watchLoopback starts watching the agent's process group pgid for
// connections to loopback ports other than the tap's: those of its
// base-URL routes (local) and its forward proxy, of childEnv.
func (p *Plan) watchLoopback(pgid int, local map[string]string, childEnv []string) *loopbackRun {
	return &loopbackRun{
		w:       watchLoopback(pgid),
		exclude: loopbackTapPorts(local, childEnv, p.opts.NoProxyEnv),
		env:     p.env,
	}
}

// finish stops the watch, once the agent has ended, and returns what it
// saw, for the recording's metadata.
func (r *loopbackRun) finish() *store.Loopback {
	seen := r.w.finish()
	if seen == nil {
		return nil
	}
	return seen.result(r.exclude, r.env)
}

// noticeLoopback tells, by Logf, that the finished recording has no LLM
// exchange but its agent connected to other programs on loopback.
func (p *Plan) noticeLoopback(st *store.Store) {
	rec, err := st.Get(p.name)
	if err != nil {
		return // the recording is saved; a notice is not worth an error
	}
	if n, err := LoopbackNotice(st, rec); err == nil && n != "" {
		p.opts.Logf("recording %q has %s", p.name, n)
	}
}

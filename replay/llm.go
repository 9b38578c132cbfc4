package replay

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/replay/llmserver"
	"github.com/acptap/acptap/store"
)

// normalizers makes the Normalizers of a replay, which know the recorded
// directories and the sandbox's alike, so that a path under either
// normalizes to the same placeholder.
type normalizers struct {
	opts normalize.Options
	// reqs normalizes the LLM requests, the recorded and the live alike:
	// what a request repeats of an earlier one is normalized once.
	reqs *normalize.Requests
}

func newNormalizers(rec *recording, sb *sandbox, opts *Options) normalizers {
	o := normalize.Options{
		// Found once: new is called twice per LLM request.
		Cwd:        nonEmpty(append(slices.Clone(rec.cwds), rec.meta.Cwd, sb.work)...),
		Home:       nonEmpty(rec.meta.Home, sb.home),
		Tmp:        nonEmpty(rec.meta.Tmp, sb.tmp),
		Rules:      append(slices.Clip(opts.Rules), rec.rules...),
		NoCoalesce: opts.NoCoalesce,
		OmitEditor: true,
		Order:      opts.Order,
	}
	return normalizersOf(o)
}

// normalizersOf returns the normalizers of o.
func normalizersOf(o normalize.Options) normalizers {
	return normalizers{opts: o, reqs: normalize.NewRequests(o)}
}

// new returns a fresh Normalizer: placeholders are numbered per
// Normalizer, so each of two things compared gets its own.
func (n normalizers) new() *normalize.Normalizer { return normalize.New(n.opts) }

// conversation is an llmserver.Options.Conversation: the conversation of
// a request, normalized.
func (n normalizers) conversation(x *exchange.Exchange) []string {
	return normalize.Conversation(n.reqs.Request(x.Method, x.URL, x.RequestHeaders, x.RequestBody))
}

// compareRequests is an llmserver.Options.Compare: the first difference of
// the two requests, normalized, and the number of the others.
func (n normalizers) compareRequests(_ int, recorded, live *exchange.Exchange) (llmserver.Drift, bool) {
	return drift(n.requests(recorded, live))
}

// requests normalizes a request and its recorded twin.
func (n normalizers) requests(recorded, live *exchange.Exchange) (a, b any) {
	a = n.reqs.Request(recorded.Method, recorded.URL, recorded.RequestHeaders, recorded.RequestBody)
	b = n.reqs.Request(live.Method, live.URL, live.RequestHeaders, live.RequestBody)
	return a, b
}

// drift returns the first difference of two normalized requests, and the
// number of the others.
func drift(a, b any) (llmserver.Drift, bool) {
	diffs := normalize.Mismatches(a, b)
	if len(diffs) == 0 {
		return llmserver.Drift{}, false
	}
	return llmserver.Drift{Mismatch: diffs[0], More: len(diffs) - 1}, true
}

// httpKey is an llmserver.Options.HTTPKey: the method and the URL, with
// its scheme and host as they are and its path and query normalized as
// request comparison normalizes them (volatile query values such as times
// and ids, paths under the recorded and sandbox directories, the user's
// rules), each URL with a fresh Normalizer, so that its placeholders are
// numbered alike in both runs.
func (n normalizers) httpKey(method, rawURL string) string {
	req, ok := n.new().Request(method, rawURL, nil, nil).(map[string]any)
	m, _ := req["method"].(string)
	p, _ := req["url"].(string)
	u, err := url.Parse(rawURL)
	if !ok || err != nil || m == "" {
		return method + " " + rawURL
	}
	return m + " " + u.Scheme + "://" + u.Host + p
}

func nonEmpty(xs ...string) []string {
	var out []string
	for _, x := range xs {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

// llmSide is the LLM end of a replay: the recorded exchanges served by an
// llmserver.Server behind a proxy.Tap that never dials out, and the
// agent's command line and environment pointing at them the way the
// recording says the agent reached the LLM.
type llmSide struct {
	server *llmserver.Server
	tap    *proxy.Tap
	// argv is the agent's command with ${VAR} of each recorded base-URL
	// variable expanded to the tap's URL for it.
	argv []string
	// env is the sandbox's environment with the tap's variables: each
	// recorded base-URL variable set to the tap's URL for it, and
	// HTTPS_PROXY and friends if the recorded agent had them.
	env []string
	// mask masks a line of the agent's as a recording masks the agent's
	// lines: secret JSON members, the values of its secret-looking
	// variables (replay's dummy keys among them) and the tap's secret,
	// replay's here, which the agent prints with its URLs (an error of a
	// failed LLM call). Nothing compares or prints a line before it.
	mask func([]byte) []byte
	// secret is the tap's: the MCP stand-ins serve under it, so that an
	// agent reaching them through the tap's proxy is passed on to them.
	secret string
}

// startLLM starts the LLM side of a replay of rec for the agent command
// argv and the sandbox's environment env. compare, if not nil, compares
// each request with its recorded twin (see llmserver.Options.Compare);
// httpKey, if not nil, keys the http exchanges (llmserver.Options.HTTPKey);
// conversation, if not nil, matches requests by the conversation they
// continue (llmserver.Options.Conversation).
// The caller closes it.
func startLLM(rec *recording, argv, env []string, opts *Options, compare func(number int, recorded, live *exchange.Exchange) (llmserver.Drift, bool), httpKey func(method, rawURL string) string, conversation func(*exchange.Exchange) []string) (*llmSide, error) {
	secret := proxy.NewSecret()
	// The agent's variables that look secret are replay's dummies, which
	// the recording has masked by name as it masked the real keys: the
	// same masks make the two alike.
	secrets := redact.New(append(slices.Clip(env), redact.TapSecret+"="+secret))
	if compare != nil {
		compare = maskingSecret(compare, secrets)
	}
	if conversation != nil {
		unmasked := conversation
		conversation = func(x *exchange.Exchange) []string {
			masked := *x
			masked.Chunks = slices.Clone(x.Chunks)
			secrets.Exchange(&masked)
			return unmasked(&masked)
		}
	}
	server, err := llmserver.New(llmserver.Options{
		Exchanges:    rec.recorded(),
		Speed:        opts.Speed,
		Faults:       opts.Faults,
		Compare:      compare,
		HTTPKey:      httpKey,
		Conversation: conversation,
	})
	if err != nil {
		return nil, err
	}
	tap, err := proxy.New(proxy.Config{
		Transport: server,
		Secret:    secret,
		CA:        opts.CA,
		Logf:      func(string, ...any) {},
	})
	if err != nil {
		return nil, fmt.Errorf("starting the replay LLM server: %w", err)
	}
	llm := &llmSide{server: server, tap: tap, secret: secret}
	agentEnv, local, err := tap.Wire(env, routing(rec.meta, opts.Loopback))
	var re *proxy.RouteError
	switch {
	case errors.As(err, &re):
		tap.Close()
		return nil, err // "base URL VAR: ..."
	case err != nil:
		tap.Close()
		return nil, fmt.Errorf("preparing the agent's environment: %w", err)
	}
	llm.argv = proxy.ExpandBaseURLs(argv, local)
	llm.env = dedupeEnv(agentEnv)
	llm.mask = func(line []byte) []byte { return secrets.Bytes(redact.Members(line)) }
	return llm, nil
}

// maskingSecret returns compare given live requests masked by mask, the
// replay's tap secret as a recording masks its recorder's
// (redact.TapSecret) and the agent's secret variables: a request that
// echoes the agent's proxy or base URL, or a key, compares as the recorded
// one, and a difference reported does not show the secret.
func maskingSecret(compare func(number int, recorded, live *exchange.Exchange) (llmserver.Drift, bool), mask *redact.Redactor) func(number int, recorded, live *exchange.Exchange) (llmserver.Drift, bool) {
	return func(number int, recorded, live *exchange.Exchange) (llmserver.Drift, bool) {
		// Exchange replaces the fields it masks, but for the chunks'
		// data, in place: live is not changed.
		masked := *live
		masked.Chunks = slices.Clone(live.Chunks)
		mask.Exchange(&masked)
		return compare(number, recorded, &masked)
	}
}

// close stops the tap, and with it the server's answers.
func (l *llmSide) close() { l.tap.Close() }

// routing is how the recorded agent reached the LLM, for a replay to reach
// it the same way: its base-URL variables, and the proxy variables and CA
// bundles only if it was given them (meta.ProxyEnv), with loopback left
// out of the proxy as loopback says.
func routing(meta store.Recording, loopback LoopbackMode) proxy.Routing {
	r := proxy.Routing{NoProxyEnv: !meta.ProxyEnv}
	for _, v := range slices.Sorted(maps.Keys(meta.BaseURLs)) {
		r.Routes = append(r.Routes, proxy.Route{Var: v, Upstream: meta.BaseURLs[v]})
	}
	switch loopback {
	case LoopbackAsRecorded:
		r.ProxyLoopback = !meta.LoopbackDirect
	case LoopbackProxied:
		r.ProxyLoopback = true
	}
	return r
}

// dedupeEnv keeps the last value of each variable.
func dedupeEnv(env []string) []string {
	last := map[string]int{}
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		last[k] = i
	}
	out := env[:0:0]
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if last[k] == i {
			out = append(out, kv)
		}
	}
	return out
}

// A RequestPair is an LLM request of a replay and its recorded twin, the
// exchange its queue's cursor gave it, normalized as for their comparison
// (see normalize.Normalizer.Request).
type RequestPair struct {
	Number         int // the recorded exchange's, as acptap show numbers them
	Recorded, Live any
}

// requestLog keeps the requests of a replay, normalized, for
// Options.KeepRequests.
type requestLog struct {
	norms normalizers
	drift bool // report drift to the server

	mu   sync.Mutex // guards kept
	kept []RequestPair
}

func newRequestLog(norms normalizers, drift bool) *requestLog {
	return &requestLog{norms: norms, drift: drift}
}

// compare is an llmserver.Options.Compare that keeps what it compares.
func (l *requestLog) compare(number int, recorded, live *exchange.Exchange) (llmserver.Drift, bool) {
	a, b := l.norms.requests(recorded, live)
	l.mu.Lock()
	l.kept = append(l.kept, RequestPair{Number: number, Recorded: a, Live: b})
	l.mu.Unlock()
	if !l.drift {
		return llmserver.Drift{}, false
	}
	return drift(a, b)
}

// pairs returns the kept requests by Number; nil for a nil log. The LLM
// server's Report has waited for every comparison.
func (l *requestLog) pairs() []RequestPair {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.kept)
	slices.SortStableFunc(out, func(a, b RequestPair) int { return cmp.Compare(a.Number, b.Number) })
	return out
}

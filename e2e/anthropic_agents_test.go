package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/testing/fakeanthropic"
)

// What opencode's and qwen-code's tests share: both are run against the
// scripted Messages API of fakeanthropic, by both routes.

const (
	// anthropicKey is the ANTHROPIC_API_KEY of opencode and qwen-code,
	// long enough for acptap to treat it as a secret to mask.
	anthropicKey = "fake-anthropic-key-3e7a91c0d2"
	// anthropicModel is their main model.
	anthropicModel = "claude-sonnet-4-5"
	// anthropicBaseURLVar is their base-URL variable.
	anthropicBaseURLVar = "ANTHROPIC_BASE_URL"
	// otherLoopback is where the proxy route's fake listens: an address
	// that the forward proxy's NO_PROXY (127.0.0.1, localhost, ::1) does
	// not exempt, so that the agent reaches it through the tap without
	// record --proxy-loopback, which would send opencode's calls to its
	// own server on 127.0.0.1 through the tap too.
	otherLoopback = "127.0.0.2"
)

// extraEnv opts into the tests of opencode and qwen-code, which take a
// minute or more each: scripts/agent-matrix runs them, not ./scripts/test.
const extraEnv = "ACPTAP_E2E_EXTRA"

// needExtra skips a test of opencode's or qwen-code's unless extraEnv or
// matrixEnv is 1.
func needExtra(t *testing.T) {
	t.Helper()
	if os.Getenv(extraEnv) != "1" && os.Getenv(matrixEnv) != "1" {
		t.Skipf("set %s=1 to run the tests of opencode and qwen-code (scripts/agent-matrix runs them)", extraEnv)
	}
}

// newAnthropicLab returns a lab for an agent of a, with the API key in
// ANTHROPIC_API_KEY.
func newAnthropicLab(t *testing.T, a *agentBin) *lab {
	a.need(t)
	l := newLab(t)
	l.secrets = []string{anthropicKey}
	l.agentEnv = func(string) []string { return []string{"ANTHROPIC_API_KEY=" + anthropicKey} }
	return l
}

// startAnthropic starts the fake of route r: plain HTTP on 127.0.0.1 for
// the base-URL route, HTTPS on otherLoopback for the proxy route. The
// caller closes it.
func (l *lab) startAnthropic(r route, opts fakeanthropic.Options) *fakeanthropic.Listener {
	l.t.Helper()
	if !r.tls {
		return fakeanthropic.Start(opts)
	}
	fake, err := fakeanthropic.StartTLSAt(opts, otherLoopback, l.dir)
	if err != nil {
		l.t.Fatal(err)
	}
	return fake
}

// anthropicRecordFlags are the acptap record flags of route r for a fake
// started by startAnthropic: the proxy route needs no --proxy-loopback.
func anthropicRecordFlags(r route, fake *fakeanthropic.Listener) []string {
	if r.tls {
		return []string{"--snapshot", "--upstream-ca", fake.CAFile}
	}
	return []string{"--snapshot", "--no-proxy-env", "--base-url", anthropicBaseURLVar + "=" + fake.URL}
}

// An anthropicSession is a recorded session of opencode or qwen-code and
// what the fake saw.
type anthropicSession struct {
	*session
	requests []fakeanthropic.Request
}

// recordAnthropic records a session whose agent command for the fake's
// URL is agent(url), with its workspace prepared by setup and editor's
// testeditor flags.
func (l *lab) recordAnthropic(name string, r route, prompts, editor []string, setup func(s *session) error, agent func(url string) []string, opts fakeanthropic.Options) *anthropicSession {
	l.t.Helper()
	fake := l.startAnthropic(r, opts)
	defer fake.Close()
	as := &anthropicSession{}
	as.session = l.record(take{
		name:        name,
		route:       r,
		prompts:     prompts,
		editor:      editor,
		recordFlags: anthropicRecordFlags(r, fake),
		agent:       agent(fake.URL),
		setup:       setup,
		steps: func() []string {
			as.requests = fake.Requests()
			var out []string
			for _, r := range as.requests {
				out = append(out, r.Step)
			}
			return out
		},
		llmURL: func(url string) bool { return strings.HasSuffix(url, "/v1/messages") },
	}, fake.URL)
	return as
}

// stepsOf returns the steps the fake answered the requests of model
// with, in order.
func (as *anthropicSession) stepsOf(model string) []string {
	var out []string
	for _, r := range as.requests {
		if strings.Contains(string(r.Body), `"model":"`+model+`"`) {
			out = append(out, r.Step)
		}
	}
	return out
}

package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayInNetworkNamespace replays LLM sessions recorded by both
// routes inside a network namespace that has only loopback (unshare -n):
// a replay needs no network, and would fail loudly if it tried one.
func TestReplayInNetworkNamespace(t *testing.T) {
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: cannot make a network namespace", tool)
		}
	}
	if out, err := exec.Command("unshare", "-n", "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Skipf("cannot make a network namespace here (unshare -n needs root or user namespaces): %v: %s", err, out)
	}
	for _, route := range []string{"base-url", "proxy-tls"} {
		t.Run(route, func(t *testing.T) {
			dir := workspace(t)
			db := filepath.Join(dir, "s.db")
			useTLS := route == "proxy-tls"
			upstream, _ := countingUpstream(t, useTLS)
			env := agentEnv("OPENAI_API_KEY=sk-live-key-0123456789")
			var flags, agentArgs []string
			if useTLS {
				flags = []string{"--proxy-loopback", "--upstream-ca", caFile(t, upstream)}
				agentArgs = []string{"--llm", upstream.URL + "/v1", "--title-call"}
			} else {
				flags = []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"}
				agentArgs = []string{"--title-call"}
			}
			recordSession(t, dir, db, "llm", env, flags, agentArgs...)
			// In the namespace the upstream's address is unreachable, and
			// so is every other one but loopback: the control.
			hostPort := strings.TrimPrefix(strings.TrimPrefix(upstream.URL, "https://"), "http://")
			host, port, _ := strings.Cut(hostPort, ":")
			probe := exec.Command("unshare", "-n", "bash", "-c", `ip link set lo up && echo > /dev/tcp/$0/$1`, host, port)
			if out, err := probe.CombinedOutput(); err == nil {
				t.Fatalf("the upstream %s is reachable inside the namespace (%s): the test proves nothing", hostPort, out)
			}
			cmd := exec.Command("unshare", "-n", "sh", "-c",
				`ip link set lo up && exec acptap replay --store "$0" --requests fail llm`, db)
			cmd.Dir = t.TempDir()
			cmd.Env = agentEnv()
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "PASS llm (") || !strings.Contains(string(out), "3 LLM exchanges served") {
				t.Errorf("replay in a network namespace: %v\n%s", err, out)
			}
		})
	}
}

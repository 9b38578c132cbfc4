package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// mcpPaths are the ways BenchmarkMCPRoundTrip reaches its MCP server:
// direct (the agent starts it: the baseline), through the test binary's
// relay (a process that only forwards: the anchor), and through acptap
// record's relay, recording every line.
var mcpPaths = []string{"direct", "relay", "acptap"}

var mcpBenchLine = regexp.MustCompile(`mcp bench: (\d+) calls, p50 (\d+) ns, p99 (\d+) ns`)

// BenchmarkMCPRoundTrip: a tools/call round trip between the test agent
// and a stdio MCP server, 2,000 calls one after the other, p50 and p99 as
// the agent times them.
func BenchmarkMCPRoundTrip(b *testing.B) {
	for _, path := range inRoundOrder(mcpPaths) {
		b.Run(path, func(b *testing.B) {
			dir := b.TempDir()
			server := `{"name":"notes","command":"testmcp","args":[],"env":[]}`
			if path == "relay" {
				server = `{"name":"notes","command":"relay","args":["testmcp"],"env":[]}`
			}
			args := []string{"--prompt", "bench", "--mcp-servers", "[" + server + "]", "--"}
			if path == "acptap" {
				args = append(args, "acptap", "record", "--store", filepath.Join(dir, "s.db"), "--name", "bench", "--")
			}
			args = append(args, "testagent", "--mcp-bench", "2000")
			var p50, p99 float64
			for range b.N {
				cmd := exec.Command("testeditor", args...)
				cmd.Dir, cmd.Env = dir, agentEnv()
				out, err := cmd.CombinedOutput()
				m := mcpBenchLine.FindSubmatch(out)
				if err != nil || m == nil {
					b.Fatalf("%s: %v\n%s", path, err, out)
				}
				p50, _ = strconv.ParseFloat(string(m[2]), 64)
				p99, _ = strconv.ParseFloat(string(m[3]), 64)
			}
			b.ReportMetric(p50, "p50-ns")
			b.ReportMetric(p99, "p99-ns")
		})
	}
}

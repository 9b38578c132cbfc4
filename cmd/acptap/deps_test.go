package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDependencies checks that imports point one way (DESIGN.md, issue
// 25): the store does not depend on the wire formats' parsers; the LLM
// server of replay does not depend on normalize; normalize and the parsers
// import neither bbolt nor goproxy; the acptap binary links none of the
// test doubles (acptap demo has an agent and an editor of its own). It
// reads `go list -deps` of each package, without its tests.
func TestDependencies(t *testing.T) {
	const mod = "github.com/acptap/acptap/"
	bbolt, goproxy := "go.etcd.io/bbolt", "github.com/elazarl/goproxy"
	parsers := []string{mod + "internal/wire", mod + "internal/sse", mod + "internal/ndjson"}
	doubles := []string{mod + "internal/testagent", mod + "internal/testeditor", mod + "internal/testkit",
		mod + "internal/fakellm", mod + "internal/fakeanthropic", mod + "internal/fakegemini", mod + "internal/fakeresponses",
		mod + "internal/browsertest", mod + "internal/damage"}
	for pkg, forbidden := range map[string][]string{
		mod + "cmd/acptap":        doubles,
		mod + "store":             append(slices.Clone(parsers), mod+"normalize", goproxy),
		mod + "internal/exchange": append(slices.Clone(parsers), bbolt, goproxy),
		mod + "replay/llmserver":  {mod + "normalize", bbolt},
		mod + "normalize":         {bbolt, goproxy, mod + "store"},
		mod + "internal/wire":     {bbolt, goproxy, mod + "store", mod + "normalize"},
		mod + "internal/sse":      {bbolt, goproxy, mod + "internal/exchange"},
		mod + "internal/ndjson":   {bbolt, goproxy, mod + "internal/exchange"},
		mod + "internal/stamp":    {mod + "store", mod + "stdiotap", mod + "proxy"},
		mod + "internal/excerpt":  {mod + "normalize", mod + "store"},
		mod + "stdiotap":          {bbolt, goproxy, mod + "store", mod + "proxy"},
		mod + "proxy":             {bbolt, mod + "store", mod + "stdiotap", mod + "normalize"},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		for _, f := range forbidden {
			if slices.Contains(deps, f) {
				t.Errorf("%s depends on %s", strings.TrimPrefix(pkg, mod), strings.TrimPrefix(f, mod))
			}
		}
	}
}

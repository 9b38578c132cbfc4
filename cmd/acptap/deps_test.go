package main

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDependencies checks that imports point one way (DESIGN.md, issue
// 25): the store does not depend on the wire formats' parsers; the LLM
// server of replay does not depend on normalize; normalize and the parsers
// import neither bbolt nor goproxy. It reads `go list -deps` of each
// package, without its tests.
func TestDependencies(t *testing.T) {
	const mod = "github.com/acptap/acptap/"
	bbolt, goproxy := "go.etcd.io/bbolt", "github.com/elazarl/goproxy"
	parsers := []string{mod + "internal/wire", mod + "internal/sse", mod + "internal/ndjson"}
	for pkg, forbidden := range map[string][]string{
		mod + "store":             append(slices.Clone(parsers), mod+"normalize", goproxy),
		mod + "internal/exchange": append(slices.Clone(parsers), bbolt, goproxy),
		mod + "replay/llmserver":  {mod + "normalize", bbolt},
		mod + "normalize":         {bbolt, goproxy, mod + "store"},
		mod + "internal/wire":     {bbolt, goproxy, mod + "store", mod + "normalize"},
		mod + "internal/sse":      {bbolt, goproxy, mod + "internal/exchange"},
		mod + "internal/ndjson":   {bbolt, goproxy, mod + "internal/exchange"},
		mod + "internal/stamp":    {mod + "store", mod + "stdiotap", mod + "proxy"},
		mod + "mismatch":          {mod + "normalize", mod + "store"},
		mod + "stdiotap":          {bbolt, goproxy, mod + "store", mod + "proxy"},
		mod + "lane":              {bbolt, goproxy, mod + "store", mod + "normalize"},
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

// TestBinaryLinksNoTestDouble: the acptap binary links no package under
// internal/testing, the test doubles' folder, by the linker's symbol list
// of the binary built (go tool nm); the test knows it reads the right
// list by finding the demo's agent in it.
func TestBinaryLinksNoTestDouble(t *testing.T) {
	bin := buildAcptap(t)
	out, err := exec.Command("go", "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	const doubles = "github.com/acptap/acptap/internal/testing/"
	seen := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		if _, sym, ok := strings.Cut(line, doubles); ok {
			pkg, _, _ := strings.Cut(sym, ".")
			if !seen[pkg] {
				seen[pkg] = true
				t.Errorf("the acptap binary links %s%s, a test double", doubles, pkg)
			}
		}
	}
	if !strings.Contains(string(out), "github.com/acptap/acptap/internal/demo.") {
		t.Fatalf("go tool nm lists no symbol of internal/demo: the check checks nothing")
	}
}

// TestInternalImportsNoProduct: no package under internal/ (the libraries
// the product is built from, and the test doubles) imports a package of
// the product: the store, record, replay, normalize, the tap, the stdio
// pump, calibrate, fixtures, the HTML view or the commands.
func TestInternalImportsNoProduct(t *testing.T) {
	const mod = "github.com/acptap/acptap/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../../internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	product := []string{"store", "record", "replay", "normalize", "proxy", "stdiotap", "calibrate", "fixture", "timeline", "acptaptest", "cmd"}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			rel, ok := strings.CutPrefix(imp, mod)
			if !ok {
				continue
			}
			top, _, _ := strings.Cut(rel, "/")
			if slices.Contains(product, top) {
				t.Errorf("%s imports %s, a package of the product", strings.TrimPrefix(f[0], mod), rel)
			}
		}
	}
}

// buildAcptap builds the acptap binary as users get it, without the race
// detector or the test doubles, into a temporary directory of the test,
// and returns its path.
func buildAcptap(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "acptap")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

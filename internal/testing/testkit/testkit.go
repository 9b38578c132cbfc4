// Package testkit holds what acptap's tests share: the captured LLM wire samples, a goroutine-safe buffer and log, the test binary re-run as a child, an intruder that tries the tap without its secret, and the measuring loops of the tap benchmarks.
package testkit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// WireSamplesDir is the directory of the real captured LLM streams
// (testdata/wire-samples at the module root, byte for byte the captures in
// ../shared/wire-samples), for every package whose tests parse them.
func WireSamplesDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("testkit: no caller information to find testdata/wire-samples")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "wire-samples")
}

// WireSample returns the bytes of the captured sample name (e.g.
// "anth_text.sse"), failing t if it cannot be read.
func WireSample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(WireSamplesDir(), name))
	if err != nil {
		t.Fatalf("wire sample: %v", err)
	}
	return b
}

// WireSamples returns the captured samples whose names match pattern (a
// filepath.Match pattern such as "*.sse"), by name, failing t if none do.
func WireSamples(t testing.TB, pattern string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(WireSamplesDir(), pattern))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no wire samples match %q in %s: %v", pattern, WireSamplesDir(), err)
	}
	sort.Strings(paths)
	m := make(map[string][]byte, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m[filepath.Base(p)] = b
	}
	return m
}

// SelfArgv is the command line that runs this test binary again with args:
// tests whose TestMain turns the binary into an agent (or another child)
// when an environment variable says so start it this way.
func SelfArgv(t testing.TB, args ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe}, args...)
}

// SyncBuffer is a bytes.Buffer that one goroutine (a child's stderr
// copier, say) may write while another reads it.
type SyncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what has been written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Len returns the number of bytes written so far.
func (b *SyncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// Logs collects the lines of a Logf (a tap's notices, say), which any
// goroutine may call while another reads them.
type Logs struct {
	mu    sync.Mutex // guards lines
	lines []string
}

// Logf adds a line.
func (l *Logs) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// Lines returns the lines so far.
func (l *Logs) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// String returns the lines so far, joined by newlines.
func (l *Logs) String() string {
	return strings.Join(l.Lines(), "\n")
}

// steeringVars would send a child's HTTP elsewhere than the test means:
// the tests set them themselves where they want them.
var steeringVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "OPENAI_BASE_URL", "OPENAI_API_KEY"}

// ChildEnv is the environment of a child process of a test: this process's
// without the variables that steer HTTP clients (proxies, CA bundle, base
// URL, API key; any case), with GORACE telling a race-built child not to
// linger a second at exit, then extra (later entries win, as in os/exec).
func ChildEnv(extra ...string) []string {
	gorace := "atexit_sleep_ms=0"
	var env []string
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case slices.Contains(steeringVars, strings.ToUpper(name)):
			continue
		case name == "GORACE":
			gorace = value + " " + gorace
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "GORACE="+gorace), extra...)
}

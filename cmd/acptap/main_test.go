package main

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/acptap/acptap/internal/testing/testagent"
	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/internal/testing/testmcp"
	"github.com/acptap/acptap/store"
)

// TestMain makes the test binary double as acptap, the test agent, the
// scripted editor and a raw byte agent, installed on PATH for the tests and
// the scripts, so that everything runs as real processes over real pipes.
func TestMain(m *testing.M) {
	// Race-built helper processes otherwise linger a second at exit.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	// Tests never touch the user's interception CA.
	if os.Getenv("ACPTAP_CA_DIR") == "" {
		os.Setenv("ACPTAP_CA_DIR", filepath.Join(os.TempDir(), "acptap-test-ca"))
	}
	testscript.Main(closingBrowser{m}, map[string]func(){
		"acptap": func() {
			stop := childProfile()
			code := Main(os.Args, &IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
			stop()
			os.Exit(code)
		},
		"testagent": func() {
			os.Exit(testagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
		},
		"testeditor": func() {
			os.Exit(testeditor.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		},
		"testmcp": func() {
			os.Exit(testmcp.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		},
		"rawagent":  rawAgent,
		"leakagent": leakAgent,
		"busyagent": busyAgent,
		"loadagent": loadAgent,
		// The causal order's tests (causal_test.go).
		"causalagent": causalAgent,
		// The tap benchmarks' processes (tap_bench_test.go).
		"reverseproxy":  reverseProxyMain,
		"tapunrecorded": tapUnrecordedMain,
		"relay":         relayMain,
		"urlagent":      urlAgentMain,
		// The tap secret's tests (secret_test.go).
		"secretagent": secretAgent,
		"intruder": func() {
			os.Exit(testkit.Intruder(os.Args[1:], os.Stdout, os.Stderr))
		},
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "script"),
		RequireExplicitExec: true,
		// testscript's own root for the scripts' work directories is left
		// behind, empty, by a run of some of the scripts (-run); the test's
		// temporary directory goes whatever runs.
		WorkdirRoot: t.TempDir(),
		Setup: func(env *testscript.Env) error {
			env.Setenv("ACPTAP_STORE", "")
			// The test agent's binary, for scripts that copy it.
			bin, err := exec.LookPath("testagent")
			if err != nil {
				return err
			}
			env.Setenv("TESTAGENT", bin)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":      cmdExits,
			"onelineerr": cmdOneLineErr,
			"waitlive":   cmdWaitLive,
			"stdoutvar":  cmdStdoutVar,
			"damage":     cmdDamage,
		},
	})
}

// cmdExits runs a program and checks its exit code:
//
//	exits CODE PROGRAM [ARGS...]
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROGRAM [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: bad code %q", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exits: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// cmdWaitLive waits until a recording is being recorded (created, its
// recorder running), for scripts that start acptap record in the
// background:
//
//	waitlive STORE NAME
func cmdWaitLive(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitlive STORE NAME")
	}
	path := ts.MkAbs(args[0])
	deadline := time.Now().Add(time.Minute)
	for {
		if st, err := store.Open(path, &store.Options{ReadOnly: true}); err == nil {
			rec, err := st.Get(args[1])
			st.Close()
			if err == nil && rec.Live {
				return
			}
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitlive: %s in %s is not being recorded after a minute", args[1], path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cmdStdoutVar sets a variable of the script to what the one group of a
// regular expression matched on the last command's stdout, for a value
// that varies from run to run (a frame's number where lanes race):
//
//	stdoutvar VAR REGEXP
func cmdStdoutVar(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: stdoutvar VAR REGEXP")
	}
	re, err := regexp.Compile(`(?m)` + args[1])
	ts.Check(err)
	if re.NumSubexp() != 1 {
		ts.Fatalf("stdoutvar: %s has %d groups, want 1", args[1], re.NumSubexp())
	}
	m := re.FindStringSubmatch(ts.ReadFile("stdout"))
	if m == nil {
		ts.Fatalf("stdoutvar: no match for %s in stdout", args[1])
	}
	ts.Setenv(args[0], m[1])
}

// cmdOneLineErr checks that the last command printed exactly one line on
// stderr starting with "acptap: ", as every user-facing error must.
func cmdOneLineErr(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: onelineerr")
	}
	stderr := ts.ReadFile("stderr")
	if !strings.HasPrefix(stderr, "acptap: ") || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		ts.Fatalf("stderr is not one line starting with \"acptap: \": %q", stderr)
	}
}

// rawAgent is an agent that speaks bytes, not ACP:
//
//	rawagent FILE IN
//
// writes FILE to stdout in random-sized writes, copies everything it reads
// from stdin to the file IN, and exits 0 at stdin EOF.
func rawAgent() {
	if len(os.Args) != 3 {
		os.Stderr.WriteString("usage: rawagent FILE IN\n")
		os.Exit(2)
	}
	out, err := os.ReadFile(os.Args[1])
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(2)
	}
	in, err := os.Create(os.Args[2])
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(2)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(in, os.Stdin)
		done <- err
	}()
	writeChunked(os.Stdout, out, rand.New(rand.NewPCG(1, 2)))
	os.Stderr.WriteString("rawagent: wrote stdout\n")
	if err := <-done; err != nil {
		os.Exit(3)
	}
	if err := in.Close(); err != nil {
		os.Exit(3)
	}
	os.Exit(0)
}

// writeChunked writes p in random pieces of 1 byte to 256 KiB, mimicking
// how real programs flush.
func writeChunked(w io.Writer, p []byte, r *rand.Rand) error {
	for len(p) > 0 {
		n := 1 + r.IntN(min(len(p), 256<<10))
		if r.IntN(4) == 0 {
			n = 1 + r.IntN(min(len(p), 7))
		}
		if _, err := w.Write(p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// tapPayload is stdio traffic with every kind of line acptap must pass
// through untouched, among them a frame of bigSize bytes of text.
func tapPayload(seed uint64, bigSize int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}` + "\n")
	b.WriteString("Starting agent (not JSON)\n")
	b.WriteString("\n")
	b.WriteString("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"text\":\"caf\xc3\xa9 \xff\xfe invalid\"}}\n")
	b.WriteString("line with CRLF\r\n")
	big := make([]byte, bigSize)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range big {
		big[i] = 'a' + byte(r.IntN(26))
	}
	b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"content":"`)
	b.Write(big)
	b.WriteString(`"}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":2,"result":{}}` + "\n")
	b.WriteString(`last line without newline`)
	return b.Bytes()
}

func TestMainRejectsUnknownCommand(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main([]string{"acptap", "frobnicate"}, &IO{In: bytes.NewReader(nil), Out: &out, Err: &errb})
	if code != ExitUsage {
		t.Errorf("exit code = %d, want %d (stderr %q)", code, ExitUsage, errb.String())
	}
}

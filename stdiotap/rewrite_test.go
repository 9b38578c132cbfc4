package stdiotap

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestRewriteStdin: lines that name "secret" reach the agent rewritten,
// the others, a line too long to hold and a last line without a newline
// as they came, whatever the editor's writes cut them into; the frames are
// the lines as read.
func TestRewriteStdin(t *testing.T) {
	seed := newSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	long := strings.Repeat("secret ", MaxRewrite/7+10)
	in := "plain line\n" + `{"say":"secret"}` + "\n\n" + long + "\nsecret at the end"
	want := "plain line\n" + `{"say":"REWRITTEN"}` + "\n\n" + long + "\nREWRITTEN at the end"
	rewrite := func(line []byte) []byte { return bytes.ReplaceAll(line, []byte("secret"), []byte("REWRITTEN")) }

	r := start(t, Config{RewriteStdin: rewrite}, "echo", strconv.FormatUint(seed, 10))
	writeErr := make(chan error, 1)
	go func() {
		err := writeChunked(r.stdin, []byte(in), rng)
		r.stdin.Close()
		writeErr <- err
	}()
	r.wait(t)
	if err := <-writeErr; err != nil {
		t.Fatalf("editor write: %v", err)
	}
	checkBytes(t, "the agent got", r.stdout.bytes(), []byte(want))
	checkBytes(t, "stdin frames reassembled", reassemble(r.log.get(Stdin)), []byte(in))
}

// TestLineRewriterError: a failed forward is the write's error.
func TestLineRewriterError(t *testing.T) {
	broken := errors.New("broken pipe")
	rw := &lineRewriter{w: failWriter{broken}, rewrite: func(b []byte) []byte { return b }}
	if _, err := rw.Write([]byte("a line\n")); !errors.Is(err, broken) {
		t.Errorf("Write = %v, want %v", err, broken)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

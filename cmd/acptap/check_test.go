package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acptap/acptap/store"
)

// panicWriter panics on every write: a bug of acptap's own, as far as
// Main can tell.
type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("a writer that panics\non two lines") }

func TestInternalErrorExits3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, trace := range []bool{false, true} {
		if trace {
			t.Setenv("ACPTAP_TRACE", "1")
		}
		var errb bytes.Buffer
		code := Main([]string{"acptap", "show", "--store", path}, &IO{In: strings.NewReader(""), Out: panicWriter{}, Err: &errb})
		if code != ExitInternal {
			t.Errorf("exit code = %d, want %d (stderr %q)", code, ExitInternal, errb.String())
		}
		first, rest, _ := strings.Cut(errb.String(), "\n")
		const want = "acptap: internal error: a writer that panics on two lines; please report it"
		if !strings.HasPrefix(first, want) {
			t.Errorf("stderr's first line = %q, want it to start %q", first, want)
		}
		if hasTrace := strings.Contains(rest, "goroutine "); hasTrace != trace {
			t.Errorf("with ACPTAP_TRACE=1 %v: a trace after the line is %v, want %v (stderr %q)", trace, hasTrace, trace, errb.String())
		}
	}
}

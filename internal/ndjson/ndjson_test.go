package ndjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/acptap/acptap/internal/readbuf"
	"github.com/acptap/acptap/internal/testing/testkit"
)

func readAll(t testing.TB, r io.Reader) []Line {
	t.Helper()
	nr := NewReader(r)
	var lines []Line
	for {
		l, err := nr.Next()
		if err == io.EOF {
			return lines
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		lines = append(lines, l)
	}
}

func TestReader(t *testing.T) {
	type want struct {
		raw, value string
		bad        bool
	}
	tests := []struct {
		name string
		in   string
		want []want
	}{
		{"lf", "{\"a\":1}\n[2]\n", []want{{"{\"a\":1}\n", `{"a":1}`, false}, {"[2]\n", `[2]`, false}}},
		{"crlf", "{\"a\":1}\r\n\"s\"\r\n", []want{{"{\"a\":1}\r\n", `{"a":1}`, false}, {"\"s\"\r\n", `"s"`, false}}},
		{"no final newline", "1\n{\"b\": true}", []want{{"1\n", "1", false}, {`{"b": true}`, `{"b": true}`, false}}},
		{"blank lines", "\n  \r\n1\n", []want{{"\n", "", false}, {"  \r\n", "", false}, {"1\n", "1", false}}},
		{"junk", "hello\n{\"a\":\n1 2\n3\n", []want{{"hello\n", "", true}, {"{\"a\":\n", "", true}, {"1 2\n", "", true}, {"3\n", "3", false}}},
		{"surrounding space", " \t{} \r\n", []want{{" \t{} \r\n", "{}", false}}},
		{"non-breaking space is not JSON space", "\u00a01\n", []want{{"\u00a01\n", "", true}}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				var got []want
				for _, l := range readAll(t, r) {
					got = append(got, want{string(l.Raw), string(l.Value), l.Err != nil})
					if l.Err != nil && !errors.Is(l.Err, ErrNotJSON) {
						t.Errorf("Err = %v, want it to wrap ErrNotJSON", l.Err)
					}
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("got  %+v\nwant %+v", got, tt.want)
				}
			}
		})
	}
}

func TestErrorNamesLine(t *testing.T) {
	lines := readAll(t, strings.NewReader("1\n2\nnope\n"))
	if len(lines) != 3 || lines[2].Err == nil {
		t.Fatalf("got %d lines, want 3 with the last one bad", len(lines))
	}
	if got := lines[2].Err.Error(); !strings.Contains(got, "line 3") {
		t.Errorf("Err = %q, want it to name line 3", got)
	}
}

func TestReaderError(t *testing.T) {
	errBoom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("1\n2"), iotest.ErrReader(errBoom)))
	for _, want := range []string{"1\n", "2"} {
		l, err := r.Next()
		if err != nil || string(l.Raw) != want {
			t.Fatalf("Next() = %q, %v; want %q", l.Raw, err, want)
		}
	}
	if _, err := r.Next(); err != errBoom {
		t.Fatalf("Next() error = %v, want %v", err, errBoom)
	}
}

func TestLongLine(t *testing.T) {
	v := `"` + strings.Repeat("x", 5*readbuf.MinRead) + `"`
	lines := readAll(t, strings.NewReader(v+"\n"+v))
	if len(lines) != 2 || string(lines[0].Value) != v || string(lines[1].Value) != v {
		t.Fatalf("got %d lines, want two long values", len(lines))
	}
}

func TestOllamaSample(t *testing.T) {
	in := testkit.WireSample(t, "ollama_tool.ndjson")
	lines := readAll(t, bytes.NewReader(in))
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2", len(lines))
	}
	var joined []byte
	for i, l := range lines {
		if l.Err != nil {
			t.Errorf("line %d: %v", i+1, l.Err)
		}
		var v struct{ Done bool }
		if err := json.Unmarshal(l.Value, &v); err != nil {
			t.Errorf("line %d: %v", i+1, err)
		}
		if want := i == 1; v.Done != want {
			t.Errorf("line %d: done = %v, want %v", i+1, v.Done, want)
		}
		joined = append(joined, l.Raw...)
	}
	if !bytes.Equal(joined, in) {
		t.Errorf("Raw lines joined differ from the input")
	}
}

func FuzzNDJSON(f *testing.F) {
	f.Add(testkit.WireSample(f, "ollama_tool.ndjson"))
	f.Add([]byte("1\r\n\n{\"a\" :[1,2]}\nnot json\n\"x\""))
	f.Fuzz(func(t *testing.T, in []byte) {
		lines := readAll(t, bytes.NewReader(in))
		one := readAll(t, iotest.OneByteReader(bytes.NewReader(in)))
		if !reflect.DeepEqual(lines, one) {
			t.Fatalf("reading one byte at a time gives different lines")
		}
		var joined []byte
		for _, l := range lines {
			if i := bytes.IndexByte(l.Raw, '\n'); i >= 0 && i != len(l.Raw)-1 {
				t.Fatalf("line %q has a newline before its end", l.Raw)
			}
			if l.Value != nil && (l.Err != nil || !json.Valid(l.Value) || !bytes.Contains(l.Raw, l.Value)) {
				t.Fatalf("line %q: Value %q, Err %v", l.Raw, l.Value, l.Err)
			}
			if l.Value == nil && l.Err == nil && len(bytes.Trim(l.Raw, " \t\r\n")) != 0 {
				t.Fatalf("line %q has neither Value nor Err", l.Raw)
			}
			joined = append(joined, l.Raw...)
		}
		if !bytes.Equal(joined, in) {
			t.Fatalf("Raw lines joined = %q, want %q", joined, in)
		}
	})
}

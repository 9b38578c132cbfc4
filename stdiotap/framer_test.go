package stdiotap

import (
	"bytes"
	"slices"
	"testing"

	"github.com/acptap/acptap/internal/stamp"
	"github.com/acptap/acptap/lane"
)

// frameChunks feeds data to a framer in chunks whose sizes cycle through
// sizes (the rest in one chunk if sizes is empty) and returns its Lines.
func frameChunks(data []byte, sizes []int, max int) []Line {
	var got []Line
	f := framer{stream: Stdout, max: max, emit: func(l Line) { got = append(got, l) }}
	at := stamp.NewClock().Frame()
	for i := 0; len(data) > 0; i++ {
		n := len(data)
		if len(sizes) > 0 {
			n = min(sizes[i%len(sizes)], n)
		}
		// Feed a copy that is clobbered afterwards, as a pump's reused
		// buffer is, to catch Lines aliasing it.
		chunk := append([]byte(nil), data[:n]...)
		f.write(chunk, at)
		for j := range chunk {
			chunk[j] = '#'
		}
		data = data[n:]
	}
	f.flush(at)
	return got
}

func TestFramer(t *testing.T) {
	inputs := []string{
		"",
		"\n",
		"\n\n\n",
		"a",
		"a\n",
		"ab\ncd",
		"ab\ncd\n",
		"\xff\xfe\n\xc3(\n",
		"{\"jsonrpc\":\"2.0\"}\r\n{}\n",
		"0123456789\n012345678\n01234567890\n0123456789012345678901234\n01234567890123456789",
	}
	for _, in := range inputs {
		for _, max := range []int{1, 2, 3, 10, defaultMaxLine} {
			want := refFrames(Stdout, []byte(in), max)
			for size := 0; size <= len(in); size++ {
				var sizes []int
				if size > 0 {
					sizes = []int{size}
				}
				got := frameChunks([]byte(in), sizes, max)
				checkFrames(t, "", got, want)
				if r := reassemble(got); !bytes.Equal(r, []byte(in)) {
					t.Fatalf("%q, max %d, chunks of %d: reassembled to %q", in, max, size, r)
				}
			}
		}
	}
}

// TestFramerHugeLine frames lines well past the handoff size, in chunks
// of a pump's read size, as a 64 MiB line arrives.
func TestFramerHugeLine(t *testing.T) {
	line := bytes.Repeat([]byte("0123456789abcdef"), (3*handoff+5)/16)
	data := append(append(append([]byte(nil), line...), '\n'), line...)
	for _, max := range []int{handoff, defaultMaxLine} {
		got := frameChunks(data, []int{bufSize, 1, bufSize - 1}, max)
		checkFrames(t, "", got, refFrames(Stdout, data, max))
	}
}

// FuzzFramer checks that any input, cut at any chunk boundaries, frames
// to the same Lines and reassembles to the input.
func FuzzFramer(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n\n{\"b\":2}"), []byte{1, 2, 3}, uint16(0))
	f.Add([]byte("abcdefghij\nklm\n"), []byte{4}, uint16(3))
	f.Add([]byte("\xff\n\xfe\xfd"), []byte{}, uint16(1))
	f.Add([]byte("aaaaaaaaaa"), []byte{0, 5, 0, 1}, uint16(4))
	f.Fuzz(func(t *testing.T, data, cuts []byte, maxSel uint16) {
		maxLine := defaultMaxLine
		if maxSel != 0 {
			maxLine = int(maxSel)%64 + 1
		}
		sizes := make([]int, len(cuts))
		for i, c := range cuts {
			sizes[i] = int(c) // zero: an empty write
		}
		if len(sizes) > 0 && slices.Max(sizes) == 0 {
			sizes = nil
		}
		got := frameChunks(data, sizes, maxLine)
		checkFrames(t, "", got, refFrames(Stdout, data, maxLine))
		if r := reassemble(got); !bytes.Equal(r, data) {
			t.Fatalf("reassembled to %q, want %q", r, data)
		}
		whole := frameChunks(data, nil, maxLine)
		checkFrames(t, "unchunked", whole, got)
	})
}

func TestStreamLane(t *testing.T) {
	for s, want := range map[Stream]lane.Lane{Stdin: lane.Editor, Stdout: lane.Agent, Stderr: lane.Stderr} {
		if got := s.Lane(); got != want {
			t.Errorf("%v.Lane() = %v, want %v", s, got, want)
		}
	}
}

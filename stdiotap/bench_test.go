package stdiotap

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/store"

	"github.com/acptap/acptap/internal/stamp"
)

// benchLine is the 1 KiB line of the pump benchmarks.
func benchLine() []byte {
	line := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"text":%q}}`, bytes.Repeat([]byte("x"), 1024)))
	return append(line[:1023], '\n')
}

// benchPipes writes b.N lines of benchLine into a pipe that copyFn copies
// into another, which is drained, and checks that copyFn framed them all
// unless it returns -1 (it does not frame).
func benchPipes(b *testing.B, copyFn func(src, dst *os.File) (lines int)) {
	line := benchLine()
	block := bytes.Repeat(line, bufSize/len(line))
	perBlock := len(block) / len(line)
	srcR, srcW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	dstR, dstW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer dstR.Close()
	go io.Copy(io.Discard, dstR)
	done := make(chan int)
	go func() {
		n := copyFn(srcR, dstW)
		srcR.Close()
		dstW.Close()
		done <- n
	}()
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for n := b.N; n > 0; {
		k := min(n, perBlock)
		if _, err := srcW.Write(block[:k*len(line)]); err != nil {
			b.Fatal(err)
		}
		n -= k
	}
	srcW.Close()
	if lines := <-done; lines >= 0 && lines != b.N {
		b.Fatalf("framed %d lines, want %d", lines, b.N)
	}
}

// tapePump runs a pump from src to dst that frames on a tape, and returns
// how many lines it framed.
func tapePump(src, dst *os.File) int {
	lines := 0
	fr := &framer{stream: Stdout, max: defaultMaxLine, emit: func(Line) { lines++ }}
	t := newTape([3]*framer{fr, fr, fr}, stamp.NewClock(), 0, nil, false)
	pump(src, dst, &flow{stream: Stdout, tape: t}, false)
	t.close()
	return lines
}

// BenchmarkPump measures a stream of 1 KiB lines through a pump between
// real pipes: forwarding only, forwarding and framing, and, as the
// baseline, io.Copy.
func BenchmarkPump(b *testing.B) {
	b.Run("copy", func(b *testing.B) {
		benchPipes(b, func(src, dst *os.File) int {
			io.Copy(struct{ io.Writer }{dst}, struct{ io.Reader }{src}) // no splice: a read/write loop like pump's
			return -1
		})
	})
	b.Run("forward", func(b *testing.B) {
		benchPipes(b, func(src, dst *os.File) int {
			pump(src, dst, &flow{}, false)
			return -1
		})
	})
	b.Run("frame", func(b *testing.B) { benchPipes(b, tapePump) })
}

// BenchmarkRecorder measures what acptap record does with the bytes of
// BenchmarkStdioThroughput (cmd/acptap) once they are forwarded, without
// forwarding them: 1 KiB lines in 64 KiB reads, each read put on the tape
// twice, as the editor's and as the agent's (cat echoes it), and framed,
// then masked as record masks them, then appended to a real store as
// record appends them, compressed and committed. MB/s counts each line
// once, as BenchmarkStdioThroughput does: it is the most that recording
// can keep up with.
func BenchmarkRecorder(b *testing.B) {
	line := append(bytes.Repeat([]byte("x"), 1023), '\n')
	read := bytes.Repeat(line, bufSize/len(line))
	perRead := len(read) / len(line)
	secrets := redact.New(append(os.Environ(), redact.TapSecret+"="+strings.Repeat("5e", 16)))

	run := func(b *testing.B, onLine func(Line), finish func()) {
		lines := 0
		count := func(l Line) {
			lines++
			onLine(l)
		}
		t := newTape([3]*framer{
			{stream: Stdin, max: defaultMaxLine, emit: count},
			{stream: Stdout, max: defaultMaxLine, emit: count},
		}, stamp.NewClock(), 0, nil, false)
		var in, out *block
		b.SetBytes(int64(len(line)))
		b.ResetTimer()
		for n := b.N; n > 0; {
			k := min(n, perRead)
			for st, blk := range []**block{&in, &out} {
				*blk = t.room(*blk)
				copy((*blk).buf[(*blk).tail:], read[:k*len(line)])
				switch _, w := t.put(Stream(st), *blk, k*len(line)); w {
				case wakeNow:
					t.wake()
				case wakeLater:
					t.arm()
				}
			}
			n -= k
		}
		t.disown(in)
		t.disown(out)
		t.close()
		if finish != nil {
			finish()
		}
		b.StopTimer()
		if lines != 2*b.N {
			b.Fatalf("framed %d lines, want %d", lines, 2*b.N)
		}
	}
	b.Run("frame", func(b *testing.B) { run(b, func(Line) {}, nil) })
	b.Run("mask", func(b *testing.B) {
		run(b, func(l Line) { secrets.Bytes(l.Data) }, nil)
	})
	b.Run("store", func(b *testing.B) {
		st, err := store.Open(filepath.Join(b.TempDir(), "bench.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		w, err := st.Create(store.Recording{Name: "bench", Created: time.Now()}, false)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		run(b, func(l Line) {
			w.Append(store.Event{Kind: store.KindFrame, Lane: l.Stream.Lane(), Offset: l.At.Sub(start), Data: secrets.Bytes(l.Data)})
			w.Throttle(DefaultMaxBacklog / 4) // as record does
		}, func() {
			if err := w.Finish(); err != nil {
				b.Fatal(err)
			}
		})
	})
}

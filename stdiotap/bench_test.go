package stdiotap

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"testing"
)

// BenchmarkPump measures a stream of 1 KiB lines through a pump between
// real pipes: forwarding only, forwarding and framing, and, as the
// baseline, io.Copy.
func BenchmarkPump(b *testing.B) {
	line := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"text":%q}}`, bytes.Repeat([]byte("x"), 1024)))
	line = append(line[:1023], '\n')
	block := bytes.Repeat(line, bufSize/len(line))
	perBlock := len(block) / len(line)

	run := func(b *testing.B, copyFn func(src, dst *os.File)) {
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
		done := make(chan struct{})
		go func() {
			defer close(done)
			copyFn(srcR, dstW)
			srcR.Close()
			dstW.Close()
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
		<-done
	}

	b.Run("copy", func(b *testing.B) {
		run(b, func(src, dst *os.File) {
			io.Copy(struct{ io.Writer }{dst}, struct{ io.Reader }{src}) // no splice: a read/write loop like pump's
		})
	})
	b.Run("forward", func(b *testing.B) {
		run(b, func(src, dst *os.File) {
			pump(src, dst, &lane{}, false)
		})
	})
	b.Run("frame", func(b *testing.B) {
		lines := 0
		run(b, func(src, dst *os.File) {
			fr := &framer{stream: Stdout, max: defaultMaxLine, emit: func(Line) { lines++ }}
			t := newTape([3]*framer{fr, fr, fr}, 0, nil)
			pump(src, dst, &lane{stream: Stdout, tape: t}, false)
			t.close()
		})
		if lines != b.N {
			b.Fatalf("framed %d lines, want %d", lines, b.N)
		}
	})
}

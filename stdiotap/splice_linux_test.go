package stdiotap

import (
	"os"
	"syscall"
	"testing"

	"github.com/acptap/acptap/internal/stamp"
)

// BenchmarkPumpSplice measures what tee(2) and splice(2) would save the
// forwarding of a stream between pipes, against the pump as it is: the
// same 1 KiB lines as BenchmarkPump, forwarded and framed on another
// goroutine, either read into the tape and written (the pump), or tee'd
// into a pipe that the framing goroutine reads and spliced to the
// destination, so that forwarded bytes never cross user space. It is how
// the splice path was weighed, and why the pump does not use it: the
// framing still reads every byte out of the tee'd pipe, a chunk costs
// three system calls instead of two, and on 2 cores the two came out
// within the noise of each other, while tee'd pipes would need the
// cross-stream order, the read deadlines of Wait and EPIPE redone.
func BenchmarkPumpSplice(b *testing.B) {
	b.Run("tape", func(b *testing.B) { benchPipes(b, tapePump) })
	b.Run("tee-splice", func(b *testing.B) {
		benchPipes(b, func(src, dst *os.File) int {
			var side [2]int
			if err := syscall.Pipe2(side[:], syscall.O_CLOEXEC); err != nil {
				b.Fatal(err)
			}
			// As much room as the kernel allows, so that tee rarely
			// waits for the framing goroutine.
			syscall.Syscall(syscall.SYS_FCNTL, uintptr(side[1]), 1031 /* F_SETPIPE_SZ */, 1<<20)
			lines := make(chan int)
			go func() {
				n := 0
				clock := stamp.NewClock()
				fr := &framer{stream: Stdout, max: defaultMaxLine, emit: func(Line) { n++ }}
				buf := make([]byte, bufSize)
				for {
					k, err := syscall.Read(side[0], buf)
					if k <= 0 || err != nil {
						break
					}
					fr.write(buf[:k], clock.Frame())
				}
				syscall.Close(side[0])
				lines <- n
			}()
			sfd, dfd := int(src.Fd()), int(dst.Fd())
			for {
				n, err := syscall.Tee(sfd, side[1], bufSize, 0)
				if n <= 0 || err != nil {
					break
				}
				for left := n; left > 0; {
					m, err := syscall.Splice(sfd, nil, dfd, nil, int(left), 1 /* SPLICE_F_MOVE */)
					if m <= 0 || err != nil {
						b.Fatalf("splice: %d, %v", m, err)
					}
					left -= m
				}
			}
			syscall.Close(side[1])
			return <-lines
		})
	})
}

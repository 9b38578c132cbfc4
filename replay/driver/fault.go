package driver

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// A FaultKind is a way the editor side breaks one of its frames on the
// way to the agent, as editors do in the field.
type FaultKind uint8

const (
	// FaultDrop does not write the frame: the agent never gets it, and
	// Run goes on as if it had been written.
	FaultDrop FaultKind = iota + 1
	// FaultDup writes the frame twice, in one write.
	FaultDup
	// FaultDelay waits Fault.Delay before writing the frame. The wait is
	// the editor's, not the agent's: it does not count toward
	// Options.Timeout.
	FaultDelay
	// FaultSplit writes the frame in two writes: its first Fault.Bytes
	// bytes, then, after splitPause, the rest with its newline. The
	// pause does not count toward Options.Timeout.
	FaultSplit
	// FaultSever writes the first half of the frame (rounded up), without
	// its newline, then closes the agent's stdin, as an editor that
	// crashes mid-write does.
	FaultSever
	// FaultGarbage writes a line that is not JSON (garbageLine) before
	// the frame, in the same write.
	FaultGarbage
	// FaultClose closes the agent's stdin instead of writing the frame.
	FaultClose
)

// splitPause is the pause between the two writes of a FaultSplit: long
// enough that the agent's read returns the first part alone.
const splitPause = 100 * time.Millisecond

// garbageLine is the line a FaultGarbage writes before its frame.
const garbageLine = "acptap stdio fault: this line is not JSON"

// A Fault is a failure injected into one recorded editor frame (see
// Options.Faults). The zero value is no fault, and is refused.
type Fault struct {
	Kind FaultKind
	// Delay is how long a FaultDelay waits, more than 0.
	Delay time.Duration
	// Bytes is how many bytes of the frame a FaultSplit writes first, 1
	// or more; a line of fewer bytes is written whole, then its newline.
	Bytes int
}

// faultSyntax is the grammar of fault specs, for error messages.
const faultSyntax = "drop, dup, delay:DURATION, split:BYTES, sever, garbage or close"

// plainFaults are the faults that take no argument, by name.
var plainFaults = map[string]FaultKind{"drop": FaultDrop, "dup": FaultDup, "sever": FaultSever, "garbage": FaultGarbage, "close": FaultClose}

// ParseFault parses a fault spec: drop, dup, delay:DURATION (as
// time.ParseDuration reads it, more than 0), split:BYTES (1 or more),
// sever, garbage or close. The "FRAME=" that names the frame is the
// caller's to split off.
func ParseFault(spec string) (Fault, error) {
	name, arg, hasArg := strings.Cut(spec, ":")
	bad := func(why string) (Fault, error) {
		return Fault{}, fmt.Errorf("%w %q: %s", ErrInvalidFault, spec, why)
	}
	switch name {
	case "drop", "dup", "sever", "garbage", "close":
		if hasArg {
			return bad(name + " takes no argument")
		}
		return Fault{Kind: plainFaults[name]}, nil
	case "delay":
		d, err := time.ParseDuration(arg)
		if !hasArg || err != nil || d <= 0 {
			return bad("delay needs a duration more than 0, as in delay:2s")
		}
		return Fault{Kind: FaultDelay, Delay: d}, nil
	case "split":
		n, err := strconv.Atoi(arg)
		if !hasArg || err != nil || n < 1 || len(arg) > 9 {
			return bad("split needs the number of bytes of the first write, 1 or more, as in split:10")
		}
		return Fault{Kind: FaultSplit, Bytes: n}, nil
	}
	return bad("want " + faultSyntax)
}

// String returns f's spec, which ParseFault reads back as f.
func (f Fault) String() string {
	switch f.Kind {
	case FaultDrop:
		return "drop"
	case FaultDup:
		return "dup"
	case FaultDelay:
		return "delay:" + f.Delay.String()
	case FaultSplit:
		return "split:" + strconv.Itoa(f.Bytes)
	case FaultSever:
		return "sever"
	case FaultGarbage:
		return "garbage"
	case FaultClose:
		return "close"
	}
	return fmt.Sprintf("fault(%d)", f.Kind)
}

// validate reports why f cannot be injected, if it cannot.
func (f Fault) validate() error {
	bad := func(why string) error {
		return fmt.Errorf("%w %s: %s", ErrInvalidFault, f, why)
	}
	switch f.Kind {
	case FaultDelay:
		if f.Delay <= 0 {
			return bad("the delay must be more than 0")
		}
	case FaultSplit:
		if f.Bytes < 1 {
			return bad("the first write must have 1 byte or more")
		}
	case FaultDrop, FaultDup, FaultSever, FaultGarbage, FaultClose:
	default:
		return bad("unknown kind; want " + faultSyntax)
	}
	return nil
}

// closes reports whether f closes the agent's stdin.
func (f *Fault) closes() bool {
	return f != nil && (f.Kind == FaultClose || f.Kind == FaultSever)
}

// pause is how long writing a line with fault f waits of its own
// accord, which Options.Timeout does not count.
func (f *Fault) pause() time.Duration {
	switch {
	case f == nil:
		return 0
	case f.Kind == FaultDelay:
		return f.Delay
	case f.Kind == FaultSplit:
		return splitPause
	}
	return 0
}

// severAt is how many bytes of data, a line without its newline, a
// FaultSever writes: half, rounded up.
func severAt(data []byte) int { return (len(data) + 1) / 2 }

// splitAt is how many bytes of data, a line without its newline, the
// first write of a FaultSplit of n bytes writes.
func splitAt(data []byte, n int) int { return min(n, len(data)) }

// sent returns the lines, without '\n', that writing data with fault f
// writes, whole or cut: what Result.Sent records.
func (f *Fault) sent(data []byte) [][]byte {
	if f == nil {
		return [][]byte{data}
	}
	switch f.Kind {
	case FaultDrop, FaultClose:
		return nil
	case FaultDup:
		return [][]byte{data, data}
	case FaultGarbage:
		return [][]byte{[]byte(garbageLine), data}
	case FaultSever:
		return [][]byte{data[:severAt(data)]}
	}
	return [][]byte{data}
}

// errStopped is what an abandoned faulted write returns: Run ended
// while it waited to write.
var errStopped = errors.New("driver: the run ended before the write")

// deliver writes line, a frame with its '\n', to w as fault f says
// (FaultDrop is never delivered), waiting as it says unless stop is
// closed first. A FaultClose or FaultSever closes w, an io.Closer then.
func deliver(w io.Writer, line []byte, f *Fault, stop <-chan struct{}) error {
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-stop:
			return false
		}
	}
	write := func(b []byte) error {
		_, err := w.Write(b)
		return err
	}
	closeIt := func() error {
		c, ok := w.(io.Closer)
		if !ok {
			return fmt.Errorf("%w: %s needs an agent's stdin Run can close", ErrInvalidFault, f)
		}
		return c.Close()
	}
	if f == nil {
		return write(line)
	}
	data := line[:len(line)-1]
	switch f.Kind {
	case FaultDup:
		return write(append(append(make([]byte, 0, 2*len(line)), line...), line...))
	case FaultDelay:
		if !wait(f.Delay) {
			return errStopped
		}
		return write(line)
	case FaultSplit:
		n := splitAt(data, f.Bytes)
		if err := write(line[:n]); err != nil {
			return err
		}
		if !wait(splitPause) {
			return errStopped
		}
		return write(line[n:])
	case FaultSever:
		if n := severAt(data); n > 0 {
			if err := write(line[:n]); err != nil {
				return err
			}
		}
		return closeIt()
	case FaultGarbage:
		return write(append([]byte(garbageLine+"\n"), line...))
	case FaultClose:
		return closeIt()
	}
	return write(line)
}

// Package stdiotap runs an agent as a child process, passing its standard
// input, output and error through byte for byte while framing each
// direction into lines for a recorder.
package stdiotap

import (
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/stamp"
)

// Stream names one of the agent's standard streams by its file
// descriptor's number. What a recording calls it is its Lane.
type Stream uint8

const (
	Stdin  Stream = iota // editor → agent
	Stdout               // agent → editor
	Stderr               // the agent's diagnostics
)

// Lane returns the lane a recording keeps the stream's lines in:
// lane.Editor for stdin, lane.Agent for stdout, lane.Stderr for stderr.
func (s Stream) Lane() lane.Lane {
	switch s {
	case Stdin:
		return lane.Editor
	case Stdout:
		return lane.Agent
	}
	return lane.Stderr
}

var streamNames = [...]string{Stdin: "stdin", Stdout: "stdout", Stderr: "stderr"}

// String returns "stdin", "stdout" or "stderr".
func (s Stream) String() string {
	if int(s) < len(streamNames) {
		return streamNames[s]
	}
	return fmt.Sprintf("stream(%d)", uint8(s))
}

// A Line is one frame of a stream: a line without its '\n', or a piece of
// a line longer than Config.MaxLine. Joining the Data of a stream's Lines,
// with a '\n' after each Line that is neither Continued nor NoNewline,
// gives back exactly the bytes of the stream.
type Line struct {
	Stream Stream

	// Stamp is the Stamp that the read that completed the frame took
	// from Config.Clock as it returned, before the chunk was forwarded:
	// the frame's place among every event stamped from that clock, and
	// its time. The frames of one read share it.
	Stamp stamp.Stamp

	// At is Stamp's time. It carries a monotonic clock reading, so
	// At.Sub(Session.Started()) is immune to wall clock changes.
	At time.Time

	// Data is the line without its '\n'; empty, not nil, for a blank line.
	// The receiver owns it.
	Data []byte

	// NoNewline reports that the stream ended without a final '\n'. Only
	// the last Line of a stream can have it.
	NoNewline bool

	// Continued reports that the line is longer than Config.MaxLine:
	// Data holds its first MaxLine bytes, and the next Line of the same
	// stream continues it.
	Continued bool
}

// Config says how to run an agent. Only Argv is required.
type Config struct {
	// Argv is the agent command. A name without a slash is looked up in
	// this process's PATH, as os/exec does; a relative path with a slash
	// is relative to Dir.
	Argv []string

	// Dir is the agent's working directory. If empty, the current
	// directory is used.
	Dir string

	// Env is the agent's environment. If nil, os.Environ() is used.
	Env []string

	// Stdin is the editor's side of the agent's standard input. If nil,
	// os.Stdin is used. A read from it that is still blocked when the
	// agent exits does not delay Wait; whatever it returns later is
	// discarded.
	Stdin io.Reader

	// Stdout receives the agent's standard output. If nil, os.Stdout is
	// used. If a write fails (the editor went away: EPIPE), forwarding
	// on this stream stops but reading does not: the agent's output is
	// still drained and framed, so the agent never blocks on a full pipe.
	// While the session runs SIGPIPE is caught, so that a broken standard
	// output or error of this process fails with EPIPE rather than
	// killing it.
	Stdout io.Writer

	// Stderr receives the agent's standard error. If nil, os.Stderr is
	// used. Write failures are handled as for Stdout.
	Stderr io.Writer

	// OnLine, if not nil, is called with every framed Line. Framing is
	// off the forwarding path: a chunk is forwarded as soon as its read
	// returns, and framed by a goroutine of the session's own, which
	// calls OnLine one call at a time, in the order the chunks were read
	// across all three streams (a chunk read before another was
	// forwarded is framed before it: a response never precedes its
	// request), and never after Wait has returned. OnLine may take its
	// time: the streams keep moving while the Lines it has yet to see
	// wait, up to MaxBacklog bytes of them. If nil, nothing is framed.
	OnLine func(Line)

	// MaxBacklog bounds the bytes read and forwarded but not yet
	// framed and handed to OnLine (rounded to the session's buffers, of
	// up to 1 MiB each). When framing is that far behind, the streams
	// wait for it: no byte is ever left unframed. If zero or negative,
	// DefaultMaxBacklog (256 MiB) is used; at least MinBacklog (256 KiB) is.
	MaxBacklog int

	// OnBacklog, if not nil, is told when framing falls behind
	// forwarding by a quarter of MaxBacklog, and when it has caught up
	// again (nothing is left to frame); a burst that falls behind again
	// is told again. It is called one call at a time, in order, from a
	// goroutine that neither forwards nor frames, and never after Wait
	// has returned.
	OnBacklog func(Backlog)

	// RewriteStdin, if not nil, is given each whole line of Stdin, without
	// its newline, and returns the line to forward to the agent in its
	// place: what is framed and handed to OnLine is the line as read. A
	// line is forwarded once its newline has come (a last line without
	// one, when Stdin ends); one longer than MaxRewrite is forwarded as
	// it comes, unchanged. It is called from one goroutine.
	RewriteStdin func(line []byte) []byte

	// FrameAtOnce frames each chunk as soon as it is forwarded. By
	// default a chunk that finds framing idle is framed up to a
	// millisecond later, with whatever follows it by then, so that an
	// exchange of short messages does not pay for framing each alone;
	// a caller that answers the Lines it is handed (replay's driver
	// does) sets it, or waits that much longer for each.
	FrameAtOnce bool

	// Grace is how long the agent may take to exit on its own. Once the
	// editor closes Stdin, the agent's stdin is closed; if the agent is
	// still running after Grace (some agents never exit on stdin EOF)
	// its process group gets SIGTERM, and after another Grace SIGKILL.
	// After the agent has exited, Wait gives its stdout and stderr up to
	// Grace to reach EOF (a process that inherited them may keep them
	// open), then stops reading them, waits up to another Grace for the
	// pumps, and returns. If zero or negative, DefaultGrace is used.
	Grace time.Duration

	// MaxLine is the longest Line.Data; a longer line is framed in
	// pieces marked Continued. It bounds the memory held for one line.
	// If zero or negative, 256 MiB is used.
	MaxLine int

	// Clock stamps each chunk as its read returns (Line.Stamp), so that
	// the Lines take their places among other events stamped from it, in
	// this process or another sharing its word. If nil, a clock of the
	// session's own is used.
	Clock *stamp.Clock

	// ForwardSignals relays SIGINT, SIGTERM and SIGHUP received by this
	// process to the agent's process group until Wait returns, instead
	// of letting them terminate this process.
	ForwardSignals bool
}

// DefaultGrace is the Grace used when Config.Grace is zero.
const DefaultGrace = 3 * time.Second

const defaultMaxLine = 256 << 20

// Exit is how the agent ended.
type Exit struct {
	// Code is the agent's exit status, or 128 plus the signal number if
	// a signal killed it, as a shell reports it.
	Code int

	// Signal is the signal that killed the agent, or 0 if it exited.
	Signal syscall.Signal
}

// String returns "exit status 3" or "killed by SIGTERM".
func (e Exit) String() string {
	if e.Signal != 0 {
		return "killed by " + SignalName(e.Signal)
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

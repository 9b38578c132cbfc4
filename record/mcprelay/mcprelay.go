// Package mcprelay runs an MCP server that an agent starts over stdio between the agent and the server, passing its stdio through and reporting each line to the acptap record that rewrote the agent's command.
//
// acptap record gives the agent, in place of an MCP server's command in
// session/new, the command `acptap __mcp-relay SOCKET INDEX -- COMMAND
// ARGS...`. The relay connects to the recorder's unix socket SOCKET,
// names the server by INDEX, receives the recording's shared clock, starts
// COMMAND and copies the agent's writes to the server's stdin and the
// server's stdout and stderr back, byte for byte. Each line, as its last
// byte is read and before it is passed on, takes a stamp from the shared
// clock, which places it among the recording's other events, and is sent
// to the recorder. If the recorder cannot be reached, or goes away, the
// server runs on unrecorded: the relay never stands in the agent's way.
package mcprelay

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"github.com/acptap/acptap/internal/stamp"
	"github.com/acptap/acptap/lane"
	"github.com/acptap/acptap/proxy/tapproc"
)

// Command is the name of the relay's command, acptap's first argument.
const Command = "__mcp-relay"

// hello is the first line a relay sends: the protocol and the server's
// index.
const hello = "acptap-mcp-relay 1 "

// MaxPiece is the longest piece of a line a record carries; a longer line
// is sent in pieces, all but the last Continued.
const MaxPiece = 16 << 20

// A Record is one line, or piece of a line, of an MCP server's stream, as
// a relay sends it: [dir][flags][stamp, 8 bytes][length, 4 bytes][data].
type Record struct {
	Dir       lane.MCPDir
	Continued bool // a piece of a line that goes on in the next record
	NoNewline bool // the stream ended without a newline after it
	Stamp     stamp.Stamp
	Data      []byte
}

const (
	flagContinued = 1 << iota
	flagNoNewline
)

// appendRecord appends the wire form of r to dst.
func appendRecord(dst []byte, r Record) []byte {
	var flags byte
	if r.Continued {
		flags |= flagContinued
	}
	if r.NoNewline {
		flags |= flagNoNewline
	}
	dst = append(dst, byte(r.Dir), flags)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Stamp))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Data)))
	return append(dst, r.Data...)
}

// ReadRecord reads one record from r.
func ReadRecord(r io.Reader) (Record, error) {
	var head [14]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return Record{}, err
	}
	n := binary.BigEndian.Uint32(head[10:])
	if n > MaxPiece {
		return Record{}, fmt.Errorf("mcp relay record of %d bytes, more than %d", n, MaxPiece)
	}
	if head[0] > byte(lane.ServerStderr) {
		return Record{}, fmt.Errorf("mcp relay record of stream %d", head[0])
	}
	rec := Record{
		Dir:       lane.MCPDir(head[0]),
		Continued: head[1]&flagContinued != 0,
		NoNewline: head[1]&flagNoNewline != 0,
		Stamp:     stamp.Stamp(binary.BigEndian.Uint64(head[2:])),
		Data:      make([]byte, n),
	}
	if _, err := io.ReadFull(r, rec.Data); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// ReadHello reads a relay's first line and returns the server's index.
func ReadHello(r *bufio.Reader) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	rest, ok := bytes.CutPrefix([]byte(line[:len(line)-1]), []byte(hello))
	if !ok {
		return 0, fmt.Errorf("not an mcp relay: %q", line)
	}
	i, err := strconv.Atoi(string(rest))
	if err != nil || i < 0 || i >= lane.MaxMCPServers {
		return 0, fmt.Errorf("mcp relay of server %q", rest)
	}
	return i, nil
}

// reporter sends records to the recorder, once at a time; after a
// failed write it sends nothing more.
type reporter struct {
	mu     sync.Mutex // guards conn's writes, buf and broken
	conn   net.Conn   // nil when there is no recorder
	clock  *stamp.Clock
	buf    []byte
	broken bool
}

// line stamps and sends one line, or its pieces.
func (r *reporter) line(dir lane.MCPDir, data []byte, noNewline bool) {
	if r == nil || r.conn == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken {
		return
	}
	st := r.clock.Exchange()
	for {
		piece := data
		more := len(piece) > MaxPiece
		if more {
			piece = piece[:MaxPiece]
		}
		r.buf = appendRecord(r.buf[:0], Record{Dir: dir, Continued: more, NoNewline: noNewline && !more, Stamp: st, Data: piece})
		if _, err := r.conn.Write(r.buf); err != nil {
			r.broken = true
			return
		}
		if !more {
			return
		}
		data = data[MaxPiece:]
		st = r.clock.Exchange()
	}
}

// pump copies src to dst, reporting each line of it as dir before the
// chunk that completes it is written.
func (r *reporter) pump(dir lane.MCPDir, src io.Reader, dst io.Writer) {
	buf := make([]byte, 64<<10)
	var line []byte
	broken := false
	for {
		n, err := src.Read(buf)
		chunk := buf[:n]
		for len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				line = append(line, chunk...)
				if len(line) > 4*MaxPiece {
					// No line of MCP is that long; report what came.
					r.line(dir, line, true)
					line = line[:0]
				}
				break
			}
			line = append(line, chunk[:i]...)
			r.line(dir, line, false)
			line = line[:0]
			chunk = chunk[i+1:]
		}
		if n > 0 && !broken {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				broken = true
			}
		}
		if err != nil {
			if len(line) > 0 {
				r.line(dir, line, true)
			}
			return
		}
	}
}

// Main runs the relay: args are SOCKET INDEX -- COMMAND [ARGS...]. It
// returns the server's exit status, 128+n if signal n ended it, or 2 for
// bad arguments and 127 for a command that cannot start, as a shell
// does.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 4 || args[2] != "--" {
		fmt.Fprintf(stderr, "acptap %s: usage: acptap %s SOCKET INDEX -- COMMAND [ARGS...] (acptap record runs it; it is not for people)\n", Command, Command)
		return 2
	}
	socket, index, argv := args[0], args[1], args[3:]
	rep := connect(socket, index, stderr)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = nil
	serverIn, err := cmd.StdinPipe()
	if err == nil {
		var outR, errR io.ReadCloser
		if outR, err = cmd.StdoutPipe(); err == nil {
			if errR, err = cmd.StderrPipe(); err == nil {
				err = cmd.Start()
				if err == nil {
					return relay(cmd, rep, stdin, stdout, stderr, serverIn, outR, errR)
				}
			}
		}
	}
	msg := fmt.Sprintf("acptap: MCP server %s: %v", argv[0], err)
	fmt.Fprintln(stderr, msg)
	rep.line(lane.ServerStderr, []byte(msg), false)
	rep.close()
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return 127
	}
	return 126
}

// relay passes the server's stdio through until it exits and its output
// ends, and returns its exit status.
func relay(cmd *exec.Cmd, rep *reporter, stdin io.Reader, stdout, stderr io.Writer, serverIn io.WriteCloser, outR, errR io.Reader) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	go func() {
		rep.pump(lane.ToServer, stdin, serverIn)
		serverIn.Close() // the agent closed the server's stdin
	}()
	var outputs sync.WaitGroup
	outputs.Go(func() { rep.pump(lane.FromServer, outR, stdout) })
	outputs.Go(func() { rep.pump(lane.ServerStderr, errR, stderr) })
	outputs.Wait()
	err := cmd.Wait()
	rep.close()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// close ends the reports.
func (r *reporter) close() {
	if r == nil || r.conn == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conn.Close()
	r.broken = true
}

// connect reaches the recorder and returns the reporter, nil when it
// cannot (it says why on stderr: the server runs unrecorded).
func connect(socket, index string, stderr io.Writer) *reporter {
	fail := func(err error) *reporter {
		fmt.Fprintf(stderr, "acptap: MCP server %s runs unrecorded: %v\n", index, err)
		return nil
	}
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return fail(err)
	}
	uc := conn.(*net.UnixConn)
	if _, err := uc.Write([]byte(hello + index + "\n")); err != nil {
		conn.Close()
		return fail(err)
	}
	clock, err := receiveClock(uc)
	if err != nil {
		conn.Close()
		return fail(err)
	}
	return &reporter{conn: conn, clock: clock}
}

// receiveClock reads the recording's shared clock, a file descriptor the
// recorder sends with one byte.
func receiveClock(uc *net.UnixConn) (*stamp.Clock, error) {
	buf := make([]byte, 1)
	oob := make([]byte, syscall.CmsgSpace(4))
	_, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("receiving the recording's clock: %w", err)
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("receiving the recording's clock: no file (%v)", err)
	}
	fds, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, fmt.Errorf("receiving the recording's clock: no file (%v)", err)
	}
	return tapproc.OpenClock(os.NewFile(uintptr(fds[0]), "acptap-clock"))
}

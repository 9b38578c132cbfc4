package replay

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"sync"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/replay/llmserver"
)

// A spool keeps lines in a temporary file, and in memory only where each
// starts, so that a replay holds neither the recording's frames nor the
// agent's output: the driver and the comparison read them back by index.
// The file is removed as soon as it is open where the system allows it
// (it then goes with the process, however that ends), else by close.
//
// Lines are added from one goroutine; reads, which any goroutine may
// make, see the lines added before the last flush.
type spool struct {
	f      *os.File
	path   string // to remove on close; "" once removed
	w      *bufio.Writer
	mu     sync.Mutex // guards err
	err    error      // the first write error
	starts []int64    // where each line starts
	end    int64      // where the next line starts
}

// newSpool creates an empty spool in the system's temporary directory.
func newSpool() (*spool, error) {
	f, err := os.CreateTemp("", "acptap-replay-spool-")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSpool, err)
	}
	s := &spool{f: f, path: f.Name(), w: bufio.NewWriterSize(f, 256<<10)}
	if os.Remove(s.path) == nil {
		s.path = ""
	}
	return s, nil
}

// add appends a line, made of parts. A write error is kept for flush to
// return.
func (s *spool) add(parts ...[]byte) {
	s.starts = append(s.starts, s.end)
	for _, p := range parts {
		s.end += int64(len(p))
		if _, err := s.w.Write(p); err != nil {
			s.mu.Lock()
			if s.err == nil {
				s.err = fmt.Errorf("%w: %v", ErrSpool, err)
			}
			s.mu.Unlock()
		}
	}
}

// flush writes what add buffered and returns the first write error.
func (s *spool) flush() error {
	err := s.w.Flush()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil && err != nil {
		s.err = fmt.Errorf("%w: %v", ErrSpool, err)
	}
	return s.err
}

// len returns how many lines were added.
func (s *spool) len() int { return len(s.starts) }

// lineEnd returns where line i ends.
func (s *spool) lineEnd(i int) int64 {
	if i+1 < len(s.starts) {
		return s.starts[i+1]
	}
	return s.end
}

// flushed reports whether line i is in the file, not in the buffer.
func (s *spool) flushed(i int) bool {
	return s.lineEnd(i) <= s.end-int64(s.w.Buffered())
}

// line reads line i back, into a new slice.
func (s *spool) line(i int) ([]byte, error) {
	b := make([]byte, s.lineEnd(i)-s.starts[i])
	if _, err := s.f.ReadAt(b, s.starts[i]); err != nil {
		return nil, fmt.Errorf("%w: reading line %d back: %v", ErrSpool, i, err)
	}
	return b, nil
}

// close closes and removes the file. The spool is not used after.
func (s *spool) close() {
	s.f.Close()
	if s.path != "" {
		os.Remove(s.path)
		s.path = ""
	}
}

// frameSpool is editor and agent frames in order: a recording's, as the
// driver reads them, or a replay's, as the comparison does (a
// lane.Lines).
type frameSpool struct {
	*spool
	lanes []lane.Lane // each frame's lane
}

func (fs *frameSpool) add(l lane.Lane, data []byte) {
	fs.lanes = append(fs.lanes, l)
	fs.spool.add(data)
}

func (fs *frameSpool) Len() int { return fs.spool.len() }

func (fs *frameSpool) Line(i int) (lane.Line, error) {
	data, err := fs.line(i)
	return lane.Line{Lane: fs.lanes[i], Data: data}, err
}

// exchangeSpool is a recording's LLM exchanges, as a replay serves them:
// exchange n (numbered from 1, as llmserver numbers them) is line n-1, its
// request body, decoded, then the rest of its stored form
// (exchange.UnmarshalHead), so that serving an exchange decodes its
// request body no second time.
type exchangeSpool struct {
	*spool
	bodies []int // the length of each exchange's request body; -1 for none (nil)

	// loaded, if not nil, is called with each exchange load returns and
	// its number; tests watch the loads with it.
	loaded func(n int, x *exchange.Exchange)
}

// add appends the next exchange, its request body and the rest of its
// stored form.
func (xs *exchangeSpool) add(body, rest []byte) {
	n := len(body)
	if body == nil {
		n = -1
	}
	xs.bodies = append(xs.bodies, n)
	xs.spool.add(body, rest)
}

// load reads back and decodes exchange n.
func (xs *exchangeSpool) load(n int) (*exchange.Exchange, error) {
	if n < 1 || n > len(xs.bodies) {
		return nil, fmt.Errorf("%w: no exchange %d was spooled", ErrSpool, n)
	}
	line, err := xs.line(n - 1)
	if err != nil {
		return nil, err
	}
	body := xs.bodies[n-1]
	x, err := exchange.Unmarshal(line[max(body, 0):])
	if err != nil {
		return nil, err
	}
	x.RequestBody = nil
	if body >= 0 {
		x.RequestBody = line[:body:body]
	}
	if xs.loaded != nil {
		xs.loaded(n, x)
	}
	return x, nil
}

// spooledExchanges are a recording's exchanges as its LLM server takes
// them (llmserver.Exchanges): their heads in memory, the whole exchanges
// in the spool.
type spooledExchanges struct {
	heads []llmserver.Recorded
	spool *exchangeSpool
}

func (s spooledExchanges) Len() int                      { return len(s.heads) }
func (s spooledExchanges) Head(n int) llmserver.Recorded { return s.heads[n-1] }

func (s spooledExchanges) Load(n int) (*exchange.Exchange, error) { return s.spool.load(n) }

// spooledLines are some of the frames of a frameSpool, as the comparison
// reads them (a lane.Lines).
type spooledLines struct {
	s     *frameSpool
	index []int // the frames, by their index in s
}

func (l spooledLines) Len() int { return len(l.index) }

func (l spooledLines) Line(i int) (lane.Line, error) { return l.s.Line(l.index[i]) }

// compared reports whether a line takes part in the comparison: blank
// lines carry nothing, and agents differ in emitting them.
func compared(line []byte) bool { return len(bytes.TrimSpace(line)) > 0 }

// memLines are agent lines in memory, as the comparison reads them (a
// lane.Lines), blank lines left out.
func memLines(lines [][]byte) lane.Lines {
	var frames []lane.Line
	for _, l := range lines {
		if compared(l) {
			frames = append(frames, lane.Line{Lane: lane.Agent, Data: l})
		}
	}
	return lane.Slice(frames)
}

package mcpstandin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"

	"github.com/acptap/acptap/normalize"
)

// live is a stand-in that runs the real server (replay --live-mcp) and
// compares each of its answers with the recorded answer of the request,
// matched as the stand-in matches it, passing the real one on.
type live struct {
	*server

	mu      sync.Mutex        // guards pending, the server's entries and the log's writes
	pending map[string]*entry // the agent's requests in flight, by id, with their recorded twin (nil for none)
}

// serveLive runs argv as the server between the agent's stdio and the
// server's, and returns the server's exit status.
func (s *server) serveLive(argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	l := &live{server: s, pending: map[string]*entry{}}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	var out io.ReadCloser
	if err == nil {
		if out, err = cmd.StdoutPipe(); err == nil {
			err = cmd.Start()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "acptap: MCP server %s: %v\n", argv[0], err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	go func() {
		l.forward(stdin, in, l.request)
		in.Close()
	}()
	l.forward(out, stdout, l.answer)
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	return 0
}

// forward copies src to dst line by line, each whole line seen by see
// before it is passed on.
func (l *live) forward(src io.Reader, dst io.Writer, see func([]byte)) {
	br := bufio.NewReaderSize(src, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			see(bytes.TrimSpace(line))
			if _, werr := dst.Write(line); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// request notes a request of the agent's and its recorded twin.
func (l *live) request(line []byte) {
	var m envelope
	if json.Unmarshal(line, &m) != nil || m.Method == "" || m.ID == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.match(m)
	if e == nil {
		l.note(logLine{Unanswered: summarize(m)})
	} else if !e.served {
		e.served = true
		l.note(logLine{Served: e.n})
	}
	l.keepCall(m, e)
	l.pending[string(m.ID)] = e
}

// answer compares an answer of the server's with the recorded answer of
// its request.
func (l *live) answer(line []byte) {
	var m struct {
		envelope
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != "" || m.ID == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.pending[string(m.ID)]
	delete(l.pending, string(m.ID))
	if !ok || e == nil || e.answer == nil {
		return
	}
	norm := func(v map[string]json.RawMessage) any {
		var out any
		json.Unmarshal(l.normalizedAnswer(v), &out)
		return out
	}
	liveAnswer := map[string]json.RawMessage{"result": m.Result, "error": m.Error}
	if l.plan.Calibrating {
		// Calibrate learns what varies; what does not, it reports.
		l.note(logLine{Answer: &pairLog{N: e.n, Live: l.normalizedAnswer(liveAnswer)}})
		return
	}
	diffs := normalize.Mismatches(norm(e.answer), norm(liveAnswer))
	if len(diffs) == 0 {
		return
	}
	l.note(logLine{Drift: &drift{Request: e.summary, Path: diffs[0].Path, Recorded: diffs[0].Recorded, Live: diffs[0].Live, More: len(diffs) - 1}})
}

// drift is a difference between a live server's answer and the recorded.
type drift struct {
	Request  string `json:"request"`
	Path     string `json:"path"`
	Recorded any    `json:"recorded"`
	Live     any    `json:"live"`
	More     int    `json:"more,omitempty"`
}

package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/internal/chatapi"
)

var shapes = []string{"editor", "echo", "echoreq", "agent", "llm", "mix"}

// editorMain writes the editor frames of a session of the shape, of
// about mib MiB in all, to stdout.
func editorMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bigshape editor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	shape := fs.String("shape", "", "the shape: "+strings.Join(shapes, ", "))
	mib := fs.Float64("mib", 0, "the size of the session, frames both ways and LLM bodies, in MiB")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *mib <= 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	w := bufio.NewWriterSize(stdout, 64<<10)
	if err := writeSession(w, *shape, int64(*mib*(1<<20))); err != nil {
		fmt.Fprintf(stderr, "bigshape editor: %v\n", err)
		return 2
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "bigshape editor: %v\n", err)
		return 1
	}
	return 0
}

// session writes a session's editor frames, and counts the bytes of the
// session they make, the agent's answers and the LLM's included.
type session struct {
	w               io.Writer
	nextID, n, turn int
	llmTurn         int
	err             error
}

func (s *session) frame(b []byte) {
	if s.err == nil {
		_, s.err = s.w.Write(b)
	}
}

func (s *session) id() int { s.nextID++; return s.nextID }

// The units of the shapes, each returning the bytes it adds to the
// session.
func (s *session) put() int64 {
	s.n++
	req := putRequest(s.n)
	s.frame(req)
	resp := line(acp.EncodeResult(putID(s.n), map[string]any{"key": fmt.Sprintf("k%d", s.n), "stored": frameSize}))
	return int64(len(req) + len(resp))
}

func (s *session) echo() int64 {
	s.n++
	b := echoNotification(s.n)
	s.frame(b)
	return 2 * int64(len(b))
}

func (s *session) echoReq() int64 {
	s.n++
	b := echoRequest(s.n)
	s.frame(b)
	return 2 * int64(len(b))
}

func (s *session) updates(n int) int64 {
	s.turn++
	req := promptRequest(s.id(), updatesPrompt(s.turn, n))
	s.frame(req)
	return int64(len(req)) + int64(n)*int64(len(update(1, 0))) + 60
}

func (s *session) llm() int64 {
	s.llmTurn++
	req := promptRequest(s.id(), llmPrompt(s.llmTurn))
	s.frame(req)
	return int64(len(req)) + llmTurnBytes + 60
}

// llmTurnBytes is what an LLM turn adds besides the prompt: the request
// and response bodies and the message chunks, once the window is full.
var llmTurnBytes = func() int64 {
	msgs := []chatapi.Message{{Role: "system", Content: systemPrompt}}
	for t := range llmWindow + 1 {
		msgs = append(msgs, chatapi.Message{Role: "user", Content: llmPrompt(t + 1)})
		if t < llmWindow {
			msgs = append(msgs, chatapi.Message{Role: "assistant", Content: strings.Repeat("x", llmDeltas*llmDeltaSize)})
		}
	}
	body := line(json.Marshal(chatapi.Request{Model: llmModel, Stream: true, Messages: msgs}))
	chunk := len(messageChunk(llmDelta(1, 0)))
	const event = 200 // an SSE event besides its delta
	return int64(len(body) + llmDeltas*(chunk+llmDeltaSize+event) + 3*event)
}()

func writeSession(w io.Writer, shape string, size int64) error {
	s := &session{w: w, nextID: 1}
	s.frame(initializeRequest())
	s.frame(newSessionRequest())
	var total int64
	switch shape {
	case "editor":
		for total < size {
			total += s.put()
		}
	case "echo":
		for total < size {
			total += s.echo()
		}
	case "echoreq":
		for total < size {
			total += s.echoReq()
		}
	case "agent":
		for total < size {
			total += s.updates(promptUpdates)
		}
	case "llm":
		for total < size {
			total += s.llm()
		}
	case "mix":
		// Whichever part has the fewest bytes so far goes next: a third
		// each, finely interleaved.
		var parts [3]int64
		for total < size {
			i := 0
			for j := range parts {
				if parts[j] < parts[i] {
					i = j
				}
			}
			var n int64
			switch i {
			case 0:
				for range 100 {
					n += s.put()
				}
			case 1:
				n = s.updates(mixUpdates)
			case 2:
				n = s.llm()
			}
			parts[i] += n
			total += n
		}
	default:
		return fmt.Errorf("--shape %q: want one of %s", shape, strings.Join(shapes, ", "))
	}
	return s.err
}

// Package lane names the streams a recording holds and carries their whole lines, the one model of a frame that recording, replay and normalization share.
//
// A frame read from the store comes in pieces when its line was longer
// than the framer's limit; the store's reader joins them (store.Lines), so
// a Line here is always whole.
package lane

import "fmt"

// Lane says which stream of a session something belongs to. The values are
// those the store writes; the zero Lane is none.
type Lane uint8

const (
	Editor Lane = iota + 1 // editor → agent (the agent's stdin)
	Agent                  // agent → editor (the agent's stdout)
	Stderr                 // the agent's stderr
	LLM                    // agent ↔ LLM HTTP exchanges
)

var names = [...]string{Editor: "editor", Agent: "agent", Stderr: "stderr", LLM: "llm"}

// String returns the lane's name: "editor", "agent", "stderr", "llm" or
// "mcp" for a lane of an MCP server (see MCP), as `acptap show --json`
// writes it.
func (l Lane) String() string {
	if int(l) < len(names) && names[l] != "" {
		return names[l]
	}
	if _, _, ok := l.MCP(); ok {
		return "mcp"
	}
	return fmt.Sprintf("lane(%d)", uint8(l))
}

// Parse is the inverse of Lane.String; ok is false for a name that is no
// lane's.
func Parse(s string) (l Lane, ok bool) {
	for i, n := range names {
		if n != "" && n == s {
			return Lane(i), true
		}
	}
	return 0, false
}

// A Line is one whole line of a lane, without its newline.
type Line struct {
	Lane Lane
	Data []byte
}

// Lines are a sequence of lines read by index, such as lines spooled to
// a file. Line must be safe for concurrent use when its callers are, and
// a Line it returns must not change while its caller holds it.
type Lines interface {
	// Len returns how many lines there are.
	Len() int
	// Line returns line i, 0 <= i < Len().
	Line(i int) (Line, error)
}

// Slice is Lines in memory.
type Slice []Line

// Len returns len(s).
func (s Slice) Len() int { return len(s) }

// Line returns s[i].
func (s Slice) Line(i int) (Line, error) { return s[i], nil }

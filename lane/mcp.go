package lane

// The lanes of the MCP servers an agent starts over stdio, three for
// each: what the agent writes to the server's stdin, what the server
// writes on its stdout, and its stderr. Server i of a recording (its
// store.Recording.MCPServers[i]) has the lanes MCP(i, ToServer),
// MCP(i, FromServer) and MCP(i, ServerStderr), from mcpBase on.
const (
	mcpBase = 16
	// MaxMCPServers is how many stdio MCP servers a recording can hold
	// the lanes of.
	MaxMCPServers = (256 - mcpBase) / 3
)

// An MCPDir is the stream of an MCP server's lane.
type MCPDir uint8

const (
	ToServer     MCPDir = iota // the agent → the server (its stdin)
	FromServer                 // the server → the agent (its stdout)
	ServerStderr               // the server's stderr
)

var dirNames = [...]string{ToServer: "in", FromServer: "out", ServerStderr: "stderr"}

// String returns "in", "out" or "stderr", as `acptap show --json` writes it.
func (d MCPDir) String() string {
	if int(d) < len(dirNames) {
		return dirNames[d]
	}
	return "dir?"
}

// MCP returns the lane of stream dir of MCP server i, 0 <= i <
// MaxMCPServers.
func MCP(i int, dir MCPDir) Lane { return Lane(mcpBase + 3*i + int(dir)) }

// MCP reports whether l is an MCP server's lane, and which server's and
// which stream it is.
func (l Lane) MCP() (server int, dir MCPDir, ok bool) {
	if l < mcpBase {
		return 0, 0, false
	}
	n := int(l) - mcpBase
	return n / 3, MCPDir(n % 3), true
}

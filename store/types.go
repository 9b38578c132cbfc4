package store

import (
	"github.com/acptap/acptap/lane"

	"fmt"
	"time"
)

// FormatVersion is the format of the recordings this package writes,
// kept in Recording.Format. A recording of a larger format is listed but
// its metadata and events are refused with ErrUnknownFormat rather than
// misread.
//
// Format 1 stored every event as a value of its own. Format 2 stores runs
// of frames as frame blocks (see blockEncoding), as later formats do. An
// acptap that knows only format 1 would refuse a block by its encoding
// byte, but only on reaching it, after Events had handed out the events
// before it: a replay would start and then fail half-way. The format
// number makes it refuse the recording up front.
//
// Format 3 records how each LLM exchange ended as a word of its own (the
// "end" of internal/exchange), where format 2 left it to be read from the
// wording of the exchange's error text. That wording is no longer kept
// stable: an acptap that knows only format 2 would misread the end of an
// exchange whose text it does not recognise, replaying an agent that went
// away as a broken stream, say, and so refuses format 3.
//
// This package reads all three formats; exchange.Unmarshal reads the
// exchanges of both encodings, whatever the recording's format.
//
// The store's own format (storeFormat) stays 1: the layout of buckets and
// keys is unchanged, so an older acptap still opens a store holding newer
// recordings, lists them, and reads and writes recordings of its own
// format in it.
const FormatVersion = 3

// Lane says which stream an event belongs to: lane's one model of the
// streams, whose values the store writes.
type Lane = lane.Lane

const (
	LaneEditor = lane.Editor // editor → agent (the agent's stdin)
	LaneAgent  = lane.Agent  // agent → editor (the agent's stdout)
	LaneStderr = lane.Stderr // the agent's stderr
	LaneLLM    = lane.LLM    // agent ↔ LLM HTTP exchanges
)

// ParseLane is the inverse of Lane.String.
func ParseLane(s string) (Lane, error) {
	if l, ok := lane.Parse(s); ok {
		return l, nil
	}
	return 0, fmt.Errorf("unknown lane %q (want editor, agent, stderr or llm)", s)
}

// Kind says how an event's Data is to be read.
type Kind uint8

const (
	// KindFrame is one line of stdio: Data is the line without its '\n'.
	KindFrame Kind = iota + 1
	// KindExchange is one LLM HTTP exchange: Data is its JSON encoding,
	// defined by internal/exchange.
	KindExchange
)

// Flag qualifies a frame.
type Flag uint8

const (
	// FlagNoNewline marks a line that ended at EOF without a '\n'.
	FlagNoNewline Flag = 1 << iota
	// FlagContinued marks a piece of a line longer than the framer's limit:
	// the next frame of the same lane continues it.
	FlagContinued
	// FlagIncomplete marks an exchange written while still in flight; a
	// later write of the same Seq replaces it with the finished exchange.
	FlagIncomplete
)

// Event is one recorded thing: a stdio line or an LLM exchange.
type Event struct {
	Seq    uint64        // position in the recording, shared by all lanes; starts at 1
	Kind   Kind          // how to read Data
	Lane   Lane          // which stream
	Offset time.Duration // time since the recording started (monotonic clock)
	Flags  Flag          // qualifiers
	Data   []byte        // the payload, see Kind
}

// Recording is the metadata of one recording.
type Recording struct {
	Name    string    `json:"name"`
	Format  int       `json:"format"`  // FormatVersion of the writer
	Created time.Time `json:"created"` // wall clock at start
	Version string    `json:"version"` // acptap version that wrote it
	Argv    []string  `json:"argv"`    // agent command line
	// AgentPath is Argv[0] as it resolved when recorded, an absolute
	// path, for a replay of a command typed with a relative path
	// (./agent), which the sandbox's working directory does not hold.
	AgentPath string   `json:"agent_path,omitempty"`
	Cwd       string   `json:"cwd"` // working directory of the agent
	EnvNames  []string `json:"env_names,omitempty"`
	// Env is the agent's environment, for a replay to give the agent one
	// of the same shape: every variable of EnvNames, sorted, with its
	// value where it was safe to keep, never a secret. Nil for a
	// recording made before acptap kept it (EnvNames is kept as well,
	// for the acptaps before), which a replay runs as it did then.
	Env []EnvVar `json:"env,omitempty"`
	// Home and Tmp are the agent's HOME and TMPDIR, so that a replay can
	// tell paths under them from real content.
	Home string `json:"home,omitempty"`
	Tmp  string `json:"tmp,omitempty"`
	// BaseURLs maps each base-URL variable the tap rewrote to its
	// upstream; ProxyEnv says whether the agent was given HTTPS_PROXY and
	// friends. A replay reaches the agent the same ways.
	BaseURLs map[string]string `json:"base_urls,omitempty"`
	ProxyEnv bool              `json:"proxy_env,omitempty"`

	// LoopbackDirect says that the agent's NO_PROXY also named
	// localhost, 127.0.0.1 and ::1, so that its loopback traffic went
	// around the tap (see proxy.EnvOptions). It is false for a recording
	// made with record --proxy-loopback, and for one made before acptap
	// had the option, which sent loopback through the tap as well; a
	// replay does as the recording did.
	LoopbackDirect bool `json:"loopback_direct,omitempty"`

	Snapshot bool `json:"snapshot,omitempty"` // the blob SnapshotBlob holds the workspace, as record found it

	// Scenario is the absolute path of the scenario file that drove the
	// agent instead of an editor (acptap record --scenario), whose
	// content the blob ScenarioBlob holds; "" for a recording made
	// behind an editor.
	Scenario string `json:"scenario,omitempty"`

	// Loopback is what record saw of the agent's TCP connections to
	// loopback ports other than the tap's, which go around the tap: nil
	// where it saw none, or did not look (on another system than Linux,
	// or an acptap before it looked).
	Loopback *Loopback `json:"loopback,omitempty"`

	// TerminalLogins are the terminal logins the agent advertised in its
	// answer to initialize (authMethods of type "terminal"): an editor
	// runs the agent's command again with their Args for the user to log
	// in, and record runs such a command without recording it.
	TerminalLogins []TerminalLogin `json:"terminal_logins,omitempty"`

	// MCPServers are the MCP servers the editor named, which the agent
	// reached through record's taps, in the order the editor named them:
	// a stdio server i's lines are on the lanes lane.MCP(i, ...), an HTTP
	// or SSE server i's exchanges are in the llm lane with MCPServer i+1
	// (exchange.RouteMCP).
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`

	// Set when the recording ends. While Done is false the recording is
	// either still being written or was interrupted (acptap was killed),
	// which Live tells apart; everything committed so far is readable
	// either way.
	Done     bool          `json:"done"`
	ExitCode int           `json:"exit_code"`        // the agent's exit status, 128+n when killed by signal n
	Signal   string        `json:"signal,omitempty"` // the signal that killed the agent, if any
	Error    string        `json:"error,omitempty"`  // why the agent could not run, if it could not
	Duration time.Duration `json:"duration"`

	// Kept current by the writer at every commit.
	Frames    int `json:"frames"`    // KindFrame events
	Exchanges int `json:"exchanges"` // KindExchange events

	// Updated is when Store.ReplaceLane last rewrote a lane of the
	// recording (acptap replay --update); zero if never.
	Updated time.Time `json:"updated,omitzero"`

	// Damage, set by List and never stored, says that the recording's
	// metadata does not read: its bucket or its metadata is damaged, and
	// only Name is set. It is a *DamagedError. Get of it fails with it;
	// Delete removes it.
	Damage error `json:"-"`

	// Salvaged, set by Salvage (acptap check --salvage) on a recording
	// it copied out of a damaged store, says what of it was lost: its
	// events from some Seq on, its metadata, its snapshot.
	Salvaged string `json:"salvaged,omitempty"`

	// Live, set by List and Get and never stored, says that a Writer, of
	// this process or another, is writing the recording now. A recording
	// neither Done nor Live was interrupted: its recorder died; what it
	// committed is readable all the same.
	Live bool `json:"-"`
}

// EnvVar is a variable of a recorded agent's environment: its value, or
// why the value was withheld, never stored.
type EnvVar struct {
	Name     string `json:"name"`
	Value    string `json:"value,omitempty"`
	Withheld string `json:"withheld,omitempty"` // one of the Withheld constants; "" for a value kept
	// Dir says the value named a directory when recording, which a
	// replay makes in its sandbox for the value it gives, lest an agent
	// that checks its directory (CODEX_HOME) refuse to start.
	Dir bool `json:"dir,omitempty"`
}

// Why a value of the environment was withheld.
const (
	WithheldSecret      = "secret"      // the name says secret (redact.SecretName)
	WithheldCredentials = "credentials" // the value holds a secret variable's value, or a URL's user information or a key in its query
	WithheldToken       = "token"       // the value has a key- or id-like run of 20 letters and digits or more
	WithheldLong        = "long"        // the value is longer than 4 KiB
)

// MCPServer is an MCP server of a recording, as the editor gave it in
// session/new, session/load or session/resume, secrets masked: a stdio
// server's name and command, an HTTP or SSE server's name and URL.
type MCPServer struct {
	Name string   `json:"name"`
	Type string   `json:"type,omitempty"` // "http" or "sse"; empty for stdio
	Argv []string `json:"argv,omitempty"` // a stdio server's
	URL  string   `json:"url,omitempty"`  // an HTTP or SSE server's
	// NotRecorded says why the server was left as the editor named it,
	// unrecorded (the agent reached it itself); empty for one recorded.
	NotRecorded string `json:"not_recorded,omitempty"`
}

// TerminalLogin is an authentication method of type "terminal" an agent
// advertised: an interactive login that an editor starts by running the
// agent's command with Args.
type TerminalLogin struct {
	ID   string   `json:"id"`
	Name string   `json:"name,omitempty"`
	Args []string `json:"args,omitempty"`
}

// Loopback is the agent's TCP traffic to loopback ports that record saw
// go around its tap (the agent's NO_PROXY names loopback, see
// Recording.LoopbackDirect), seen from the sockets of the agent's process
// group while it ran.
//
// Its fields are in the order of their names, as an exported
// recording's meta.json has its keys.
type Loopback struct {
	// Own are the ports of the agent's own servers (a process of its
	// group listened on them) that it connected to: not an LLM, sorted.
	Own []int `json:"own,omitempty"`
	// Ports are the loopback ports the agent connected to on which none
	// of its own processes listened: servers of other programs, such as
	// an LLM on loopback (Ollama, LM Studio, a gateway), by port.
	Ports []LoopbackPort `json:"ports,omitempty"`
}

// LoopbackPort is a loopback port of another program that the agent
// connected to.
type LoopbackPort struct {
	Port int `json:"port"`
	// Var is a variable of the agent's environment whose value is a
	// URL, or a host:port, of that port on loopback (OPENAI_BASE_URL set
	// to http://127.0.0.1:8080/v1): the one to route through the tap with
	// record --base-url. "" if none is.
	Var string `json:"var,omitempty"`
}

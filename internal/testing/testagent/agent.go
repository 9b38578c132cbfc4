// Package testagent is a small, scriptable ACP agent that the acptap tests run as a real child process.
//
// By default each prompt turn is deterministic (an optional file read
// behind a permission request, then "You said: <prompt>" in chunks). With
// an OpenAI base URL it becomes an LLM-backed agent instead: each turn is a
// streaming Chat Completions call whose deltas are relayed as they arrive,
// with a read_file tool, so that record and replay can be tested against
// the traffic real agents produce. See Main for the flags.
package testagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/url"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/acptap/acptap/internal/chatapi"

	"github.com/acptap/acptap/internal/acp"
)

// config is the parsed command line.
type config struct {
	read         []string // files to read in each scripted turn, in order
	noPermission bool     // read without asking
	// permissionOptions are the choices offered with every permission
	// request (--permission-options).
	permissionOptions []permissionOption
	chunkSize         int           // bytes per scripted answer chunk
	chunkDelay        time.Duration // pause between scripted answer chunks
	junk              bool          // print a non-JSON line at startup
	junkLines         int           // non-JSON lines printed in each scripted turn
	stderrLog         bool          // log each received message to stderr
	ignoreEOF         bool          // keep running after stdin EOF until signalled
	muteOnEOF         bool          // after stdin EOF, write nothing more and run on until signalled
	ignoreSIGTERM     bool          // ignore SIGTERM (only SIGINT or SIGKILL stop the agent)
	exit              int           // exit at once with this code; -1 for not
	message           *string       // scripted answer text, nil for "You said: <prompt>"
	stringIDs         bool          // mint UUID strings as request ids
	thought           string        // agent_thought_chunk sent first, "" for none
	llm               string        // OpenAI base URL, "" for the scripted mode
	llmWS             bool          // --llm-ws: the Responses API over a WebSocket
	model             string        // model of the main LLM calls
	system            string        // extra system prompt text (LLM mode)
	titleCall         bool          // race a title-generation call against the first turn
	ca                string        // extra CA certificates (PEM) to trust
	retries           int           // retries of a failed LLM request
	noise             bool          // put per-run values in prompts and output; see noise
	ownServer         string        // HOST:PORT of the agent's own server, checked before each turn; "" for none
	lookup            string        // URL looked up at start-up, shown in each turn; "" for none
	telemetry         string        // URL a start-up event is posted to; "" for none
	race              raceOrder     // --concurrent-updates (see race.go)
	racing            racing        // --racing
	plant             plant         // --plant
	flaky             flaky         // --flaky: what may be sent
	flakySeq          string        // --flaky-seq: the file counting runs, "" to choose at random
	secrets           secrets       // --api-key, --header, --query, --echo-env (see secrets.go)
	env               envShape      // --env-names, --env-file (see env.go)
	features          features      // --features (see sessions.go)
	terminalLogin     bool          // advertise a terminal login (authMethods) running this agent with --login
	mcpCalls          []mcpCall     // --mcp-call: MCP tools called in each scripted turn
	mcpBench          int           // --mcp-bench: timed lookup calls in each scripted turn
	login             bool          // be that login: print a line and exit, no ACP
	// llmDelay is how long to wait before each LLM call of a session, by
	// the session's number (--llm-delay).
	llmDelay map[int]time.Duration
}

const usage = `usage: testagent [flags]

An ACP agent on stdin/stdout for tests. Scripted by default; an LLM agent
(OpenAI Chat Completions, streaming) when --llm or OPENAI_BASE_URL is set.
Stops on stdin EOF (unless --ignore-eof), SIGINT or SIGTERM (exit 128+signal).

`

func parseFlags(args []string, stderr io.Writer, getenv func(string) string) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("testagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.Func("read", "read `PATH` (relative to the session cwd) through the editor in each turn (scripted mode); repeatable", func(p string) error {
		cfg.read = append(cfg.read, p)
		return nil
	})
	fs.BoolVar(&cfg.noPermission, "no-permission", false, "read without session/request_permission")
	cfg.permissionOptions = defaultPermissionOptions
	fs.Func("permission-options", "offer these permission options: a comma-separated `LIST` of KIND=OPTIONID (default allow_once=allow,reject_once=reject), as a new agent version may rename or drop them", func(v string) (err error) {
		cfg.permissionOptions, err = parsePermissionOptions(v)
		return err
	})
	fs.IntVar(&cfg.chunkSize, "chunk-size", 8, "bytes per answer chunk (scripted mode)")
	fs.DurationVar(&cfg.chunkDelay, "chunk-delay", 0, "pause between answer chunks (scripted mode)")
	fs.BoolVar(&cfg.junk, "junk", false, "print a non-JSON line to stdout at startup")
	fs.IntVar(&cfg.junkLines, "junk-lines", 0, "print `N` non-JSON lines to stdout in each turn, before the answer (scripted mode)")
	fs.BoolVar(&cfg.stderrLog, "stderr-log", false, "log each received message to stderr")
	fs.BoolVar(&cfg.ignoreEOF, "ignore-eof", false, "keep running after stdin EOF until signalled")
	fs.BoolVar(&cfg.muteOnEOF, "mute-on-eof", false, "after stdin EOF, write nothing more to stdout and keep running until signalled: an agent stuck mid-turn once its editor is gone")
	fs.BoolVar(&cfg.ignoreSIGTERM, "ignore-sigterm", false, "ignore SIGTERM")
	fs.IntVar(&cfg.exit, "exit", -1, "exit with code `N` before reading anything")
	message := fs.String("message", "", "answer `TEXT` instead of \"You said: <prompt>\" (scripted mode)")
	fs.BoolVar(&cfg.stringIDs, "string-ids", false, "use UUID strings as the agent's request ids")
	fs.StringVar(&cfg.thought, "thought", "", "send an agent_thought_chunk with `TEXT` first in each turn (scripted mode)")
	fs.StringVar(&cfg.llm, "llm", "", "OpenAI base `URL` (default $OPENAI_BASE_URL); enables the LLM mode")
	fs.StringVar(&cfg.model, "model", "test-model", "model `NAME` of the LLM calls")
	fs.BoolVar(&cfg.llmWS, "llm-ws", false, "speak the OpenAI Responses API over a WebSocket (URL/responses, ws or wss) instead of Chat Completions, as Codex does; no tools are offered")
	fs.StringVar(&cfg.system, "system", "", "append `TEXT` to the system prompt (LLM mode): a changed prompt for request comparison")
	fs.BoolVar(&cfg.titleCall, "title-call", false, "race a title-generation LLM call against the first turn")
	fs.StringVar(&cfg.ca, "ca", "", "also trust the CA certificates in PEM `FILE`")
	fs.IntVar(&cfg.retries, "retries", 0, "retry a failed LLM request (429, 5xx, connection error) up to `N` times")
	fs.BoolVar(&cfg.noise, "noise", false, "put per-run values the default normalization does not know into the system prompt, the tool output and MCP tool calls' arguments")
	fs.StringVar(&cfg.ownServer, "own-server", "", "run an HTTP server of the agent's own on `HOST:PORT` (PORT 0 for any) and check it before each turn")
	fs.StringVar(&cfg.lookup, "lookup", "", "GET `URL` at start-up, through the proxy, and show its answer in each turn")
	fs.StringVar(&cfg.telemetry, "telemetry", "", "POST a start-up event to `URL`, through the proxy; its answer is only logged")
	fs.Func("concurrent-updates", "send an available_commands_update, a tool call's final update and a usage_update from concurrent tasks, racing the session/new answer, the next message chunks and the turn's answer: `ORDER` timed (as scheduling decides), late or early (after or before what they race)", func(v string) (err error) {
		cfg.race, err = parseRaceOrder(v)
		return err
	})
	cfg.racing = racing{commands: true, tool: true, usage: true}
	fs.Func("racing", "with --concurrent-updates, which updates race: a comma-separated `LIST` of commands, tool and usage (default all three; the others are sent early)", func(v string) (err error) {
		cfg.racing, err = parseRacing(v)
		return err
	})
	fs.Func("llm-delay", "wait before each LLM call of one session: `K=DURATION` for the K-th session made; repeatable", func(v string) error {
		k, d, ok := strings.Cut(v, "=")
		n, err := strconv.Atoi(k)
		if !ok || err != nil || n < 1 {
			return fmt.Errorf("--llm-delay %q: want K=DURATION, K a session number from 1", v)
		}
		dur, err := time.ParseDuration(d)
		if err != nil {
			return fmt.Errorf("--llm-delay %q: %w", v, err)
		}
		if cfg.llmDelay == nil {
			cfg.llmDelay = map[int]time.Duration{}
		}
		cfg.llmDelay[n] = dur
		return nil
	})
	fs.Func("mcp-call", "call an MCP tool of the session's MCP servers in each turn (scripted mode): `TOOL=JSON`, JSON its arguments; repeatable", func(v string) error {
		tool, args, ok := strings.Cut(v, "=")
		if !ok || tool == "" || !json.Valid([]byte(args)) {
			return fmt.Errorf("--mcp-call %q: want TOOL=JSON", v)
		}
		cfg.mcpCalls = append(cfg.mcpCalls, mcpCall{tool: tool, args: json.RawMessage(args)})
		return nil
	})
	fs.IntVar(&cfg.mcpBench, "mcp-bench", 0, "call the lookup tool of the session's first MCP server `N` times in each turn (scripted mode), one after the other, and say the round trips' p50 and p99")
	fs.BoolVar(&cfg.terminalLogin, "terminal-login", false, "advertise a terminal login in initialize's authMethods: this command with --login after it")
	fs.BoolVar(&cfg.login, "login", false, "be the terminal login: print that the user logged in and exit, speaking no ACP")
	fs.Func("features", featuresUsage, func(v string) (err error) {
		cfg.features, err = parseFeatures(v)
		return err
	})
	fs.Func("flaky", flakyUsage, func(v string) (err error) {
		cfg.flaky, err = parseFlaky(v)
		return err
	})
	fs.StringVar(&cfg.flakySeq, "flaky-seq", "", "choose what --flaky sends from the count of runs kept in `FILE` (made if missing) instead of at random: the runs alternate, the first sending everything --flaky names, the second nothing, and so on; for tests that must not depend on chance")
	fs.Func("plant", plantUsage, func(v string) (err error) {
		cfg.plant, err = parsePlant(v)
		return err
	})
	cfg.secrets.flags(fs)
	cfg.env.flags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "message" {
			cfg.message = message
		}
	})
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.chunkSize < 1 {
		return nil, fmt.Errorf("--chunk-size must be at least 1, not %d", cfg.chunkSize)
	}
	if cfg.retries < 0 {
		return nil, fmt.Errorf("--retries must not be negative")
	}
	if err := checkOwnHTTPFlags(cfg); err != nil {
		return nil, err
	}
	if cfg.llm == "" {
		cfg.llm = getenv("OPENAI_BASE_URL")
	}
	if cfg.llm != "" {
		u, err := url.Parse(cfg.llm)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("LLM base URL %q is not an http(s) URL", cfg.llm)
		}
	}
	return cfg, nil
}

// Main runs the agent with the given command line (without the program
// name) on stdin and stdout, logging to stderr, and returns the process
// exit status: 0 after stdin EOF once running turns are over, 128+n when
// stopped by signal n, 2 on a usage error, 1 when reading stdin fails.
// Once stdin is closed, requests to the editor fail and a turn waiting on
// one ends as cancelled.
//
// Scripted mode (the default), per prompt turn:
//
//	--thought TEXT    send an agent_thought_chunk with TEXT first
//	--junk-lines N    print N non-JSON lines to stdout before the answer
//	--read PATH       read PATH (relative to the session cwd) through the
//	                  editor: tool_call, session/request_permission,
//	                  fs/read_text_file, tool_call_update; repeatable
//	--message TEXT    answer TEXT instead of "You said: <prompt>"
//	--chunk-size N    answer in agent_message_chunks of N bytes, cut at rune
//	                  boundaries (default 8)
//	--chunk-delay D   pause D between chunks (default 0)
//
// LLM mode, when --llm or $OPENAI_BASE_URL is set:
//
//	--llm URL         OpenAI base URL; requests go to URL/chat/completions
//	--model NAME      model of the turns' requests (default "test-model")
//	--system TEXT     append TEXT to the system prompt
//	--title-call      race a "title-model" request against the first turn's
//	--ca FILE         also trust the CA certificates in FILE
//	--retries N       retry a request failing with 429, 5xx or a transport
//	                  error up to N times (default 0)
//
// The API key is $OPENAI_API_KEY. HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and
// NO_PROXY (either case) are honoured, for loopback targets too, and the
// certificates in $SSL_CERT_FILE are trusted besides the system roots.
//
// Both modes, the agent's own HTTP (its HTTP client honours the proxy
// variables as in LLM mode; see ownhttp.go):
//
//	--own-server HOST:PORT  run an HTTP server of the agent's own, with a
//	                  token minted per process, and GET it before each
//	                  turn: "own server: ok", or an error that ends the
//	                  turn when it is down or answers another token
//	--lookup URL      GET URL (with ts= and request= query values added)
//	                  at start-up and begin each turn with "lookup: " and
//	                  its answer, or the error
//	--telemetry URL   POST a start-up event to URL; the answer is logged
//
// Both modes:
//
//	--no-permission   read files without session/request_permission
//	--permission-options LIST  offer KIND=OPTIONID,... (default
//	                  allow_once=allow,reject_once=reject): an allow_* kind
//	                  chosen runs the tool, a reject_* one refuses it
//	--noise           make a directory of its own for the run,
//	                  TMPDIR/agent-home.XXXXXX (removed at exit), and name
//	                  it, with the workspace path with "/" as "-" and
//	                  percent-encoded, in the system prompt and in the read
//	                  tool's output; put a random token in the requests
//	                  (metadata.run) and in the tool's rawOutput (run); and
//	                  its process id in the tool's output ("shell job N", a label the default normalization does not know)
//	--string-ids      the agent's own request ids are UUID strings
//	--concurrent-updates ORDER
//	                  send an available_commands_update racing the
//	                  session/new answer, a tool call's final update racing
//	                  the message chunks after it, and a usage_update racing
//	                  each turn's answer, from concurrent tasks: ORDER timed
//	                  (the tool update ~15 ms late, as scheduling decides),
//	                  late or early (after or before what they race); a
//	                  tool call also gets an in_progress update
//	--racing LIST     which of them race: commands, tool, usage
//	                  (comma-separated; default all; the others early)
//	--flaky LIST      send, in about half the runs each, chosen at random
//	                  at start-up: tool-done (a read tool call's final
//	                  update, completed), drain (an agent request
//	                  _testagent/drainQueue after a read tool's result,
//	                  whose answer, or error, it ignores)
//	--plant CHANGE    behave differently in one way, for a replay to catch:
//	                  swap-chunks (scripted mode), progress-last (a tool
//	                  call's in_progress after its completed update),
//	                  status-failed (its final update says failed)
//	--api-key KEY     the LLM key, instead of $OPENAI_API_KEY
//	--header N:V      add a header to every LLM request; repeatable
//	--query K=V       add a query parameter to every LLM request; repeatable
//	--echo-env NAME   repeat $NAME as NAME=VALUE on stderr at start-up,
//	                  in a message chunk at the start of each turn and in
//	                  the system prompt (LLM mode), and as
//	                  {"environment":{NAME:VALUE}} in initialize's _meta
//	--env-names       list the sorted names of its environment (its
//	                  process's, whatever getenv says) in the system prompt
//	                  (LLM mode), as a real agent does
//	--env-file FILE   write its environment, sorted, one NAME=VALUE a line,
//	                  to FILE at start-up
//	--junk            print a non-JSON line to stdout at startup
//	--stderr-log      log each received message to stderr
//	--ignore-eof      keep running after stdin EOF until signalled
//	--mute-on-eof     after stdin EOF, write nothing more to stdout (a turn
//	                  under way never answers) and keep running until
//	                  signalled
//	--ignore-sigterm  ignore SIGTERM
//	--exit N          exit with status N before reading anything
//
// Main handles SIGINT and SIGTERM while it runs.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	cfg, err := parseFlags(args, stderr, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "testagent: %v\n", err)
		return 2
	}
	logger := log.New(stderr, "testagent: ", 0)
	if cfg.exit >= 0 {
		logger.Printf("exiting with status %d as asked", cfg.exit)
		return cfg.exit
	}
	if cfg.login {
		// The interactive login an editor runs in a terminal: no ACP.
		fmt.Fprintln(stdout, "Logged in to the test LLM as test-user.")
		return 0
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	if cfg.junk {
		// Real agents print banners and warnings on stdout; editors skip them.
		fmt.Fprintln(stdout, "testagent 1.0 starting up (this line is not JSON-RPC)")
	}

	a := &agent{
		cfg:      cfg,
		c:        newConn(stdout, cfg.stringIDs),
		log:      logger,
		sessions: make(map[string]*session),
	}
	if a.flaky, err = cfg.flaky.choose(cfg.flakySeq); err != nil {
		logger.Printf("%v", err)
		return 2
	}
	if a.echo = cfg.secrets.echo(getenv); a.echo != "" {
		logger.Printf("environment: %s", a.echo)
	}
	if a.envText, err = cfg.env.start(); err != nil {
		logger.Print(err)
		return 2
	}
	if cfg.noise {
		if a.noise, err = newNoise(getenv("TMPDIR")); err != nil {
			logger.Print(err)
			return 1
		}
		defer a.noise.close()
	}
	if cfg.llm != "" {
		a.llm, err = newLLMClient(cfg, getenv, logger)
		if err != nil {
			logger.Print(err)
			return 2
		}
	}

	if a.own, err = startOwnHTTP(cfg, getenv, logger); err != nil {
		logger.Print(err)
		return 2
	}
	defer a.own.close()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	a.ctx = ctx
	defer a.closeMCP()
	return a.serve(stdin, sigs, stop)
}

// serve reads the editor's messages from stdin until it ends, then lets
// the turns under way finish, or stops them on a signal, and returns the
// exit status.
func (a *agent) serve(stdin io.Reader, sigs <-chan os.Signal, stop context.CancelFunc) int {
	cfg, logger := a.cfg, a.log
	readDone := make(chan error, 1)
	go func() { readDone <- a.readLoop(stdin) }()

	var turnsDone chan struct{} // closed when the turns are over after stdin EOF
	for {
		select {
		case err := <-readDone:
			readDone = nil
			if cfg.muteOnEOF {
				// Before the turns learn that stdin is closed: what they
				// would answer then is never written.
				a.c.mute()
			}
			// Nothing can answer the agent's requests any more; turns that
			// need no answer run to their end.
			a.c.closeInput()
			if err != nil {
				logger.Printf("reading stdin: %v", err)
				stop()
				a.turns.Wait()
				return 1
			}
			if cfg.muteOnEOF {
				a.debugf("stdin closed; silent until signalled")
				continue
			}
			if cfg.ignoreEOF {
				a.debugf("stdin closed; running on until signalled")
				continue
			}
			turnsDone = make(chan struct{})
			go func() {
				a.turns.Wait()
				close(turnsDone)
			}()
		case <-turnsDone:
			return 0
		case sig := <-sigs:
			if sig == syscall.SIGTERM && cfg.ignoreSIGTERM {
				logger.Printf("ignoring %v", sig)
				continue
			}
			logger.Printf("stopping on %v", sig)
			stop()
			a.mu.Lock()
			a.stopping = true // no turn starts after this, so Wait can't miss one
			a.mu.Unlock()
			a.turns.Wait()
			return 128 + int(sig.(syscall.Signal))
		}
	}
}

// agent is the state of one agent process.
type agent struct {
	cfg *config
	c   *conn
	log *log.Logger
	llm *llmClient      // nil in the scripted mode
	own *ownHTTP        // the agent's own HTTP; nil for none
	ctx context.Context // ends when the agent stops; parent of every turn
	// noise is the run's values of --noise; nil without.
	noise *noise
	// echo is --echo-env's NAME=VALUE, "" without it.
	echo string
	// flaky is what this run sends of --flaky's.
	flaky flaky
	// envText is what --env-names says in the system prompt, "" without
	// it.
	envText string

	turns sync.WaitGroup // running prompt turns

	mu       sync.Mutex // guards sessions, titled, stopping and adding to turns
	sessions map[string]*session
	titled   bool // whether the title call was made
	stopping bool // the agent is stopping on a signal: no new turns
}

// session is one ACP session.
type session struct {
	id     string
	number int // from 1, in the order of the session/new requests

	// Under --features (see sessions.go), s.mu guards these too: cwd
	// (which session/load may change), the session's mode and model,
	// whether it is closed, and its past exchanges, for session/load.
	cwd    string
	mode   string
	model  string
	closed bool
	past   []exchange

	// mcp are the session's MCP servers, connected when it was made;
	// mcpErrs why others could not be. Set before the session is known.
	mcp     []*mcpClient
	mcpErrs []error
	// acp are the session's MCP servers the editor hosts over ACP, which
	// each turn connects (acpMCP) and disconnects again (see
	// connectACP); acpErrs are why the running turn could not connect
	// some. Only the running turn uses acpMCP and acpErrs.
	acp     []mcpServerConfig
	acpMCP  []*mcpClient
	acpErrs []error

	mu     sync.Mutex         // guards cancel, promptID and requestCancelled
	cancel context.CancelFunc // ends the running turn; nil when idle
	// promptID is the running turn's session/prompt request id (IDKey),
	// and requestCancelled whether $/cancel_request named it.
	promptID         string
	requestCancelled bool

	// history is the LLM conversation so far. Only the running turn uses
	// it; s.mu orders one turn's writes before the next turn's reads.
	history []chatapi.Message

	race raceState // --concurrent-updates
}

func (a *agent) debugf(format string, args ...any) {
	if a.cfg.stderrLog {
		a.log.Printf(format, args...)
	}
}

// readLoop reads stdin line by line until EOF, handling each message in
// turn. It returns nil at EOF.
func (a *agent) readLoop(stdin io.Reader) error {
	r := bufio.NewReaderSize(stdin, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			a.handleLine(line)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (a *agent) handleLine(line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if !json.Valid(line) {
		a.debugf("recv a line that is not JSON")
		a.c.replyError(nullID, acp.CodeParseError, "parse error: line is not JSON")
		return
	}
	var m acp.Envelope
	if err := json.Unmarshal(line, &m); err != nil {
		a.c.replyError(nullID, acp.CodeInvalidRequest, "invalid request: %v", err)
		return
	}
	id := m.ID
	if id != nil && !validID(id) {
		a.c.replyError(nullID, acp.CodeInvalidRequest, "invalid request: id must be a string, a number or null")
		return
	}
	if m.JSONRPC != acp.Version {
		if id == nil {
			id = nullID
		}
		a.c.replyError(id, acp.CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
		return
	}
	switch {
	case m.Method == "" && id != nil && (m.Result != nil || m.Error != nil):
		a.debugf("recv response %s", id)
		if !a.c.deliver(&m) {
			a.debugf("dropping response %s: no request of that id is waiting", id)
		}
	case m.Method == "":
		if id == nil {
			id = nullID
		}
		a.c.replyError(id, acp.CodeInvalidRequest, "invalid request: no method, result or error")
	default:
		a.debugf("recv %s", m.Method)
		a.dispatch(&m)
	}
}

// dispatch handles a request (m.ID set) or notification from the editor.
func (a *agent) dispatch(m *acp.Envelope) {
	switch m.Method {
	case "initialize":
		a.logMeta(m)
		a.initialize(m)
	case "session/new":
		a.newSession(m)
	case "session/prompt":
		a.prompt(m)
	case "session/cancel":
		a.cancel(m)
	case "$/cancel_request":
		a.cancelRequest(m)
	case "authenticate":
		a.authenticate(m)
	case "session/load", "session/resume", "session/list", "session/close", "session/set_mode", "session/set_model":
		if !a.sessionMethod(m) && m.ID != nil {
			a.c.replyError(m.ID, acp.CodeMethodNotFound, "method not found: %s", m.Method)
		}
	default:
		if m.ID != nil {
			a.c.replyError(m.ID, acp.CodeMethodNotFound, "method not found: %s", m.Method)
		}
	}
}

// decodeParams decodes m's params into v, answering with an invalid-params
// error (for requests) when they don't fit.
func (a *agent) decodeParams(m *acp.Envelope, v any) bool {
	err := errors.New("params missing")
	if m.Params != nil {
		err = json.Unmarshal(m.Params, v)
	}
	if err != nil {
		if m.ID != nil {
			a.c.replyError(m.ID, acp.CodeInvalidParams, "invalid params for %s: %v", m.Method, err)
		} else {
			a.log.Printf("ignoring %s: invalid params: %v", m.Method, err)
		}
		return false
	}
	return true
}

func (a *agent) initialize(m *acp.Envelope) {
	if m.ID == nil {
		return
	}
	var p struct {
		ProtocolVersion int `json:"protocolVersion"`
	}
	if !a.decodeParams(m, &p) {
		return
	}
	res := map[string]any{
		"protocolVersion": 1,
		"agentCapabilities": map[string]any{
			"loadSession": false,
			"promptCapabilities": map[string]any{
				"image":           false,
				"audio":           false,
				"embeddedContext": false,
			},
		},
		"authMethods": []any{},
	}
	if a.cfg.terminalLogin {
		res["authMethods"] = []any{map[string]any{"id": "login", "name": "Log in", "description": "Log in to the test LLM in a terminal", "type": "terminal", "args": []string{"--login"}}}
	}
	caps := res["agentCapabilities"].(map[string]any)
	// --features mcp-acp adds acp: the agent reaches servers of type acp
	// over this connection (mcp/connect, mcp/message, mcp/disconnect), as
	// the RFD "MCP-over-ACP" has an agent advertise it.
	caps["mcpCapabilities"] = map[string]any{"http": true, "sse": false}
	a.cfg.features.capabilities(caps)
	if meta := a.echoMeta(); meta != nil {
		res["_meta"] = meta
	}
	a.c.reply(m.ID, res)
}

func (a *agent) newSession(m *acp.Envelope) {
	if m.ID == nil {
		return
	}
	var p struct {
		Cwd        string            `json:"cwd"`
		MCPServers []mcpServerConfig `json:"mcpServers"`
	}
	if !a.decodeParams(m, &p) {
		return
	}
	if !filepath.IsAbs(p.Cwd) {
		a.c.replyError(m.ID, acp.CodeInvalidParams, "invalid params for session/new: cwd %q is not an absolute path", p.Cwd)
		return
	}
	s := &session{id: "sess_" + randHex(12), cwd: filepath.Clean(p.Cwd), mode: sessionModes[0]["id"], model: sessionModels[0]["modelId"]}
	if len(p.MCPServers) > 0 {
		s.mcp, s.mcpErrs = a.connectMCP(a.ctx, p.MCPServers)
		for _, err := range s.mcpErrs {
			a.log.Print(err)
		}
		for _, c := range p.MCPServers {
			if c.Type == "acp" {
				s.acp = append(s.acp, c)
			}
		}
	}
	a.mu.Lock()
	s.number = len(a.sessions) + 1
	a.sessions[s.id] = s
	a.mu.Unlock()
	answer := a.sessionState(s, map[string]any{"sessionId": s.id})
	a.answerSessionNew(s, func() { a.c.reply(m.ID, answer) })
}

func (a *agent) session(id string) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[id]
}

// contentBlock is an ACP content block; only text blocks are produced or
// read by this agent.
type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// promptBlock is a content block of a prompt, as the agent reads it.
type promptBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// Name and URI are a resource_link's.
	Name string `json:"name"`
	URI  string `json:"uri"`
	// Resource is an embedded resource's.
	Resource struct {
		URI  string `json:"uri"`
		Text string `json:"text"`
	} `json:"resource"`
}

func (a *agent) prompt(m *acp.Envelope) {
	if m.ID == nil {
		a.log.Printf("ignoring session/prompt sent as a notification")
		return
	}
	var p struct {
		SessionID string        `json:"sessionId"`
		Prompt    []promptBlock `json:"prompt"`
	}
	if !a.decodeParams(m, &p) {
		return
	}
	s := a.session(p.SessionID)
	if s == nil {
		a.c.replyError(m.ID, acp.CodeInvalidParams, "invalid params for session/prompt: unknown session %q", p.SessionID)
		return
	}
	var texts []string
	for _, b := range p.Prompt {
		switch {
		case b.Type == "text":
			texts = append(texts, b.Text)
		case b.Type == "resource_link" && a.cfg.features.embed:
			texts = append(texts, "[link "+b.Name+"]")
		case b.Type == "resource" && a.cfg.features.embed:
			texts = append(texts, "[file "+path.Base(b.Resource.URI)+": "+b.Resource.Text+"]")
		}
	}

	a.mu.Lock()
	stopping := a.stopping
	if !stopping {
		a.turns.Add(1)
	}
	a.mu.Unlock()
	if stopping {
		a.c.replyError(m.ID, acp.CodeInternalError, "the agent is stopping")
		return
	}

	// The turn's context exists before this returns, so that a
	// session/cancel read right after the prompt finds it.
	ctx, cancel := context.WithCancel(a.ctx)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		a.turns.Done()
		a.c.replyError(m.ID, acp.CodeInvalidRequest, "session %s is closed", s.id)
		return
	}
	busy := s.cancel != nil
	if !busy {
		s.cancel, s.promptID, s.requestCancelled = cancel, acp.IDKey(m.ID), false
	}
	s.mu.Unlock()
	if busy {
		cancel()
		a.turns.Done()
		a.c.replyError(m.ID, acp.CodeInvalidRequest, "session %s is already running a prompt turn", s.id)
		return
	}

	go func() {
		defer a.turns.Done()
		prompt := strings.Join(texts, "\n")
		a.startTurn(s, prompt)
		reason := a.turn(ctx, s, prompt)
		// The session is idle before the editor learns it: its next
		// prompt may follow the answer at once.
		s.mu.Lock()
		s.cancel = nil
		byRequest := s.requestCancelled && reason == "cancelled"
		s.mu.Unlock()
		cancel()
		if byRequest {
			// $/cancel_request asks for the request's own answer: an
			// error of code -32800.
			a.answerPrompt(s, func() { a.c.replyError(m.ID, acp.CodeRequestCancelled, "request cancelled") })
			return
		}
		a.answerPrompt(s, func() { a.c.reply(m.ID, map[string]any{"stopReason": reason}) })
	}()
}

func (a *agent) cancel(m *acp.Envelope) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if !a.decodeParams(m, &p) {
		return
	}
	if s := a.session(p.SessionID); s != nil {
		s.mu.Lock()
		if s.cancel != nil {
			s.cancel()
		}
		s.mu.Unlock()
	}
	if m.ID != nil {
		// session/cancel is a notification; answer an editor that sent it
		// as a request all the same.
		a.c.reply(m.ID, struct{}{})
	}
}

// cancelRequest cancels the session/prompt request that $/cancel_request
// names, whose answer is then the -32800 error; other requests are
// answered at once and are not cancellable.
func (a *agent) cancelRequest(m *acp.Envelope) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if !a.decodeParams(m, &p) {
		return
	}
	id := acp.IDKey(p.RequestID)
	a.mu.Lock()
	sessions := make([]*session, 0, len(a.sessions))
	for _, s := range a.sessions {
		sessions = append(sessions, s)
	}
	a.mu.Unlock()
	for _, s := range sessions {
		s.mu.Lock()
		if s.cancel != nil && s.promptID == id {
			s.requestCancelled = true
			s.cancel()
		}
		s.mu.Unlock()
	}
}

// update sends a session/update notification.
func (a *agent) update(s *session, update any) {
	a.c.notify("session/update", map[string]any{"sessionId": s.id, "update": update})
}

type chunkUpdate struct {
	SessionUpdate string       `json:"sessionUpdate"`
	Content       contentBlock `json:"content"`
}

func (a *agent) messageChunk(s *session, text string) {
	a.update(s, chunkUpdate{"agent_message_chunk", contentBlock{"text", text}})
}

func (a *agent) thoughtChunk(s *session, text string) {
	a.update(s, chunkUpdate{"agent_thought_chunk", contentBlock{"text", text}})
}

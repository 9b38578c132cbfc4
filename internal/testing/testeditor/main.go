package testeditor

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const usage = `usage: testeditor [flags] -- AGENT [ARGS...]

Runs AGENT as an ACP agent and drives one session through it: initialize,
session/new, then each prompt, answering permission and fs requests. Prints
each turn's answer on stdout and "agent exit: N" on stderr. Exits 0 when
every turn ended and the agent exited, 1 otherwise, 2 on a usage error.

`

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ", ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// Main runs the editor with the given command line (without the program
// name) and returns its exit status: 0 when every turn ended (whatever the
// agent's exit status, which is printed to stderr as "agent exit: N"), 1
// with a one-line error when not, 2 on a usage error.
//
// Flags:
//
//	--prompt TEXT      a prompt, repeatable, "-" to read it from stdin (default "hello")
//	--cwd DIR          the session cwd (default the current directory)
//	--reject           reject permission requests instead of allowing them
//	--cancel-after N   send session/cancel after N session/update notifications of the first turn
//	--cancel-after-text N  send session/cancel after N agent_message_chunk notifications of the first turn
//	--sessions N       open N sessions at once and prompt them all at once
//	--cancel-request   cancel with $/cancel_request of the prompt instead of session/cancel
//	--timeout D        give up after D overall (default 30s; 0 for never)
//	--exit-wait D      after closing the agent's stdin, wait D for it to exit before SIGTERM (default 5s)
//	--term-wait D      after SIGTERM, wait D for the agent to exit before SIGKILL (default: --exit-wait)
//	--linger D         after the last turn, handle the agent's messages for D before closing its stdin
//	--string-ids       use UUID strings as request ids
//	--transcript FILE  write the transcript to FILE as NDJSON
//	--initialize-meta JSON  send JSON as initialize's _meta
//	--authenticate JSON     send an authenticate request with JSON as its params after initialize
//	--mcp-servers JSON      send JSON, an array, as the mcpServers of session/new and session/load
//	--mcp-acp NAME          host an MCP server NAME on the ACP connection (type acp); repeatable
//
// SIGINT and SIGTERM stop the session as the timeout does.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, code := parseCommandLine(args, stdin, stderr)
	if c == nil {
		return code
	}
	ctx, stop := signalContext(c.timeout)
	defer stop()
	tr, err := Run(ctx, c.opts)
	for _, t := range tr.Turns {
		if t.StopReason != "" {
			fmt.Fprintln(stdout, t.Text)
		}
	}
	switch tr.Signal {
	case "SIGTERM":
		fmt.Fprintf(stderr, "testeditor: the agent did not exit within %v of its stdin closing; sent SIGTERM\n", c.opts.ExitWait)
	case "SIGKILL":
		fmt.Fprintf(stderr, "testeditor: the agent did not exit within %v of its stdin closing, nor of SIGTERM; sent SIGKILL\n", c.opts.ExitWait)
	}
	if tr.ExitCode >= 0 {
		fmt.Fprintf(stderr, "agent exit: %d\n", tr.ExitCode)
	}
	if c.transcript != "" {
		if werr := writeTranscript(c.transcript, tr); werr != nil {
			fmt.Fprintf(stderr, "testeditor: %v\n", werr)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "testeditor: %v\n", err)
		return 1
	}
	return 0
}

// commandLine is what Main's flags ask for.
type commandLine struct {
	opts       Options
	timeout    time.Duration
	transcript string
}

// parseCommandLine reads Main's flags, and a prompt from stdin when one is
// "-". A nil commandLine comes with the exit status to return: 0 for
// --help, 2 for a usage error (said on stderr), 1 for a failed read.
func parseCommandLine(args []string, stdin io.Reader, stderr io.Writer) (*commandLine, int) {
	fs := flag.NewFlagSet("testeditor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var prompts stringList
	fs.Var(&prompts, "prompt", "send `TEXT` as a prompt; repeatable; - reads it from stdin (default \"hello\")")
	cwd := fs.String("cwd", "", "session working `DIR` (default the current directory)")
	reject := fs.Bool("reject", false, "reject permission requests")
	cancelAfter := fs.Int("cancel-after", 0, "send session/cancel after `N` session/update notifications of the first turn")
	cancelAfterText := fs.Int("cancel-after-text", 0, "send session/cancel after `N` agent_message_chunk notifications of the first turn")
	sessions := fs.Int("sessions", 1, "open `N` sessions at once and send each prompt to all of them at once")
	cancelRequest := fs.Bool("cancel-request", false, "cancel with $/cancel_request of the session/prompt request instead of session/cancel")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long overall; 0 for never")
	exitWait := fs.Duration("exit-wait", DefaultExitWait, "how long to wait for the agent to exit after closing its stdin")
	linger := fs.Duration("linger", 0, "after the last turn, go on handling the agent's messages this long before closing its stdin")
	termWait := fs.Duration("term-wait", 0, "how long to wait for the agent to exit after SIGTERM (default: --exit-wait)")
	stringIDs := fs.Bool("string-ids", false, "use UUID strings as request ids")
	mcpServers := fs.String("mcp-servers", "", "send `JSON`, an array, as the mcpServers of session/new and session/load")
	var mcpACP stringList
	fs.Var(&mcpACP, "mcp-acp", "host an MCP server `NAME` with testmcp's lookup tool on the ACP connection (type acp, RFD MCP-over-ACP), for an agent that advertises mcpCapabilities.acp; repeatable")
	zed := fs.Bool("zed", false, "behave as Zed 1.x: UUID ids, two sessions at once, modes, models, session/list, terminals, elicitation, then session/close and session/load of the first session")
	transcript := fs.String("transcript", "", "write the transcript to `FILE` as NDJSON")
	initMeta := fs.String("initialize-meta", "", "send `JSON` as initialize's _meta")
	authenticate := fs.String("authenticate", "", "send an authenticate request with `JSON` as its params after initialize")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "testeditor: no agent command; usage: testeditor [flags] -- AGENT [ARGS...]")
		return nil, 2
	}
	if (*sessions > 1 || *zed) && (*cancelAfter > 0 || *cancelAfterText > 0) {
		fmt.Fprintln(stderr, "testeditor: --sessions and --zed do not combine with --cancel-after or --cancel-after-text")
		return nil, 2
	}
	if *cancelAfter < 0 || *cancelAfterText < 0 || *timeout < 0 || *exitWait < 0 || *termWait < 0 {
		fmt.Fprintln(stderr, "testeditor: --cancel-after, --cancel-after-text, --timeout, --exit-wait and --term-wait must not be negative")
		return nil, 2
	}
	var rawJSON [3]json.RawMessage
	for i, v := range []struct{ flag, value string }{{"--initialize-meta", *initMeta}, {"--authenticate", *authenticate}, {"--mcp-servers", *mcpServers}} {
		if v.value == "" {
			continue
		}
		if !json.Valid([]byte(v.value)) {
			fmt.Fprintf(stderr, "testeditor: %s %q: not JSON\n", v.flag, v.value)
			return nil, 2
		}
		rawJSON[i] = json.RawMessage(v.value)
	}
	if code := promptFromStdin(prompts, stdin, stderr); code != 0 {
		return nil, code
	}
	return &commandLine{
		opts: Options{
			Argv:            fs.Args(),
			Stderr:          stderr,
			Cwd:             *cwd,
			Prompts:         prompts,
			Reject:          *reject,
			CancelAfter:     *cancelAfter,
			CancelAfterText: *cancelAfterText,
			CancelRequest:   *cancelRequest,
			Sessions:        *sessions,
			StringIDs:       *stringIDs,
			Zed:             *zed,
			ExitWait:        *exitWait,
			TermWait:        *termWait,
			Linger:          *linger,
			InitializeMeta:  rawJSON[0],
			Authenticate:    rawJSON[1],
			MCPServers:      rawJSON[2],
			MCPOverACP:      mcpACP,
		},
		timeout:    *timeout,
		transcript: *transcript,
	}, 0
}

// promptFromStdin replaces the prompt "-" with what stdin holds, its last
// newline cut. It returns 2 if "-" is given twice and 1 if stdin fails,
// having said so on stderr.
func promptFromStdin(prompts []string, stdin io.Reader, stderr io.Writer) int {
	fromStdin := false
	for i, p := range prompts {
		if p != "-" {
			continue
		}
		if fromStdin {
			fmt.Fprintln(stderr, "testeditor: --prompt - given twice")
			return 2
		}
		fromStdin = true
		b, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintf(stderr, "testeditor: reading the prompt from stdin: %v\n", err)
			return 1
		}
		prompts[i] = strings.TrimSuffix(string(b), "\n")
	}
	return 0
}

// signalContext returns a context that ends after timeout (never when 0),
// or at SIGINT or SIGTERM, with the reason as its cause.
func signalContext(timeout time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	stopTimer := func() {}
	if timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, timeout, fmt.Errorf("--timeout %v expired", timeout))
		stopTimer = func() { stop() }
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-sigs:
			cancel(fmt.Errorf("got %v", sig))
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		stopTimer()
		cancel(nil)
	}
}

func writeTranscript(path string, tr *Transcript) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := tr.WriteNDJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

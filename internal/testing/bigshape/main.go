// Command bigshape makes big ACP recordings of a chosen shape, for
// measuring acptap replay's memory and time on them (scripts/bench-bigstore).
// It has three roles:
//
//	bigshape editor --shape SHAPE --mib N   writes a session's editor frames to stdout
//	bigshape agent                          the ACP agent that answers them, on stdin/stdout
//	bigshape llm                            a Chat Completions upstream for the agent's LLM turns
//
// so that
//
//	bigshape llm &    # prints its base URL, for the llm and mix shapes
//	bigshape editor --shape S --mib N | acptap record --store DB --name S \
//	    --grace 10m --no-proxy-env --base-url OPENAI_BASE_URL=URL -- bigshape agent
//
// records a session of about N MiB (frames both ways and LLM request and
// response bodies) that `acptap replay --store DB S` replays green. The
// editor writes its frames without waiting for answers: the agent answers
// every frame in the order it reads them, deterministically, so the
// recording is the same session whatever the timing. The editor's output
// ends long before the agent's answers to its prompts do (a real editor
// would wait for the end of each turn), hence --grace: the agent exits at
// the end of its input once it has answered everything.
//
// Shapes (every session opens with initialize and session/new):
//
//	editor  ~900-byte _bench/put requests (numeric and string ids), each
//	        answered with a small result: the bulk is editor frames
//	echo    ~900-byte _bench/echo notifications, which the agent writes
//	        back whole, as cat would
//	echoreq the same as requests (numeric and string ids), written back
//	        whole: requests to the editor, which it leaves unanswered
//	agent   session/prompt requests "updates 1000", each answered with
//	        1,000 ~900-byte session/update notifications (message chunks,
//	        tool calls and their updates): the bulk is agent frames
//	llm     session/prompt requests "llm", each one LLM exchange of about
//	        50 KiB (a request carrying a system prompt and the last turns,
//	        a streamed answer of 8 deltas, which the agent forwards as
//	        message chunks): the bulk is LLM exchanges
//	mix     a third each of editor, agent and llm, interleaved
//
// The agent reaches the LLM at $OPENAI_BASE_URL/chat/completions.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `usage: bigshape editor --shape editor|echo|echoreq|agent|llm|mix --mib N
       bigshape agent
       bigshape llm [--addr HOST:PORT]
`

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "editor":
		return editorMain(args[1:], stdout, stderr)
	case "agent":
		return agentMain(stdin, stdout, stderr, os.Getenv("OPENAI_BASE_URL"))
	case "llm":
		return llmMain(args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return 2
}

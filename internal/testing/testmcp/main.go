package testmcp

import (
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Main is the testmcp command: an MCP server on stdin and stdout, or with
// --http ADDR on Streamable HTTP at http://ADDR/mcp, whose URL it prints
// on stdout, until interrupted. It returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testmcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", "", "serve Streamable HTTP on `ADDR` (127.0.0.1:0 for any port) at /mcp instead of stdio")
	logPath := fs.String("log", "", "append a JSON line per message read to `FILE`")
	name := fs.String("name", "testmcp", "the server's `NAME` in its initialize answer")
	big := fs.Int("big", 1<<20, "bytes the big tool answers")
	crashOn := fs.String("crash-on", "", "exit with status 3 when `TOOL` is called, before answering")
	worker := fs.Bool("worker", false, "end each lookup answer with the worker that served it, a random name of the run, as a load-balanced service does")
	junk := fs.Bool("junk", false, "print a line that is not JSON-RPC on stdout at start-up (stdio)")
	var answers []string
	fs.Func("answer", "the lookup tool's answer for a key: `KEY=VALUE`; repeatable", func(v string) error {
		answers = append(answers, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	table, err := parseAnswers(answers)
	if err != nil {
		fmt.Fprintf(stderr, "testmcp: %v\n", err)
		return 2
	}
	opts := Options{Name: *name, Answers: table, BigResult: *big, CrashOn: *crashOn}
	if *worker {
		opts.Worker = "worker-" + randomName()
	}
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "testmcp: %v\n", err)
			return 1
		}
		defer f.Close()
		opts.Log = f
	}
	s := New(opts)
	if *httpAddr == "" {
		if *junk {
			fmt.Fprintln(stdout, "testmcp starting (this line is not JSON-RPC)")
		}
		if err := s.ServeStdio(stdin, stdout); err != nil {
			fmt.Fprintf(stderr, "testmcp: %v\n", err)
			return 1
		}
		return 0
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		fmt.Fprintf(stderr, "testmcp: %v\n", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", s)
	srv := &http.Server{Handler: mux}
	fmt.Fprintf(stdout, "http://%s/mcp\n", ln.Addr())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "testmcp: %s\n", strings.TrimSpace(err.Error()))
		return 1
	}
	return 0
}

// randomName is six random letters.
func randomName() string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	var b [6]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return string(b[:])
}

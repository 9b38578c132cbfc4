// Command fakellm runs a scripted LLM API on a loopback port, for trying an
// agent against it by hand:
//
//	go run ./internal/testing/fakellm/cmd/fakellm -format anthropic|gemini|responses [-tls] [-delay D] [-variant S] [-v]
//	    anthropic: [-turn-delay D]
//	    gemini:    [-faults 429,503] [-retry-delay D] [-no-capacity]
//
// It prints the base URL (for ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL
// or OPENAI_BASE_URL; and, with -tls, the CA file) on stdout, then one line
// per request on stderr (-v: with the headers and body), until
// interrupted.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/acptap/acptap/internal/testing/fakeanthropic"
	"github.com/acptap/acptap/internal/testing/fakegemini"
	"github.com/acptap/acptap/internal/testing/fakellm"
	"github.com/acptap/acptap/internal/testing/fakeresponses"
)

func main() { os.Exit(run(os.Args[1:])) }

// flags are the command line, of every format.
type flags struct {
	format           string
	tls, verbose     bool
	delay, turnDelay time.Duration
	variant, faults  string
	retryDelay       time.Duration
	noCapacity       bool
}

func run(args []string) int {
	var f flags
	fs := flag.NewFlagSet("fakellm", flag.ContinueOnError)
	fs.StringVar(&f.format, "format", "", "the wire format: anthropic, gemini or responses")
	fs.BoolVar(&f.tls, "tls", false, "serve HTTPS")
	fs.DurationVar(&f.delay, "delay", 0, "pause before each event of a \"slowly\" answer")
	fs.StringVar(&f.variant, "variant", "", "prefix of every text answer")
	fs.BoolVar(&f.verbose, "v", false, "print request headers and bodies")
	fs.DurationVar(&f.turnDelay, "turn-delay", 0, "anthropic: pause before the answer of every request but a structured-output one")
	fs.StringVar(&f.faults, "faults", "", "gemini: comma-separated HTTP statuses, such as 429,503, for the first generate requests")
	fs.DurationVar(&f.retryDelay, "retry-delay", 0, "gemini: the RetryInfo delay of a 429 (default 1s)")
	fs.BoolVar(&f.noCapacity, "no-capacity", false, "gemini: a 429 says the server has no capacity for the model, not that the quota is exhausted")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch f.format {
	case "anthropic":
		opts := fakeanthropic.Options{Delay: f.delay, Variant: f.variant, TurnDelay: f.turnDelay}
		return serve(f, func() (*fakeanthropic.Listener, error) { return fakeanthropic.Start(opts), nil },
			func(dir string) (*fakeanthropic.Listener, error) { return fakeanthropic.StartTLS(opts, dir) },
			func(r fakeanthropic.Request) fakellm.Request { return r.Request },
			func(r fakeanthropic.Request) string { return fmt.Sprintf(" stream=%v", r.Stream) })
	case "gemini":
		opts := fakegemini.Options{Delay: f.delay, Variant: f.variant, RetryDelay: f.retryDelay, NoCapacity: f.noCapacity}
		for _, s := range strings.FieldsFunc(f.faults, func(r rune) bool { return r == ',' }) {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 400 || n > 599 {
				fmt.Fprintf(os.Stderr, "fakellm: -faults: %q is not an HTTP error status\n", s)
				return 2
			}
			opts.Faults = append(opts.Faults, n)
		}
		return serve(f, func() (*fakegemini.Listener, error) { return fakegemini.Start(opts), nil },
			func(dir string) (*fakegemini.Listener, error) { return fakegemini.StartTLS(opts, dir) },
			func(r fakegemini.Request) fakellm.Request { return r.Request },
			func(r fakegemini.Request) string { return " query=" + r.RawQuery })
	case "responses":
		opts := fakeresponses.Options{Delay: f.delay, Variant: f.variant}
		return serve(f, func() (*fakeresponses.Listener, error) { return fakeresponses.Start(opts), nil },
			func(dir string) (*fakeresponses.Listener, error) { return fakeresponses.StartTLS(opts, dir) },
			func(r fakeresponses.Request) fakellm.Request { return r },
			func(fakeresponses.Request) string { return "" })
	}
	fmt.Fprintf(os.Stderr, "fakellm: -format %q: want anthropic, gemini or responses\n", f.format)
	return 2
}

// listener is a running fake of any format: a Server of its format at a
// fakellm.Endpoint.
type listener[R any] interface {
	Requests() []R
	At() fakellm.Endpoint
	Close()
}

// serve starts a fake (plain, or TLS in the temporary directory), prints
// its URL and CA file, then its requests until interrupted.
func serve[R any, L listener[R]](f flags, start func() (L, error), startTLS func(dir string) (L, error), common func(R) fakellm.Request, extra func(R) string) int {
	var l L
	var ep fakellm.Endpoint
	var err error
	if f.tls {
		l, err = startTLS(os.TempDir())
	} else {
		l, err = start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		return 1
	}
	defer l.Close()
	ep = l.At()
	if ep.CAFile != "" {
		defer os.Remove(ep.CAFile)
		fmt.Println("ca", ep.CAFile)
	}
	fmt.Println("url", ep.URL)
	fakellm.Follow(l.Requests, func(r R) {
		c := common(r)
		fmt.Fprintf(os.Stderr, "%s%s\n", c.Line(), extra(r))
		if f.verbose {
			for k, v := range c.Header {
				fmt.Fprintf(os.Stderr, "  %s: %s\n", k, strings.Join(v, ", "))
			}
			fmt.Fprintf(os.Stderr, "  %s\n", c.Body)
		}
	})
	return 0
}

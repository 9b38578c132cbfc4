// Command fakegemini runs the scripted Gemini API of package fakegemini on
// a loopback port, for trying an agent against it by hand:
//
//	go run ./internal/testing/fakegemini/cmd/fakegemini [-tls] [-delay D] [-variant S] [-faults 429,503] [-retry-delay D] [-no-capacity] [-v]
//
// It prints the base URL (for GOOGLE_GEMINI_BASE_URL; and, with -tls, the
// CA file) on stdout, then one line per request on stderr (-v: with the
// headers and body), until interrupted.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/acptap/acptap/internal/testing/fakegemini"
	"github.com/acptap/acptap/internal/testing/fakellm"
)

func main() {
	useTLS := flag.Bool("tls", false, "serve HTTPS")
	delay := flag.Duration("delay", 0, "pause before each chunk of a \"slowly\" answer")
	variant := flag.String("variant", "", "prefix of every text answer")
	faults := flag.String("faults", "", "comma-separated HTTP statuses, such as 429,503, for the first generate requests")
	retryDelay := flag.Duration("retry-delay", 0, "the RetryInfo delay of a 429 (default 1s)")
	noCapacity := flag.Bool("no-capacity", false, "a 429 says the server has no capacity for the model, not that the quota is exhausted")
	verbose := flag.Bool("v", false, "print request headers and bodies")
	flag.Parse()
	opts := fakegemini.Options{Delay: *delay, Variant: *variant, RetryDelay: *retryDelay, NoCapacity: *noCapacity}
	for _, f := range strings.FieldsFunc(*faults, func(r rune) bool { return r == ',' }) {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 400 || n > 599 {
			fmt.Fprintf(os.Stderr, "fakegemini: -faults: %q is not an HTTP error status\n", f)
			os.Exit(2)
		}
		opts.Faults = append(opts.Faults, n)
	}
	var l *fakegemini.Listener
	if *useTLS {
		var err error
		if l, err = fakegemini.StartTLS(opts, os.TempDir()); err != nil {
			fmt.Fprintln(os.Stderr, "fakegemini:", err)
			os.Exit(1)
		}
		defer os.Remove(l.CAFile)
		fmt.Println("ca", l.CAFile)
	} else {
		l = fakegemini.Start(opts)
	}
	defer l.Close()
	fmt.Println("url", l.URL)
	fakellm.Follow(l.Requests, func(r fakegemini.Request) {
		fmt.Fprintf(os.Stderr, "%s %s?%s step=%s tools=%s\n", r.Method, r.Path, r.RawQuery, r.Step, strings.Join(r.Tools, ","))
		if *verbose {
			for k, v := range r.Header {
				fmt.Fprintf(os.Stderr, "  %s: %s\n", k, strings.Join(v, ", "))
			}
			fmt.Fprintf(os.Stderr, "  %s\n", r.Body)
		}
	})
}

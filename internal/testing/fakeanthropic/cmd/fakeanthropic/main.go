// Command fakeanthropic runs the scripted Anthropic Messages API of package
// fakeanthropic on a loopback port, for trying an agent against it by hand:
//
//	go run ./internal/testing/fakeanthropic/cmd/fakeanthropic [-tls] [-delay D] [-turn-delay D] [-variant S] [-v]
//
// It prints the base URL (for ANTHROPIC_BASE_URL; and, with -tls, the CA
// file) on stdout, then one line per request on stderr (-v: with the
// headers and decoded body), until interrupted.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/acptap/acptap/internal/testing/fakeanthropic"
	"github.com/acptap/acptap/internal/testing/fakellm"
)

func main() {
	useTLS := flag.Bool("tls", false, "serve HTTPS")
	delay := flag.Duration("delay", 0, "pause before each delta of a \"slowly\" answer")
	variant := flag.String("variant", "", "prefix of every text answer")
	turnDelay := flag.Duration("turn-delay", 0, "pause before the answer of every request but a structured-output one")
	verbose := flag.Bool("v", false, "print request headers and bodies")
	flag.Parse()
	opts := fakeanthropic.Options{Delay: *delay, Variant: *variant, TurnDelay: *turnDelay}
	var l *fakeanthropic.Listener
	if *useTLS {
		var err error
		if l, err = fakeanthropic.StartTLS(opts, os.TempDir()); err != nil {
			fmt.Fprintln(os.Stderr, "fakeanthropic:", err)
			os.Exit(1)
		}
		defer os.Remove(l.CAFile)
		fmt.Println("ca", l.CAFile)
	} else {
		l = fakeanthropic.Start(opts)
	}
	defer l.Close()
	fmt.Println("url", l.URL)
	fakellm.Follow(l.Requests, func(r fakeanthropic.Request) {
		fmt.Fprintf(os.Stderr, "%s %s encoding=%q stream=%v step=%s tools=%s\n", r.Method, r.Path, r.Encoding, r.Stream, r.Step, strings.Join(r.Tools, ","))
		if *verbose {
			for k, v := range r.Header {
				fmt.Fprintf(os.Stderr, "  %s: %s\n", k, strings.Join(v, ", "))
			}
			fmt.Fprintf(os.Stderr, "  %s\n", r.Body)
		}
	})
}

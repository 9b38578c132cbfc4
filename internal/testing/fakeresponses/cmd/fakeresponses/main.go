// Command fakeresponses runs the scripted Responses API of package
// fakeresponses on a loopback port, for trying an agent against it by hand:
//
//	go run ./internal/testing/fakeresponses/cmd/fakeresponses [-tls] [-delay D] [-v]
//
// It prints the base URL (and, with -tls, the CA file) on stdout, then one
// line per request on stderr (-v: with the decoded body), until interrupted.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/acptap/acptap/internal/testing/fakellm"
	"github.com/acptap/acptap/internal/testing/fakeresponses"
)

func main() {
	useTLS := flag.Bool("tls", false, "serve HTTPS")
	delay := flag.Duration("delay", 0, "pause before each delta of a \"slowly\" answer")
	variant := flag.String("variant", "", "prefix of every text answer")
	verbose := flag.Bool("v", false, "print request headers and bodies")
	flag.Parse()
	opts := fakeresponses.Options{Delay: *delay, Variant: *variant}
	var l *fakeresponses.Listener
	if *useTLS {
		var err error
		if l, err = fakeresponses.StartTLS(opts, os.TempDir()); err != nil {
			fmt.Fprintln(os.Stderr, "fakeresponses:", err)
			os.Exit(1)
		}
		defer os.Remove(l.CAFile)
		fmt.Println("ca", l.CAFile)
	} else {
		l = fakeresponses.Start(opts)
	}
	defer l.Close()
	fmt.Println("url", l.URL)
	fakellm.Follow(l.Requests, func(r fakeresponses.Request) {
		fmt.Fprintf(os.Stderr, "%s %s encoding=%q step=%s tools=%s\n", r.Method, r.Path, r.Encoding, r.Step, strings.Join(r.Tools, ","))
		if *verbose {
			for k, v := range r.Header {
				fmt.Fprintf(os.Stderr, "  %s: %s\n", k, strings.Join(v, ", "))
			}
			fmt.Fprintf(os.Stderr, "  %s\n", r.Body)
		}
	})
}

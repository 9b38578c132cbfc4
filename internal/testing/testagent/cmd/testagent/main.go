// Command agent is the ACP test agent of package testagent, as a program.
package main

import (
	"os"

	"github.com/acptap/acptap/internal/testing/testagent"
)

func main() {
	os.Exit(testagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

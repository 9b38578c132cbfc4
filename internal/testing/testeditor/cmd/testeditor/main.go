// Command editor is the scripted ACP client of package testeditor, as a program.
package main

import (
	"os"

	"github.com/acptap/acptap/internal/testing/testeditor"
)

func main() {
	os.Exit(testeditor.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

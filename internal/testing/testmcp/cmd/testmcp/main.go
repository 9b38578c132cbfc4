// Command testmcp runs the test MCP server (package testmcp) on stdio, or
// on Streamable HTTP with -http ADDR.
package main

import (
	"os"

	"github.com/acptap/acptap/internal/testing/testmcp"
)

func main() { os.Exit(testmcp.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

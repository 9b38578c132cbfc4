// Command acptap records and replays AI coding agents: the editor↔agent ACP
// stdio and the agent↔LLM HTTP traffic.
package main

import "os"

func main() {
	os.Exit(Main(os.Args, &IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}

package main

import "testing"

func TestRunRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-format", "cohere"},
		{"-format", "gemini", "-faults", "200"},
		{"-format", "anthropic", "-bogus"},
	} {
		if got := run(args); got != 2 {
			t.Errorf("run(%q) = %d, want 2", args, got)
		}
	}
}

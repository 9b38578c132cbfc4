package main

import (
	"strings"
	"testing"
)

// TestDemo runs `acptap demo` as a user would: record, replay equal, and a
// changed agent caught with its diff.
func TestDemo(t *testing.T) {
	out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "demo")
	if code != 0 {
		t.Fatalf("acptap demo: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`agent:  "Fixed the typo`,
		"llm     s1   POST http://127.0.0.1:",
		`tool: read_file{"path":"notes.txt"}`,
		"PASS fix-typo",
		`FAIL fix-typo: agent output differs in turn 1, requests and responses, message 3: expected session/request_permission request, got fs/read_text_file request`,
		`-  "method": "session/request_permission",`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acptap/acptap/store"
)

// TestShowClasses: show marks the exchanges that are not the LLM's on the
// timeline, and --json gives every exchange its class, for exchanges
// written before classes existed too (an exchange of a format-2
// recording, without an end).
func TestShowClasses(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	st, err := store.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Create(store.Recording{Name: "classes", Argv: []string{"agent"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	exchanges := []string{
		`{"route":"proxy","method":"POST","url":"https://api.openai.com/v1/chat/completions","request_headers":{},"request_body":null,"status":200,"ttfb":0,"duration":0,"end":"complete"}`,
		`{"route":"proxy","method":"GET","url":"https://registry.npmjs.org/left-pad","request_headers":{},"request_body":null,"status":200,"ttfb":0,"duration":0,"end":"complete"}`,
		`{"route":"base-url","base_url_var":"ANTHROPIC_BASE_URL","method":"HEAD","url":"https://api.anthropic.com/","request_headers":{},"request_body":null,"status":200,"ttfb":0,"duration":0,"end":"complete"}`,
		// Format 2: no end.
		`{"route":"proxy","method":"POST","url":"https://telemetry.example/v1/events","request_headers":{},"request_body":null,"status":204,"ttfb":0,"duration":0}`,
	}
	for _, x := range exchanges {
		w.Append(store.Event{Kind: store.KindExchange, Lane: store.LaneLLM, Data: []byte(x)})
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	var classes []string
	for _, e := range llmEvents(t, db, "classes") {
		c, _ := e["class"].(string)
		classes = append(classes, c)
	}
	if want := []string{"llm", "http", "llm", "http"}; !slices.Equal(classes, want) {
		t.Errorf("show --json classes %q, want %q", classes, want)
	}

	out, err := exec.Command("acptap", "show", "--store", db, "classes").Output()
	if err != nil {
		t.Fatal(err)
	}
	var marked []bool
	for _, line := range strings.Split(string(out), "\n") {
		if regexp.MustCompile(`^\s+\d+\s+\+\S+\s+llm\s`).MatchString(line) {
			marked = append(marked, regexp.MustCompile(`\sllm\s+http (GET|POST|HEAD) `).MatchString(line))
		}
	}
	if want := []bool{false, true, false, true}; !slices.Equal(marked, want) {
		t.Errorf("timeline marks exchanges as http %v, want %v:\n%s", marked, want, out)
	}
}

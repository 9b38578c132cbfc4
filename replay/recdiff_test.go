package replay

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/acptap/acptap/store"
)

// TestDiff compares recordings of the LLM-backed test agent, each made
// in a workspace of its own: the same session compares equal, paths and
// ids normalized as for a replay; a changed system prompt is request
// drift in each LLM request and nothing in the agent's output; one LLM
// call more is a request one side has alone; a changed answer is the
// agent output's first difference, in replay's words.
func TestDiff(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recordSession(t, st, "a", session{llm: true})
	recordSession(t, st, "b", session{llm: true})
	recordSession(t, st, "french", session{llm: true, args: []string{"--system", "Answer in French."}})
	recordSession(t, st, "titled", session{llm: true, args: []string{"--title-call"}})
	recordSession(t, st, "scripted", session{args: []string{"--message", "Something else"}})

	res, err := Diff(st, "a", "b", DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Equal() || res.Diff != "" || len(res.Requests) == 0 {
		t.Errorf("a and b: divergences %v, %d requests; want equal, with requests compared", res.Divergences, len(res.Requests))
	}

	res, err = Diff(st, "a", "french", DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Equal() || res.Diff != "" {
		t.Fatalf("a and french: divergences %v, diff %q; want request drift alone", res.Divergences, res.Diff)
	}
	for _, d := range res.Divergences {
		if d.Kind != RequestDrift || !strings.Contains(d.Message, "Answer in French.") || !strings.HasPrefix(d.Path, "$.body.messages") {
			t.Errorf("a and french: %v %s at %s; want request drift in the messages", d.Kind, d.Message, d.Path)
		}
	}
	if got, want := len(res.Divergences), len(res.Requests); got != want {
		t.Errorf("a and french: %d drifts, want one per request, %d", got, want)
	}

	res, err = Diff(st, "a", "titled", DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var alone int
	for _, d := range res.Divergences {
		if strings.HasSuffix(d.Message, "is in titled only") {
			alone++
		}
	}
	if alone != 1 {
		t.Errorf("a and titled: %v; want one request in titled only", res.Divergences)
	}

	res, err = Diff(st, "a", "scripted", DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Equal() || res.Divergences[0].Kind != OutputDiffers || !strings.HasPrefix(res.Divergences[0].Message, "agent output differs in turn 1, agent message") {
		t.Errorf("a and scripted: %v; want the agent message first", res.Divergences)
	}
	if !strings.Contains(res.Diff, "--- a\n+++ scripted\n") {
		t.Errorf("a and scripted: the diff's header is not the names:\n%s", res.Diff)
	}

	if _, err := Diff(st, "a", "nope", DiffOptions{}); err == nil {
		t.Errorf("Diff with a missing recording: no error")
	}
}

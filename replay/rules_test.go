package replay

import (
	"errors"
	"strings"
	"testing"

	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/store"
)

// TestRunStoredRules: the rules stored with a recording apply to the
// agent's output and to the requests, after the user's; Uncalibrated
// leaves them out; a damaged blob is an error.
func TestRunStoredRules(t *testing.T) {
	st := openStore(t)
	argv := recordSession(t, st, "llm", session{llm: true, prompts: []string{"hello"}})
	if rules, err := StoredRules(st, "llm"); err != nil || rules != nil {
		t.Fatalf("StoredRules of an uncalibrated recording = %v, %v; want none", rules, err)
	}
	if _, err := StoredRules(st, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("StoredRules of a missing recording: %v, want ErrNotFound", err)
	}
	// A changed agent: a thought the recording lacks, and a system
	// prompt with a word the recording lacks.
	opts := runOptions(t)
	opts.Argv = append(argv, "--system", " Run 4242.")
	opts.Requests = RequestsFail
	res := replayIt(t, st, "llm", opts)
	if got := kinds(res.Divergences); len(got) != 1 || got[0] != RequestDrift {
		t.Fatalf("without rules: divergences %v, want the drifted request", res.Divergences)
	}
	// The stored rule sees what the user's rule made of the prompt: it
	// deletes " Pass 4242.", which was " Run 4242." before.
	rules, err := normalize.ParseRules([]byte(`[{"path":"$.body.messages[*].content","regexp":"( Pass [0-9]+\\.)$","replace":""}]`))
	if err != nil {
		t.Fatal(err)
	}
	user, err := normalize.ParseRules([]byte(`[{"regexp":" Run ([0-9]+)","replace":" Pass $1"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutBlob("llm", store.RulesBlob, normalize.FormatRules(rules)); err != nil {
		t.Fatal(err)
	}
	opts.Rules = user
	opts.KeepRequests = true
	res = replayIt(t, st, "llm", opts)
	if !res.Equal() {
		t.Errorf("with the stored rules: divergences %v, want none", res.Divergences)
	}
	if len(res.Requests) != 1 || res.Requests[0].Number != 1 {
		t.Fatalf("kept requests %+v, want exchange 1", res.Requests)
	}
	content := func(v any) string {
		msgs := v.(map[string]any)["body"].(map[string]any)["messages"].([]any)
		return msgs[0].(map[string]any)["content"].(string)
	}
	if got := content(res.Requests[0].Live); !strings.HasSuffix(got, "to read files.") {
		t.Errorf("kept live system prompt %q, want it normalized with the stored rule", got)
	}
	if got, want := content(res.Requests[0].Recorded), content(res.Requests[0].Live); got != want {
		t.Errorf("kept recorded system prompt %q, want %q", got, want)
	}
	opts.Uncalibrated = true
	res = replayIt(t, st, "llm", opts)
	if got := kinds(res.Divergences); len(got) != 1 || got[0] != RequestDrift {
		t.Errorf("Uncalibrated: divergences %v, want the drifted request", res.Divergences)
	}

	if err := st.PutBlob("llm", store.RulesBlob, []byte(`{"not":"rules"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := StoredRules(st, "llm"); !errors.Is(err, ErrStoredRules) || !strings.Contains(err.Error(), `"llm"`) {
		t.Errorf("StoredRules of a damaged blob: %v, want ErrStoredRules naming the recording", err)
	}
	opts.Uncalibrated = false
	if _, err := Run(t.Context(), st, "llm", opts); !errors.Is(err, ErrStoredRules) {
		t.Errorf("Run with a damaged blob: %v, want ErrStoredRules", err)
	}
}

// TestRunStoredRulesOutput: the stored rules apply to the agent's output.
func TestRunStoredRulesOutput(t *testing.T) {
	st := openStore(t)
	argv := recordSession(t, st, "r", session{})
	opts := runOptions(t)
	opts.Argv = append(argv, "--message", "Something else")
	if res := replayIt(t, st, "r", opts); res.Equal() {
		t.Fatal("a changed message replays equal without rules")
	}
	rules := []byte(`[{"path":"$.params.update.content.text","regexp":"^(You said: hello|Something else)$","replace":"<text>"}]`)
	if err := st.PutBlob("r", store.RulesBlob, rules); err != nil {
		t.Fatal(err)
	}
	if res := replayIt(t, st, "r", opts); !res.Equal() {
		t.Errorf("with the stored rule: divergences %v, want none\n%s", res.Divergences, res.Diff)
	}
}

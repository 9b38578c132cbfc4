package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// showLines returns the events of `show --json NAME` without their seq,
// which --update renumbers: the agent's and the others.
func showLines(t *testing.T, db, name string) (agent, others []string) {
	t.Helper()
	out, err := exec.Command("acptap", "show", "--store", db, "--json", name).Output()
	if err != nil {
		t.Fatalf("show --json %s: %v", name, err)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("show --json line %q: %v", line, err)
		}
		delete(m, "seq")
		b, err := json.Marshal(m) // keys sorted
		if err != nil {
			t.Fatal(err)
		}
		if string(m["lane"]) == `"agent"` {
			agent = append(agent, string(b))
		} else {
			others = append(others, string(b))
		}
	}
	return agent, others
}

// countLane counts the lines of lane among show lines.
func countLane(lines []string, lane string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, `"lane":"`+lane+`"`) {
			n++
		}
	}
	return n
}

func TestReplayUpdateRoundTrip(t *testing.T) {
	upstream, _ := chatUpstream(t, false)
	for _, tc := range []struct {
		name      string
		flags     []string // of acptap record
		agent     []string // the recorded agent's arguments
		changed   []string // the changed agent's
		llm, reqs bool     // the recording has LLM exchanges, agent requests
	}{
		{
			// Agent requests with UUID ids, answered from the recording,
			// and a sessionId minted anew by every run.
			name:    "scripted",
			agent:   []string{"--read", "notes.txt", "--string-ids"},
			changed: []string{"--read", "notes.txt", "--string-ids", "--message", "other"},
			reqs:    true,
		},
		{
			// LLM exchanges, which --update never touches: the changed
			// agent prints a line that is not JSON first.
			name:    "llm",
			flags:   []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"},
			agent:   []string{"--title-call"},
			changed: []string{"--title-call", "--junk"},
			llm:     true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := workspace(t)
			db := filepath.Join(dir, "s.db")
			recordSession(t, dir, db, "rt", agentEnv(), tc.flags, tc.agent...)
			agentBefore, othersBefore := showLines(t, db, "rt")
			if got := countLane(othersBefore, "llm"); tc.llm && got != 3 {
				t.Fatalf("the recording has %d LLM exchanges, want 3 (title and two turns)", got)
			}
			if got := strings.Count(strings.Join(agentBefore, "\n"), `"kind":"request"`); tc.reqs && got == 0 {
				t.Fatal("the recording has no agent request")
			}

			// replay replays rt with the test agent given these arguments.
			replay := func(update bool, agentArgs []string) (string, int) {
				t.Helper()
				args := []string{"replay", "--store", db}
				if update {
					args = append(args, "--update")
				}
				args = append(append(args, "rt", "--", "testagent"), agentArgs...)
				out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), args...)
				return out + errOut, code
			}
			changed, original := tc.changed, tc.agent

			if out, code := replay(false, changed); code != ExitDiverged || !strings.HasPrefix(out, "FAIL rt: agent output differs") {
				t.Fatalf("changed agent: exit %d, want %d and FAIL:\n%s", code, ExitDiverged, out)
			}
			out, code := replay(true, changed)
			if code != 0 {
				t.Fatalf("--update: exit %d, want 0:\n%s", code, out)
			}
			agentAfter, othersAfter := showLines(t, db, "rt")
			want := fmt.Sprintf("UPDATED rt (expected agent stream rewritten: %d frames)\n", len(agentAfter))
			if !strings.HasPrefix(out, want) {
				t.Errorf("--update printed:\n%s\nwant it to start with %q", out, want)
			}
			if slices.Equal(agentAfter, agentBefore) {
				t.Error("the agent stream did not change")
			}
			// Editor frames, stderr and LLM exchanges: the same data at the
			// same times in the same order.
			if !slices.Equal(othersAfter, othersBefore) {
				t.Errorf("--update changed other lanes than the agent's:\nbefore:\n%s\nafter:\n%s",
					strings.Join(othersBefore, "\n"), strings.Join(othersAfter, "\n"))
			}

			for i := range 3 {
				if out, code := replay(false, changed); code != 0 || !strings.HasPrefix(out, "PASS rt") {
					t.Fatalf("changed agent after --update, run %d: exit %d, want PASS:\n%s", i, code, out)
				}
			}
			if out, code := replay(false, original); code != ExitDiverged || !strings.HasPrefix(out, "FAIL rt: agent output differs") {
				t.Errorf("original agent after --update: exit %d, want %d and FAIL:\n%s", code, ExitDiverged, out)
			}
			// An equal replay under --update writes nothing.
			if out, code := replay(true, changed); code != 0 || !strings.HasPrefix(out, "PASS rt") {
				t.Errorf("--update of an equal replay: exit %d, want PASS:\n%s", code, out)
			}
			if again, _ := showLines(t, db, "rt"); !slices.Equal(again, agentAfter) {
				t.Error("--update of an equal replay rewrote the agent stream")
			}
		})
	}
}

func TestReplayUpdateRefusesEditorSideDivergence(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "plain", agentEnv(), nil)
	before, _ := showLines(t, db, "plain")
	// The agent now reads a file: its permission request has no recorded
	// answer. Rewriting the agent stream cannot fix that.
	out, _, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--update", "--timeout", "5s", "plain", "--", "testagent", "--read", "notes.txt")
	if code != ExitDiverged || !strings.HasPrefix(out, "FAIL plain: ") || !strings.Contains(out, "\n  not updated: cannot update the recording \"plain\": ") {
		t.Errorf("exit %d, want %d, FAIL and why it was not updated:\n%s", code, ExitDiverged, out)
	}
	if after, _ := showLines(t, db, "plain"); !slices.Equal(after, before) {
		t.Error("the recording changed")
	}
}

func TestReplayUpdateAllSummary(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "a", agentEnv(), nil)
	recordSession(t, dir, db, "b", agentEnv(), nil, "--message", "x")
	out, _, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--update", "--all", "--", "testagent", "--message", "x")
	if code != 0 || !strings.Contains(out, "UPDATED a (") || !strings.Contains(out, "PASS b (") || !strings.HasSuffix(out, "1 passed, 1 updated, 0 failed\n") {
		t.Errorf("replay --update --all: exit %d, want 0:\n%s", code, out)
	}
}

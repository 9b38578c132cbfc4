package testagent_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/testing/testagent"
	"github.com/acptap/acptap/internal/testing/testeditor"
)

// recvShape describes what the agent sent, in order: "new" and "answer"
// for the session/new and session/prompt answers, the update kinds of
// session/update, with the status of tool call updates
// ("tool_call_update completed"), and the methods of requests.
func recvShape(msgs []wireMsg) []string {
	var out []string
	for _, m := range msgs {
		switch {
		case m.Dir != "recv":
		case m.Method == "session/update":
			u, _ := m.Params["update"].(map[string]any)
			kind, _ := u["sessionUpdate"].(string)
			if kind == "tool_call_update" {
				kind += " " + u["status"].(string)
			}
			out = append(out, kind)
		case m.Method != "":
			out = append(out, m.Method)
		case m.Result["sessionId"] != nil:
			out = append(out, "new")
		case m.Result["stopReason"] != nil:
			out = append(out, "answer")
		}
	}
	// The chunks of an answer as one.
	return slices.Compact(out)
}

func TestConcurrentUpdatesOrders(t *testing.T) {
	for _, tc := range []struct {
		order string
		want  []string
	}{
		{"early", []string{
			"available_commands_update", "new",
			"tool_call", "session/request_permission", "tool_call_update in_progress", "fs/read_text_file", "tool_call_update completed",
			"agent_message_chunk", "usage_update", "answer"}},
		{"late", []string{
			"new", "available_commands_update",
			"tool_call", "session/request_permission", "tool_call_update in_progress", "fs/read_text_file",
			"agent_message_chunk", "tool_call_update completed", "answer", "usage_update"}},
		{"late --racing tool", []string{
			"available_commands_update", "new",
			"tool_call", "session/request_permission", "tool_call_update in_progress", "fs/read_text_file",
			"agent_message_chunk", "tool_call_update completed", "usage_update", "answer"}},
		{"late --racing commands,usage", []string{
			"new", "available_commands_update",
			"tool_call", "session/request_permission", "tool_call_update in_progress", "fs/read_text_file", "tool_call_update completed",
			"agent_message_chunk", "answer", "usage_update"}},
	} {
		t.Run(tc.order, func(t *testing.T) {
			args := append([]string{"--read", "notes.txt", "--concurrent-updates"}, strings.Fields(tc.order)...)
			tr, _ := mustSession(t, testeditor.Options{Cwd: workspace(t, "one line\n")}, nil, args...)
			if got := recvShape(decode(t, tr)); !slices.Equal(got, tc.want) {
				t.Errorf("the agent sent\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestConcurrentUpdatesTimed checks that the timed order sends the same
// updates, each within its window: the commands before the first answer,
// the tool's final update after its in_progress and before the answer, and
// each turn's usage before the next turn's output; in any order there.
func TestConcurrentUpdatesTimed(t *testing.T) {
	tr, _ := mustSession(t, testeditor.Options{Cwd: workspace(t, "one line\n"), Prompts: []string{"one", "two"}}, nil,
		"--read", "notes.txt", "--concurrent-updates", "timed")
	got := recvShape(decode(t, tr))
	count := func(kind string) int {
		n := 0
		for _, k := range got {
			if k == kind {
				n++
			}
		}
		return n
	}
	for kind, n := range map[string]int{"available_commands_update": 1, "tool_call_update completed": 2, "tool_call_update in_progress": 2, "usage_update": 2, "answer": 2} {
		if count(kind) != n {
			t.Errorf("%d %s, want %d, in %q", count(kind), kind, n, got)
		}
	}
	answer := slices.Index(got, "answer")
	if i := slices.Index(got, "available_commands_update"); i > answer {
		t.Errorf("the commands come after the first answer: %q", got)
	}
	if i := slices.Index(got, "tool_call_update completed"); i > answer || i < slices.Index(got, "tool_call_update in_progress") {
		t.Errorf("the first tool call's final update comes after the answer or before its in_progress: %q", got)
	}
	// The second turn starts with its tool call, after the first usage.
	second := slices.Index(got[answer+1:], "tool_call") + answer + 1
	if i := slices.Index(got, "usage_update"); i > second {
		t.Errorf("the first turn's usage comes after the second turn's tool call: %q", got)
	}
}

func TestPlants(t *testing.T) {
	run := func(args ...string) *testeditor.Transcript {
		tr, _ := mustSession(t, testeditor.Options{Cwd: workspace(t, "one line\n")}, nil, append([]string{"--read", "notes.txt", "--concurrent-updates", "early"}, args...)...)
		return tr
	}
	if got := messageChunks(decode(t, run("--plant", "swap-chunks"))); len(got) < 2 || strings.Join(got, "") != ": helloYou said" {
		t.Errorf("swap-chunks: chunks %q, want the first two swapped", got)
	}
	if got := recvShape(decode(t, run("--plant", "progress-last"))); !slices.Equal(got[4:7], []string{"fs/read_text_file", "tool_call_update completed", "tool_call_update in_progress"}) {
		t.Errorf("progress-last: the agent sent %q, want in_progress after completed", got)
	}
	if got := recvShape(decode(t, run("--plant", "status-failed"))); !slices.Contains(got, "tool_call_update failed") || slices.Contains(got, "tool_call_update completed") {
		t.Errorf("status-failed: the agent sent %q, want the final update failed", got)
	}
}

func TestRaceUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrent-updates", "sometimes"}, `--concurrent-updates "sometimes": want timed, late or early`},
		{[]string{"--plant", "bug"}, `--plant "bug": want swap-chunks, progress-last, status-failed, second-session, history-drop or mode-ignored`},
		{[]string{"--racing", "tool,plan"}, `--racing "tool,plan": want a comma-separated list of commands, tool and usage`},
		{[]string{"--flaky", "tool-done,other"}, `--flaky "tool-done,other": want a comma-separated list of tool-done and drain`},
	} {
		var stdout, stderr bytes.Buffer
		code := testagent.Main(tt.args, strings.NewReader(""), &stdout, &stderr, func(string) string { return "" })
		if code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("Main(%q) = %d with stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}

package timeline

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files of the pages' data (and docs/timeline.png)")

// golden compares v, as indented JSON, with testdata/name, or rewrites
// it under -update.
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; run go test ./timeline -update", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the data of %s differs from the golden file; if the change is meant, run go test ./timeline -update and review the diff\ngot:\n%s", name, got)
	}
}

// TestRecordingGolden: the data a recording's page embeds, every field.
func TestRecordingGolden(t *testing.T) {
	st := sampleStore(t, "weather")
	p, err := Recording(st, "weather")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "recording.json", p)
}

// TestRecordingLinks: the causal links of the sample, spelled out.
func TestRecordingLinks(t *testing.T) {
	st := sampleStore(t, "weather")
	p, err := Recording(st, "weather")
	if err != nil {
		t.Fatal(err)
	}
	find := func(pred func(Event) bool) int { return eventIndex(t, p, pred) }
	method := func(lane, m string) func(Event) bool {
		return func(e Event) bool { return e.Lane == lane && e.Method == m }
	}
	if len(p.Turns) != 2 {
		t.Fatalf("%d turns, want 2", len(p.Turns))
	}
	if got, want := p.Turns[0].Stop, "end_turn"; got != want {
		t.Errorf("turn 1 stop %q, want %q", got, want)
	}
	if got := p.Turns[1].Answer; got < 0 || !p.Events[got].Err {
		t.Errorf("turn 2's answer %d is not the error answer", got)
	}
	var llm []int
	for i, e := range p.Events {
		if e.Kind == "exchange" {
			llm = append(llm, i)
		}
	}
	if len(llm) != 2 || !slices.Equal(p.Turns[0].LLM, llm) {
		t.Fatalf("turn 1's LLM exchanges %v, want %v", p.Turns[0].LLM, llm)
	}
	if len(p.Tools) != 1 {
		t.Fatalf("%d tool calls, want 1", len(p.Tools))
	}
	tool := p.Tools[0]
	if tool.Cause != llm[0] || tool.Result != llm[1] {
		t.Errorf("tool call cause %d, result %d; want %d and %d", tool.Cause, tool.Result, llm[0], llm[1])
	}
	if tool.Status != "completed" || tool.Title != "weather Florence" {
		t.Errorf("tool call %q %q, want completed, weather Florence", tool.Title, tool.Status)
	}
	for _, m := range []string{"session/request_permission", "fs/read_text_file", "terminal/create", "terminal/output"} {
		i := find(method("agent", m))
		if !slices.Contains(tool.Events, i) {
			t.Errorf("the tool call's events %v lack the %s request %d", tool.Events, m, i)
		}
		if r := p.Events[i].Pair - 1; r < 0 || !slices.Contains(tool.Events, r) || p.Events[r].Lane != "editor" {
			t.Errorf("the %s request's response %d is not the editor's, in the tool call", m, r)
		}
	}
	if len(p.Groups) != 1 || p.Groups[0].Text != "It is sunny in Florence." || len(p.Groups[0].Events) != 3 {
		t.Errorf("groups %+v, want one of the 3 chunks", p.Groups)
	}
	stderr := find(func(e Event) bool { return e.Lane == "stderr" })
	if got, want := p.Events[stderr].Raw, "log: running weather for Florence, Italy"; got != want {
		t.Errorf("stderr line %q, want the two pieces joined, %q", got, want)
	}
	if m := p.Events[llm[0]].Exchange.Message; m == nil || len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != "weather" {
		t.Errorf("exchange 1's reassembled message %+v, want the weather call", m)
	}
	if junk := find(func(e Event) bool { return e.Kind == "junk" }); p.Events[junk].Lane != "agent" {
		t.Errorf("junk on lane %s", p.Events[junk].Lane)
	}
}

func eventIndex(t *testing.T, p *Page, pred func(Event) bool) int {
	t.Helper()
	for i, e := range p.Events {
		if pred(e) {
			return i
		}
	}
	t.Fatal("no such event")
	return -1
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func containsInt(xs []int, x int) bool { return slices.Contains(xs, x) }

func itoa(i int) string { return strconv.Itoa(i) }

// TestExchangeSummary: an exchange's row reads its method, route and
// status, then the answer's text and tool calls as acptap show words
// them, the reasoning after them, and the stream's errors.
func TestExchangeSummary(t *testing.T) {
	ex := &Exchange{Class: "llm", Method: "POST", URL: "https://api.anthropic.com/v1/messages?beta=true", Status: 200,
		Message: &wire.Message{Reasoning: "hmm", Text: "Done.", ToolCalls: []wire.ToolCall{{Name: "Bash", Arguments: `{"command":"ls"}`}}, Errors: []string{"overloaded_error: busy"}}}
	got, failed := exchangeSummary(ex)
	want := `POST /v1/messages?beta=true → 200  text: "Done."  tool: Bash{"command":"ls"}  reasoning: "hmm"  stream error: overloaded_error: busy`
	if got != want || !failed {
		t.Errorf("exchangeSummary = %q, %v; want %q, true", got, failed, want)
	}
	ex = &Exchange{Class: "http", Method: "GET", URL: "https://example.com/", Error: "no response: refused"}
	if got, failed := exchangeSummary(ex); got != "http GET /  error: no response: refused" || !failed {
		t.Errorf("exchangeSummary = %q, %v", got, failed)
	}
}

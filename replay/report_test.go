package replay

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acptap/acptap/mismatch"
	"github.com/acptap/acptap/normalize"
)

// TestNoiseHint checks that a failing replay's report suggests calibrate
// for a divergence that looks like run-to-run noise, and only then.
func TestNoiseHint(t *testing.T) {
	out := func(recorded, live any, index int, field string) Divergence {
		return Divergence{Kind: OutputDiffers, Mismatch: mismatch.Mismatch{Recorded: recorded, Live: live}, Index: index, Field: field, Message: "agent output differs"}
	}
	for _, tt := range []struct {
		name string
		d    Divergence
		hint bool
	}{
		{"a number", out(json.Number("17876"), json.Number("901"), 2, "rawOutput.pgid"), true},
		{"a per-run directory", out("cached in /tmp/agent-home.Z8qUtU/notes.txt", "cached in /tmp/agent-home.Ab12Cd/notes.txt", 2, "content.text"), true},
		{"a state value", Divergence{Kind: OutputDiffers, State: true, Mismatch: mismatch.Mismatch{Recorded: json.Number("1"), Live: json.Number("2")}}, true},
		{"the last update missing", out(normalize.Missing{}, map[string]any{"method": "session/update"}, 2, ""), true},
		{"drift of a request id", Divergence{Kind: RequestDrift, Mismatch: mismatch.Mismatch{Recorded: "run 7f3a9c0e", Live: "run 0c1d2e3f"}}, true},
		{"a changed message", out("You said: fix the typo", "Something else entirely", 1, "content.text"), false},
		{"a changed word", out("Read notes.txt", "Read other.txt", 1, "title"), false},
		{"a tool call missing whole", out(map[string]any{"method": "session/update"}, normalize.Missing{}, 0, ""), false},
		{"another status", out("completed", "failed", 2, "status"), false},
		{"the editor side failed", Divergence{Kind: EditorFailed, Message: "editor side: timed out"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteReport(&b, &Result{Name: "rec", Divergences: []Divergence{tt.d}}, ReportOptions{}); err != nil {
				t.Fatal(err)
			}
			const hint = "hint: if this varies from run to run, `acptap calibrate rec` learns it as a rule"
			if got := strings.Contains(b.String(), hint); got != tt.hint {
				t.Errorf("report says the hint: %v, want %v:\n%s", got, tt.hint, b.String())
			}
		})
	}
}

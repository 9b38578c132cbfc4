package mismatch

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPair(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name    string
		a, b    any
		wantA   string
		wantB   string
		wantAt  int
		wantPos string
	}{
		{"short strings whole", "You said: hi", "You said: ho", `"You said: hi"`, `"You said: ho"`, -1, ""},
		{"a change in a long prompt", "You are a test agent. The working directory is <cwd>. " + long, "You are a test agent. The working directory is <cwd>. Answer in French. " + long,
			`…" agent. The working directory is <cwd>. ` + long[:40] + `"…`,
			`…" agent. The working directory is <cwd>. Answer in French. ` + long[:22] + `"…`, 54, ", character 55"},
		{"at the start", "a" + long, "b" + long, `"a` + long[:39] + `"…`, `"b` + long[:39] + `"…`, 0, ", character 1"},
		{"a prefix", long, long + "tail", `…"` + long[:40] + `"`, `…"` + long[:40] + `tail"`, 100, ", character 101"},
		{"runes", strings.Repeat("é", 50) + "a", strings.Repeat("é", 50) + "b", `…"` + strings.Repeat("é", 40) + `a"`, `…"` + strings.Repeat("é", 40) + `b"`, 50, ", character 51"},
		{"newlines quoted", "line 1\nline 2", "line 1\nline 3", `"line 1\nline 2"`, `"line 1\nline 3"`, -1, ""},
		{"not strings", json.Number("8680"), json.Number("8682"), "8680", "8682", -1, ""},
		{"missing", missing{}, map[string]any{"a": "<b>"}, "nothing", `{"a":"<b>"}`, -1, ""},
		{"long value cut", long + long, 1, `"` + strings.Repeat("x", 160) + `"…`, "1", -1, ""},
	}
	for _, tt := range tests {
		c := Pair(tt.a, tt.b)
		if c.A != tt.wantA || c.B != tt.wantB || c.At != tt.wantAt || c.Where() != tt.wantPos {
			t.Errorf("%s: Pair = %q, %q, at %d (%q); want %q, %q, at %d (%q)", tt.name, c.A, c.B, c.At, c.Where(), tt.wantA, tt.wantB, tt.wantAt, tt.wantPos)
		}
	}
}

func TestMismatchString(t *testing.T) {
	m := Mismatch{Path: "$.text", Recorded: "You said: hi", Live: "You said: ho"}
	if got, want := m.String(), `$.text: recorded "You said: hi", live "You said: ho"`; got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
}

// missing is an Absent value, as normalize.Missing is.
type missing struct{}

func (missing) Absent() {}

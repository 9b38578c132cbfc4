package mcpstandin

import (
	"bytes"
	"reflect"
	"testing"
)

// TestReadLog: the notes a Matcher wrote read as a Report, as a
// stand-in's LOG does; no notes at all leave every recorded call
// unrequested.
func TestReadLog(t *testing.T) {
	p := plan()
	var log bytes.Buffer
	m := NewMatcher(p, &log)
	if _, err := m.Reply([]byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"lookup","arguments":{"topic":"tides"}}}`)); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLog(p, &log)
	if err != nil {
		t.Fatal(err)
	}
	none, err := ReadLog(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Unanswered) != 1 || got.Unanswered[0] != `tools/call lookup {"topic":"tides"}` {
		t.Errorf("Unanswered = %q, want the call of tides", got.Unanswered)
	}
	if len(none.Unrequested) == 0 || !reflect.DeepEqual(got.Unrequested, none.Unrequested) {
		t.Errorf("Unrequested = %q with the notes and %q without, want the same recorded calls", got.Unrequested, none.Unrequested)
	}
}

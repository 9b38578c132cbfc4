package timeline

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/acptap/acptap/lane"
	"github.com/acptap/acptap/store"
)

// TestMCPRows: an MCP server's lines are rows of lane mcp that name the
// server and the stream, and say what they carry.
func TestMCPRows(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w, err := st.Create(store.Recording{Name: "m", Created: sampleCreated, Argv: []string{"agent"}, Cwd: "/w",
		MCPServers: []store.MCPServer{{Name: "notes", Argv: []string{"testmcp"}}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{Kind: store.KindFrame, Lane: lane.MCP(0, lane.ToServer), Offset: time.Millisecond, Data: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup"}}`)})
	w.Append(store.Event{Kind: store.KindFrame, Lane: lane.MCP(0, lane.FromServer), Offset: 2 * time.Millisecond, Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)})
	w.Append(store.Event{Kind: store.KindFrame, Lane: lane.MCP(0, lane.ServerStderr), Offset: 3 * time.Millisecond, Data: []byte(`server log`)})
	w.Update(func(r *store.Recording) { r.Done = true })
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	p, err := Recording(st, "m")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ dir, kind, summary string }{
		{"in", "request", "notes → "},
		{"out", "response", "notes ← "},
		{"stderr", "line", "notes ! server log"},
	}
	for i, e := range p.Events {
		if e.Lane != "mcp" || e.Server != "notes" || e.Dir != want[i].dir || e.Kind != want[i].kind || !contains(e.Summary, want[i].summary) {
			t.Errorf("row %d: lane %s server %q dir %q kind %s summary %q; want mcp, notes, %s, %s, %q", i, e.Lane, e.Server, e.Dir, e.Kind, e.Summary, want[i].dir, want[i].kind, want[i].summary)
		}
	}
}

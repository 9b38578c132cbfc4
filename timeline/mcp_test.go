package timeline

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
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
		MCPServers: []store.MCPServer{{Name: "notes", Argv: []string{"testmcp"}}, {Name: "web", Type: "http", URL: "http://h/mcp"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{Kind: store.KindFrame, Lane: lane.MCP(0, lane.ToServer), Offset: time.Millisecond, Data: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup"}}`)})
	w.Append(store.Event{Kind: store.KindFrame, Lane: lane.MCP(0, lane.FromServer), Offset: 2 * time.Millisecond, Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)})
	w.Append(store.Event{Kind: store.KindFrame, Lane: lane.MCP(0, lane.ServerStderr), Offset: 3 * time.Millisecond, Data: []byte(`server log`)})
	x, err := exchange.Marshal(&exchange.Exchange{Route: exchange.RouteMCP, MCPServer: 2, Method: "POST", URL: "http://h/mcp",
		RequestBody: []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lookup","arguments":{"topic":"answer"}}}`),
		Status:      200, ResponseHeaders: http.Header{"Content-Type": {"application/json"}},
		Chunks: []exchange.Chunk{{Data: []byte(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"42"}]}}`)}}, End: exchange.EndComplete})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{Kind: store.KindExchange, Lane: store.LaneLLM, Offset: 4 * time.Millisecond, Data: x})
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
		{"", "exchange", `web ↔ tools/call lookup {"topic":"answer"} → "42" (POST 200)`},
	}
	if len(p.Events) != len(want) {
		t.Fatalf("%d rows, want %d", len(p.Events), len(want))
	}
	for i, e := range p.Events {
		server := "notes"
		if i == 3 {
			server = "web"
		}
		if e.Lane != "mcp" || e.Server != server || e.Dir != want[i].dir || e.Kind != want[i].kind || !contains(e.Summary, want[i].summary) {
			t.Errorf("row %d: lane %s server %q dir %q kind %s summary %q; want mcp, %s, %s, %s, %q", i, e.Lane, e.Server, e.Dir, e.Kind, e.Summary, server, want[i].dir, want[i].kind, want[i].summary)
		}
	}
}

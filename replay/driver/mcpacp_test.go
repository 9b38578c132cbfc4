package driver_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/replay/driver"
	"github.com/acptap/acptap/replay/mcpstandin"
)

// toolResults returns the texts of the tool results the driver sent, in
// order: the answers to the agent's mcp/message tools/call requests, or
// the error an answer was.
func toolResults(t *testing.T, res driver.Result) []string {
	t.Helper()
	calls := map[string]bool{} // the ids of the agent's tools/call messages
	for _, l := range res.Live {
		if m := decode(t, l); m.Method == "mcp/message" && m.Params["method"] == "tools/call" {
			calls[acp.IDKey(m.ID)] = true
		}
	}
	var out []string
	for _, l := range res.Sent {
		m := decode(t, l)
		if m.Method != "" || !calls[acp.IDKey(m.ID)] {
			continue
		}
		if m.Error != nil {
			out = append(out, "error: "+m.Error.Message)
			continue
		}
		var r struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		b, _ := json.Marshal(m.Result)
		json.Unmarshal(b, &r)
		for _, c := range r.Content {
			out = append(out, c.Text)
		}
	}
	return out
}

// TestReplayMCPOverACP plays a recording whose agent called the lookup
// tool of an MCP server the editor hosts over ACP in each turn: the
// agent's mcp/connect and mcp/disconnect get the recorded answers, and
// each mcp/message the recorded answer of its inner message, found by the
// tool and its arguments, not by order; a call the recording has no
// answer for gets an error naming it, and Result.MCP names it and the
// recorded calls never made.
func TestReplayMCPOverACP(t *testing.T) {
	opts := testeditor.Options{Prompts: []string{"one", "two"}, MCPOverACP: []string{"tools"}}
	answer, weather := `lookup={"topic":"answer"}`, `lookup={"topic":"weather"}`
	frames, _ := record(t, opts, "--features", "mcp-acp", "--mcp-call", answer, "--mcp-call", weather)
	d := driver.New(driver.Options{Recorded: frames})
	for _, tc := range []struct {
		name        string
		calls       []string
		results     []string
		unanswered  []string
		unrequested []string
	}{
		{"as recorded", []string{answer, weather}, []string{"42", "sunny, 24C", "42", "sunny, 24C"}, nil, nil},
		// Answered by what is asked: in order, the first answer would
		// go to the second call.
		{"in the other order", []string{weather, answer}, []string{"sunny, 24C", "42", "sunny, 24C", "42"}, nil, nil},
		{"other arguments", []string{answer, `lookup={"topic":"tides"}`},
			[]string{"42", `error: acptap replay: no recorded answer for tools/call lookup {"topic":"tides"} of MCP server tools`, "42", `error: acptap replay: no recorded answer for tools/call lookup {"topic":"tides"} of MCP server tools`},
			[]string{`tools/call lookup {"topic":"tides"}`, `tools/call lookup {"topic":"tides"}`},
			[]string{`tools/call lookup {"topic":"weather"}`, `tools/call lookup {"topic":"weather"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--features", "mcp-acp"}
			for _, c := range tc.calls {
				args = append(args, "--mcp-call", c)
			}
			res, err := replay(t, d, agentEnviron(), args...)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := toolResults(t, res); !slices.Equal(got, tc.results) {
				t.Errorf("tool results sent:\n got %q\nwant %q", got, tc.results)
			}
			want := []mcpstandin.Report{{Server: "tools", Unanswered: tc.unanswered, Unrequested: tc.unrequested}}
			if !reflect.DeepEqual(res.MCP, want) {
				t.Errorf("Result.MCP = %+v, want %+v", res.MCP, want)
			}
		})
	}
}

// TestReplayMCPOverACPConnections: the recorded connectionIds are the
// ones the agent gets and uses, one connection per turn; a recorded call
// never made is in Result.MCP, and the mcp/message request the agent
// skipped is a *MissingError.
func TestReplayMCPOverACPConnections(t *testing.T) {
	opts := testeditor.Options{Prompts: []string{"one", "two"}, MCPOverACP: []string{"tools"}}
	frames, _ := record(t, opts, "--features", "mcp-acp", "--mcp-call", `lookup={"topic":"answer"}`)
	d := driver.New(driver.Options{Recorded: frames})
	res, err := replay(t, d, agentEnviron())
	var conns []string
	for _, l := range res.Live {
		if m := decode(t, l); m.Method == "mcp/disconnect" {
			conns = append(conns, m.Params["connectionId"].(string))
		}
	}
	var recorded []string
	for _, l := range lines(frames, lane.Agent) {
		if m := decode(t, l); m.Method == "mcp/disconnect" {
			recorded = append(recorded, m.Params["connectionId"].(string))
		}
	}
	if len(conns) != 2 || !slices.Equal(conns, recorded) {
		t.Errorf("the agent disconnected %q, want the recorded connections %q", conns, recorded)
	}
	want := []mcpstandin.Report{{Server: "tools", Unrequested: []string{`tools/call lookup {"topic":"answer"}`, `tools/call lookup {"topic":"answer"}`}}}
	if !reflect.DeepEqual(res.MCP, want) {
		t.Errorf("Result.MCP = %+v, want %+v", res.MCP, want)
	}
	var missing *driver.MissingError
	if !errors.As(err, &missing) || missing.Method != "mcp/message" {
		t.Errorf("Run's error = %v, want a *MissingError of mcp/message", err)
	}
	if strings.Contains(errString(err), "timed out") {
		t.Errorf("Run waited for the calls never made: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

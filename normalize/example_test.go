package normalize_test

import (
	"fmt"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/normalize"
)

// Two runs of the same session, in different workspaces and with different
// ids, compare equal except where the agent behaved differently.
func Example() {
	recorded := []lane.Line{
		{Lane: lane.Agent, Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"ses_5f1c2a9e8ffeQx7RbT2vKw"}}`)},
		{Lane: lane.Agent, Data: []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_5f1c2a9e8ffeQx7RbT2vKw","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Reading /home/alice/demo/README.md"}}}}`)},
		{Lane: lane.Agent, Data: []byte(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)},
	}
	replayed := []lane.Line{
		{Lane: lane.Agent, Data: []byte(`{"jsonrpc":"2.0","id":11,"result":{"sessionId":"ses_9a7b3c1d2e4fHk8LmN0pQr"}}`)},
		{Lane: lane.Agent, Data: []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_9a7b3c1d2e4fHk8LmN0pQr","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Reading /tmp/ws"}}}}`)},
		{Lane: lane.Agent, Data: []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_9a7b3c1d2e4fHk8LmN0pQr","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"/README.md"}}}}`)},
		{Lane: lane.Agent, Data: []byte(`{"jsonrpc":"2.0","id":12,"result":{"stopReason":"max_tokens"}}`)},
	}
	want := normalize.New(normalize.Options{Cwd: []string{"/home/alice/demo"}}).Transcript(recorded)
	got := normalize.New(normalize.Options{Cwd: []string{"/tmp/ws"}}).Transcript(replayed)
	for _, v := range got.Values() {
		fmt.Println(string(v))
	}
	d := normalize.Compare(want, got).Diff
	fmt.Printf("first difference in turn %d, %s, value %d: %s: %v, now %v\n", d.Turn, d.Stream, d.Index, d.Field(), d.Recorded, d.Live)
	// Output:
	// {"id":"<rpc:1>","jsonrpc":"2.0","result":{"sessionId":"<sessionId:1>"}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"<sessionId:1>","update":{"content":{"text":"Reading <cwd>/README.md","type":"text"},"sessionUpdate":"agent_message_chunk"}}}
	// {"id":"<rpc:2>","jsonrpc":"2.0","result":{"stopReason":"max_tokens"}}
	// first difference in turn 1, requests and responses, value 2: result.stopReason: end_turn, now max_tokens
}

func ExampleParseRules() {
	rules, err := normalize.ParseRules([]byte(`[
		{"path": "$.params.update.rawInput.*.started", "placeholder": "<started>"},
		{"regexp": "build [0-9]+", "replace": "build N"}
	]`))
	if err != nil {
		fmt.Println(err)
		return
	}
	n := normalize.New(normalize.Options{Rules: rules})
	fmt.Println(string(n.Frame(lane.Agent, []byte(`{"params":{"update":{"title":"build 812","rawInput":{"job":{"started":"10:02"}}}}}`))))

	_, err = normalize.ParseRules([]byte(`[{"regexp": "build ([0-9]+", "replace": "build N"}]`))
	fmt.Println(err)
	// Output:
	// {"params":{"update":{"rawInput":{"job":{"started":"<started>"}},"title":"build N"}}}
	// normalize: invalid rules: rules[0].regexp: missing closing ) in "build ([0-9]+"
}

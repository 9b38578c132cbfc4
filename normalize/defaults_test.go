package normalize

import (
	"encoding/json"
	"testing"

	"github.com/acptap/acptap/lane"
)

// TestDefaultRules shows each default rule on one member, and the values
// next to it that must stay.
func TestDefaultRules(t *testing.T) {
	acp := []struct{ name, in, want string }{
		{"ids minted by the agent",
			`{"sessionId":"ses_1","toolCallId":"t1","terminalId":"term-1","messageId":"m1","requestId":"r1","optionId":"allow","modeId":"ask","modelId":"gpt-5"}`,
			`{"messageId":"<messageId:1>","modeId":"ask","modelId":"gpt-5","optionId":"<optionId:1>","requestId":"<id:1>","sessionId":"<sessionId:1>","terminalId":"<terminalId:1>","toolCallId":"<toolCallId:1>"}`},
		{"a value keeps its first placeholder",
			`{"a":{"sessionId":"3f2a9c1e-8b7d-4e6f-a5c4-1d2e3f4a5b6c"},"b":{"toolCallId":"3F2A9C1E-8B7D-4E6F-A5C4-1D2E3F4A5B6C"},"c":"session 3f2a9c1e-8b7d-4e6f-a5c4-1d2e3f4a5b6c ended"}`,
			`{"a":{"sessionId":"<sessionId:1>"},"b":{"toolCallId":"<sessionId:1>"},"c":"session <sessionId:1> ended"}`},
		{"numeric ids, empty ids, placeholders",
			`{"a":{"toolCallId":7},"b":{"toolCallId":"7"},"c":{"toolCallId":""},"d":{"toolCallId":"<x:9>"},"e":{"toolCallId":null}}`,
			`{"a":{"toolCallId":"<toolCallId:1>"},"b":{"toolCallId":"<toolCallId:2>"},"c":{"toolCallId":""},"d":{"toolCallId":"<x:9>"},"e":{"toolCallId":null}}`},
		{"a bare id is not an id in ACP", `{"id":"ask","name":"Ask"}`, `{"id":"ask","name":"Ask"}`},
		{"uuids and prefixed ids in text",
			`{"text":"ids: 0b1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f, resp_0a6fc3349e38704d, toolu_01A09q90qw90lq917835lq9, chatcmpl-DuLdRJdgsTDkaWQbovITznUPevjfI; words: call_function, msg_summarizer, xmsg_01Kgk6kMJLdJJC26r3uF"}`,
			`{"text":"ids: <uuid:1>, <id:1>, <id:2>, <id:3>; words: call_function, msg_summarizer, xmsg_01Kgk6kMJLdJJC26r3uF"}`},
		{"epoch times in time-like members",
			`{"created":1782321674,"created_at":1782321674.5,"started_at_ms":1764411301874,"startedAt":"1764411301874","completedAtMs":1764411301874000,"ts":1764411301874000000,"timestamp":"2026-11-29T10:15:02Z","date":"Sat, 29 Nov 2026 10:15:02 GMT","expires":"2026-11-29","x-codex-ws-stream-request-start-ms":"1796364284042","x-sent-at":1764411301}`,
			`{"completedAtMs":"<time>","created":"<time>","created_at":"<time>","date":"<time>","expires":"<time>","startedAt":"<time>","started_at_ms":"<time>","timestamp":"<time>","ts":"<time>","x-codex-ws-stream-request-start-ms":"<time>","x-sent-at":"<time>"}`},
		{"not times",
			`{"created_at":0,"updated":"never","format":1764411301874,"chat":1782321674,"count":1782321674,"time":42,"timeout_ms":120000}`,
			`{"chat":1782321674,"count":1782321674,"created_at":0,"format":1764411301874,"time":42,"timeout_ms":120000,"updated":"never"}`},
		{"durations",
			`{"duration":{"secs":0,"nanos":1843211},"duration_ms":3,"durationMs":0,"elapsed":"1m2.5s","elapsed_time":"00:00:01.25","took":"12ms","latency_ms":4.5,"wall_time":"PT1.2S","total_duration":123456789,"duration_seconds":"3 seconds"}`,
			`{"duration":"<duration>","durationMs":"<duration>","duration_ms":"<duration>","duration_seconds":"<duration>","elapsed":"<duration>","elapsed_time":"<duration>","latency_ms":"<duration>","took":"<duration>","total_duration":"<duration>","wall_time":"<duration>"}`},
		{"not durations",
			`{"duration":"fast","durationUnit":{"secs":"s"},"elapsed":null,"timeout":"5s","retries":3}`,
			`{"duration":"fast","durationUnit":{"secs":"s"},"elapsed":null,"retries":3,"timeout":"5s"}`},
		{"durations in text",
			`{"text":"Exit code: 0\nWall time: 0.51 seconds\nbuild took 840ms, elapsed: 1.5s, duration=00:01:02; took 3 steps; finished in 2 minutes"}`,
			`{"text":"Exit code: 0\nWall time: <duration>\nbuild took <duration>, elapsed: <duration>, duration=<duration>; took 3 steps; finished in <duration>"}`},
		{"pids", `{"pid":4242,"process_id":"4243","processId":1,"ppid":1,"exit_code":0,"pid_file":"x"}`,
			`{"exit_code":0,"pid":"<pid>","pid_file":"x","ppid":"<pid>","processId":"<pid>","process_id":"<pid>"}`},
		{"pids in text",
			`{"text":"Exit Code: 0\nSignal: (none)\nProcess Group PGID: 6726","log":"started pid=4242, ppid 1; process id: 77; PID 12 done; pids: 3 4; pid_max 5; rapid 6"}`,
			`{"log":"started pid=<pid>, ppid <pid>; process id: <pid>; PID <pid> done; pids: 3 4; pid_max 5; rapid 6","text":"Exit Code: 0\nSignal: (none)\nProcess Group PGID: <pid>"}`},
		{"times in text",
			`{"log":"2026-11-29T10:15:04.611402Z WARN x; 2026-11-29 10:15:04 INFO y; at 2026-11-29T10:15:04+01:00. Not: 2026-11-29, 12026-11-29T10:15:04Z"}`,
			`{"log":"<time> WARN x; <time> INFO y; at <time>. Not: 2026-11-29, 12026-11-29T10:15:04Z"}`},
		{"dates stay in ACP", `{"text":"Today's date is 2026-11-29."}`, `{"text":"Today's date is 2026-11-29."}`},
		{"volatile wire fields, token usage",
			`{"system_fingerprint":"fp_51b9c32e14","obfuscation":"I7Nl54CKLwXRwW","sequence_number":4,"usage":{"input_tokens":394,"output_tokens":6,"cache_creation":{"ephemeral_5m_input_tokens":0},"service_tier":"standard"},"usageMetadata":{"promptTokenCount":11,"thoughtsTokenCount":603},"max_tokens":4096,"thinking":{"budget_tokens":10000}}`,
			`{"max_tokens":4096,"obfuscation":"<obfuscation>","sequence_number":4,"system_fingerprint":"<fingerprint>","thinking":{"budget_tokens":10000},"usage":{"cache_creation":{"ephemeral_5m_input_tokens":"<tokens>"},"input_tokens":"<tokens>","output_tokens":"<tokens>","service_tier":"standard"},"usageMetadata":{"promptTokenCount":"<tokens>","thoughtsTokenCount":"<tokens>"}}`},
		{"JSON inside a string",
			`{"output":" {\"duration_ms\": 12, \"path\": \"/w/a\", \"n\": 1.50} ","notJSON":"{not json}","array":"[1, 2]"}`,
			`{"array":"[1, 2]","notJSON":"{not json}","output":"{\"duration_ms\":\"<duration>\",\"n\":1.50,\"path\":\"<cwd>/a\"}"}`},
		{"keys are normalized too",
			`{"/w/a.go":{"type":"update"},"3f2a9c1e-8b7d-4e6f-a5c4-1d2e3f4a5b6c":1}`,
			`{"/w/a.go":{"type":"update"},"<uuid:1>":1}`},
	}
	for _, tt := range acp {
		// Keys are normalized like values, but "/w" is no root here:
		// only the JSON-inside-a-string case sets one.
		opts := Options{}
		if tt.name == "JSON inside a string" {
			opts.Cwd = []string{"/w"}
		}
		if got := New(opts).Frame(lane.Agent, []byte(tt.in)); string(got) != tt.want {
			t.Errorf("%s:\n in   %s\n got  %s\n want %s", tt.name, tt.in, got, tt.want)
		}
	}

	wire := []struct{ name, in, want string }{
		{"ids in requests",
			`{"input":[{"type":"function_call","id":"fc_0a6f","call_id":"call_qLFv8oQOs68qRuEVmG8TuEJp"},{"type":"function_call_output","call_id":"call_qLFv8oQOs68qRuEVmG8TuEJp"}],"previous_response_id":"resp_1","prompt_cache_key":"k","metadata":{"user_id":"user_ab_account__session_1"}}`,
			`{"input":[{"call_id":"<toolCallId:1>","id":"<id:1>","type":"function_call"},{"call_id":"<toolCallId:1>","type":"function_call_output"}],"metadata":{"user_id":"<id:2>"},"previous_response_id":"<id:3>","prompt_cache_key":"<id:4>"}`},
		{"dates in prompts",
			`{"system":"Today's date is 2026-11-29. Current date: Saturday, November 29, 2026. Also Sat Nov 29 2026, 29th of November 2026, Nov. 29, 2026, 11/29/2026 and 2026/11/29. Not: version 2026-11, 12026-11-29"}`,
			`{"system":"Today's date is <date>. Current date: <date>. Also <date>, <date>, <date>, <date> and <date>. Not: version 2026-11, 12026-11-29"}`},
		{"Ollama counts", `{"prompt_eval_count":26,"eval_count":290,"eval_duration":4709213000}`,
			`{"eval_count":"<tokens>","eval_duration":"<duration>","prompt_eval_count":"<tokens>"}`},
	}
	for _, tt := range wire {
		got := New(Options{}).Request("POST", "/v1/x", nil, []byte(tt.in)).(map[string]any)["body"]
		if string(encode(got)) != tt.want {
			t.Errorf("%s:\n in   %s\n got  %s\n want %s", tt.name, tt.in, encode(got), tt.want)
		}
	}
}

func TestRoots(t *testing.T) {
	opts := Options{
		Cwd:  []string{"/tmp/r/ws/", "/private/tmp/r/ws", "/tmp/my dir"},
		Home: []string{"/tmp/r/home", "relative/home", ""},
		Tmp:  []string{"/tmp/r/tmp", "/tmp", "/"},
	}
	tests := []struct{ in, want string }{
		{"/tmp/r/ws/src/main.go", "<cwd>/src/main.go"},
		{"/private/tmp/r/ws/a", "<cwd>/a"},
		{"cd /tmp/r/ws && ls /tmp/r/home/.config", "cd <cwd> && ls <home>/.config"},
		{"'/tmp/r/ws/x' \"/tmp/r/tmp/y\" (/tmp/z)", "'<cwd>/x' \"<tmp>/y\" (<tmp>/z)"},
		{"PATH=/tmp/r/home/bin:/usr/bin", "PATH=<home>/bin:/usr/bin"},
		{"file:///tmp/r/ws/a.go and FILE:///tmp/my%20dir/b.go", "file://<cwd>/a.go and FILE://<cwd>/b.go"},
		{"/tmp/my dir/b.go", "<cwd>/b.go"},
		{"I work in /tmp/r/ws.", "I work in <cwd>."},
		{"/tmp/r/ws.bak /tmp/r/wsx x/tmp/r/ws /tmpfoo", "<tmp>/r/ws.bak <tmp>/r/wsx x/tmp/r/ws /tmpfoo"},
		{"<cwd>/tmp/r/ws</cwd> <cwd>/tmp/x <tmp>/tmp/x", "<cwd><cwd></cwd> <cwd>/tmp/x <tmp><tmp>/x"},
		{"/tmp/r/ws/tmp/r/home", "<cwd>/tmp/r/home"},
		{"relative/home/x", "relative/home/x"},
	}
	n := New(opts)
	for _, tt := range tests {
		if got := n.str(tt.in, fromACP); got != tt.want {
			t.Errorf("str(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if again := New(opts).str(tt.want, fromACP); again != tt.want {
			t.Errorf("str(%q) = %q, want it unchanged", tt.want, again)
		}
	}
}

// TestDerivedRoots checks the other spellings of the roots: with "/"
// replaced by "-" or "_", percent-encoded and JSON-escaped.
func TestDerivedRoots(t *testing.T) {
	opts := Options{
		Cwd:  []string{"/tmp/x/ws", "/tmp/my proj.v2"},
		Home: []string{"/home/u"},
		Tmp:  []string{"/tmp"},
	}
	tests := []struct{ in, want string }{
		// Claude Code's memory directory: the workspace with "/" as "-".
		{"/home/u/.claude/projects/-tmp-x-ws/memory", "<home>/.claude/projects/<cwd>/memory"},
		{"cache key -tmp-x-ws and _tmp_x_ws_build", "cache key <cwd> and <cwd>_build"},
		{"-tmp-x-ws-sub", "<cwd>-sub"},
		// Every character but letters and digits as "-".
		{"projects/-tmp-my-proj-v2/", "projects/<cwd>/"},
		// Percent-encoded, upper and lower case, + for a space.
		{"https://example.invalid/open?path=%2Ftmp%2Fx%2Fws%2Fa.go", "https://example.invalid/open?path=<cwd>%2Fa.go"},
		{"dir=%2ftmp%2fx%2fws&x=1", "dir=<cwd>&x=1"},
		{"q=%2Ftmp%2Fmy+proj.v2", "q=<cwd>"},
		{"file:///tmp/my%20proj.v2/a", "file://<cwd>/a"},
		// JSON-escaped slashes, as in JSON text inside a string.
		{`["\/tmp\/x\/ws\/a.go"]`, `["<cwd>\/a.go"]`},
		// Not a derived form: inside a word, or another directory.
		{"foo-tmp-x-ws x_tmp_x_ws -tmp-x-wsb", "foo-tmp-x-ws x_tmp_x_ws -tmp-x-wsb"},
		{"%2Ftmp%2Fx%2Fwsb", "<tmp>%2Fx%2Fwsb"},
		// A root of one component has no "-" or "_" form: -tmp is a word.
		{"ls -tmp _tmp", "ls -tmp _tmp"},
		{"%2Ftmp%2Fy", "<tmp>%2Fy"},
	}
	n := New(opts)
	for _, tt := range tests {
		if got := n.str(tt.in, fromACP); got != tt.want {
			t.Errorf("str(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if again := New(opts).str(tt.want, fromACP); again != tt.want {
			t.Errorf("str(%q) = %q, want it unchanged", tt.want, again)
		}
	}
}

func TestIsPlaceholder(t *testing.T) {
	for s, want := range map[string]bool{
		"<cwd>": true, "<uuid:12>": true, "<agentRpc:1>": true, "<a_b9>": true,
		"<>": false, "<:1>": false, "<a:>": false, "<1a>": false, "<a b>": false, "<a:1:2>": false, "cwd>": false, "<cwd": false,
	} {
		if got := isPlaceholder(s); got != want {
			t.Errorf("isPlaceholder(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestCoalesceSplitValues checks that a path and an id cut in two by chunk
// boundaries are still recognized.
func TestCoalesceSplitValues(t *testing.T) {
	chunk := func(text string) lane.Line {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{
			"sessionId": "s", "update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}}}})
		return lane.Line{Lane: lane.Agent, Data: b}
	}
	out := New(Options{Cwd: []string{"/w/ws"}}).Stream([]lane.Line{chunk("see /w"), chunk("/ws/a.go and 3f2a9c1e-8b7d"), chunk("-4e6f-a5c4-1d2e3f4a5b6c")})
	if len(out) != 1 {
		t.Fatalf("got %d frames, want 1: %s", len(out), joinLines(out))
	}
	want := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"<sessionId:1>","update":{"content":{"text":"see <cwd>/a.go and <uuid:1>","type":"text"},"sessionUpdate":"agent_message_chunk"}}}`
	if string(out[0]) != want {
		t.Errorf("got  %s\nwant %s", out[0], want)
	}
}

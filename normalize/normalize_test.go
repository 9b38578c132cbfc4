package normalize

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/acptap/acptap/lane"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// A streamFile is a test stream: "E " and "A " lines are frames of the
// editor and the agent (a lone "E" or "A" is an empty frame), "#options"
// and "#rules" lines configure the Normalizer, other "#" lines are
// comments.
type streamFile struct {
	opts   Options
	frames []lane.Line
}

func readStream(t testing.TB, name string) streamFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return parseStream(t, name, string(b))
}

func parseStream(t testing.TB, name, text string) streamFile {
	t.Helper()
	var sf streamFile
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#options "):
			if err := json.Unmarshal([]byte(line[len("#options "):]), &sf.opts); err != nil {
				t.Fatalf("%s:%d: %v", name, lineNo, err)
			}
		case strings.HasPrefix(line, "#rules "):
			rules, err := ParseRules([]byte(line[len("#rules "):]))
			if err != nil {
				t.Fatalf("%s:%d: %v", name, lineNo, err)
			}
			sf.opts.Rules = rules
		case strings.HasPrefix(line, "#"):
		case line == "E" || strings.HasPrefix(line, "E "):
			sf.frames = append(sf.frames, lane.Line{Lane: lane.Editor, Data: []byte(strings.TrimPrefix(line[1:], " "))})
		case line == "A" || strings.HasPrefix(line, "A "):
			sf.frames = append(sf.frames, lane.Line{Lane: lane.Agent, Data: []byte(strings.TrimPrefix(line[1:], " "))})
		default:
			t.Fatalf("%s:%d: want a frame (E or A), #options, #rules or a # comment, got %q", name, lineNo, line)
		}
	}
	return sf
}

func (sf streamFile) normalize() []json.RawMessage {
	return New(sf.opts).Stream(sf.frames)
}

func joinLines(vs []json.RawMessage) []byte {
	var b bytes.Buffer
	for _, v := range vs {
		b.Write(v)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// checkGolden compares got with the golden file, or rewrites it with
// -update.
func checkGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", golden)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gl), len(wl)) {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs at line %d (run go test -update if the change is intended):\ngot:  %s\nwant: %s", golden, i+1, g, w)
		}
	}
}

func TestGoldenStreams(t *testing.T) {
	names, err := filepath.Glob("testdata/*.ndjson")
	if err != nil || len(names) == 0 {
		t.Fatalf("no testdata/*.ndjson: %v", err)
	}
	for _, name := range names {
		name = filepath.Base(name)
		t.Run(name, func(t *testing.T) {
			out := readStream(t, name).normalize()
			for i, v := range out {
				if !json.Valid(v) {
					t.Errorf("value %d is not JSON: %s", i, v)
				}
			}
			checkGolden(t, strings.TrimSuffix(name, ".ndjson")+".golden", joinLines(out))
		})
	}
}

// TestRunsAgree normalizes two runs of one session that differ in JSON-RPC
// ids, minted ids, times, durations, pids, workspace, HOME and TMPDIR, and
// chunk boundaries (one of which cuts a workspace path in two).
func TestRunsAgree(t *testing.T) {
	a, b := readStream(t, "session_a.ndjson"), readStream(t, "session_b.ndjson")
	if path, av, bv, ok := FirstDifference(a.normalize(), b.normalize()); ok {
		t.Fatalf("the runs differ at %s: %v vs %v", path, av, bv)
	}
	// The volatile values of run b, none of which may survive.
	for _, leak := range []string{"/tmp/acptap-replay", "ses_9a7b", "call_Xy7W", "call_Ab1C", "call_1764", "e4d3c2b1-",
		"msg_01", "term_0b1d2e", "2026-11-30", "1764498", "7730", "987", "2210498", `"id":10`} {
		if out := joinLines(b.normalize()); bytes.Contains(out, []byte(leak)) {
			t.Errorf("normalized run contains %q", leak)
		}
	}

	// Chunk boundaries are what coalescing is for: without it the
	// runs differ.
	a.opts.NoCoalesce, b.opts.NoCoalesce = true, true
	if _, _, _, ok := FirstDifference(a.normalize(), b.normalize()); !ok {
		t.Errorf("the runs agree without coalescing, want a difference in chunks")
	}
}

// TestChangesVisible changes the second run the way a regressed agent
// would and checks that the first difference is where the change is: its
// turn, stream, position in the stream and path inside the value.
func TestChangesVisible(t *testing.T) {
	base, err := os.ReadFile("testdata/session_b.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	a := readStream(t, "session_a.ndjson")
	want := New(a.opts).Transcript(a.frames)
	tests := []struct {
		name     string
		old, new string // replaced once in session_b.ndjson
		drop     string // drop the line that contains this
		turn     int
		stream   string
		index    int
		field    string
		av, bv   any // at field; nil for the whole values, which differ in kind
		flat     string
	}{
		{name: "message text", old: `"ixed the typo."`, new: `"ixed a typo."`,
			turn: 1, stream: "agent message", index: 3, field: "content.text", av: "Fixed the typo.", bv: "Fixed a typo.", flat: "$[16].params.update.content.text"},
		{name: "stop reason", old: `"stopReason":"end_turn","_meta"`, new: `"stopReason":"max_tokens","_meta"`,
			turn: 2, stream: RequestsStream, index: 10, field: "result.stopReason", av: "end_turn", bv: "max_tokens", flat: "$[38].result.stopReason"},
		{name: "missing tool call", drop: `"title":"go test ./..."`,
			turn: 2, stream: "tool call <toolCallId:3>", index: 1, flat: "$[34]"},
		{name: "read of another file", old: `"method":"fs/read_text_file","params":{"sessionId":"ses_9a7b3c1d2e4fHk8LmN0pQr","path":"/tmp/acptap-replay-93c1d7/ws/README.md"`,
			new:  `"method":"fs/read_text_file","params":{"sessionId":"ses_9a7b3c1d2e4fHk8LmN0pQr","path":"/tmp/acptap-replay-93c1d7/ws/docs/README.md"`,
			turn: 1, stream: RequestsStream, index: 8, field: "params.path", av: "<cwd>/README.md", bv: "<cwd>/docs/README.md", flat: "$[7].params.path"},
		{name: "answer to the wrong request", old: `{"jsonrpc":"2.0","id":103,"result"`, new: `{"jsonrpc":"2.0","id":102,"result"`,
			turn: 2, stream: RequestsStream, index: 10, field: "id", av: "<rpc:4>", bv: "<rpc:3>", flat: "$[38].id"},
		{name: "tool call kind", old: `"kind":"execute"`, new: `"kind":"other"`,
			turn: 2, stream: "tool call <toolCallId:3>", index: 1, field: "kind", av: "execute", bv: "other", flat: "$[34].params.update.kind"},
		{name: "number in a non-time field", old: `"bytes":26`, new: `"bytes":27`,
			turn: 1, stream: "tool call <toolCallId:1>", index: 2, field: "rawOutput.bytes", av: json.Number("26"), bv: json.Number("27"), flat: "$[18].params.update.rawOutput.bytes"},
		{name: "update for another session", old: `{"sessionId":"ses_9a7b3c1d2e4fHk8LmN0pQr","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_Xy7Wv6Ut5Sr4Qp3On2Ml1Kj0"`,
			new:  `{"sessionId":"ses_0000000000000000000000","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_Xy7Wv6Ut5Sr4Qp3On2Ml1Kj0"`,
			turn: 1, stream: "tool call <toolCallId:1>", index: 2, bv: Missing{}, flat: "$[18]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := string(base)
			if tt.drop != "" {
				var kept []string
				for _, l := range strings.Split(text, "\n") {
					if !strings.Contains(l, tt.drop) {
						kept = append(kept, l)
					}
				}
				if len(kept) != strings.Count(text, "\n") {
					t.Fatalf("%q is not on exactly one line", tt.drop)
				}
				text = strings.Join(kept, "\n")
			} else {
				if strings.Count(text, tt.old) != 1 {
					t.Fatalf("%q is not in session_b.ndjson exactly once", tt.old)
				}
				text = strings.Replace(text, tt.old, tt.new, 1)
			}
			b := parseStream(t, tt.name, text)
			d := Compare(want, New(b.opts).Transcript(b.frames)).Diff
			if d == nil {
				t.Fatalf("no difference, want one in turn %d, %s", tt.turn, tt.stream)
			}
			if d.Turn != tt.turn || d.Stream != tt.stream || d.Index != tt.index || d.Field() != tt.field || d.Flat != tt.flat {
				t.Errorf("difference in turn %d, %s, value %d, at %q (%s), want turn %d, %s, value %d, at %q (%s)",
					d.Turn, d.Stream, d.Index, d.Field(), d.Flat, tt.turn, tt.stream, tt.index, tt.field, tt.flat)
			}
			if tt.av != nil && !same(d.Recorded, tt.av) || tt.bv != nil && !same(d.Live, tt.bv) {
				t.Errorf("difference %#v vs %#v, want %#v vs %#v", d.Recorded, d.Live, tt.av, tt.bv)
			}
		})
	}
}

func same(a, b any) bool {
	_, _, _, differ := FirstDifference(a, b)
	return !differ
}

// TestIdempotentStreams normalizes each test stream, and then its output
// again, with a fresh Normalizer.
func TestIdempotentStreams(t *testing.T) {
	names, _ := filepath.Glob("testdata/*.ndjson")
	for _, name := range names {
		sf := readStream(t, filepath.Base(name))
		for _, order := range []Order{ByStream, Strict} {
			for _, noCoalesce := range []bool{false, true} {
				sf.opts.NoCoalesce, sf.opts.Order = noCoalesce, order
				once := sf.normalize()
				twice := New(sf.opts).Stream(agentFrames(once))
				if got, want := joinLines(twice), joinLines(once); !bytes.Equal(got, want) {
					t.Errorf("%s (%v, NoCoalesce %v): normalizing twice differs from once:\ntwice: %s\nonce:  %s", name, order, noCoalesce, got, want)
				}
			}
		}
	}
}

func agentFrames(vs []json.RawMessage) []lane.Line {
	fs := make([]lane.Line, len(vs))
	for i, v := range vs {
		fs[i] = lane.Line{Lane: lane.Agent, Data: v}
	}
	return fs
}

func TestFrameLines(t *testing.T) {
	tests := []struct{ line, want string }{
		{"", `""`},
		{"\r", `""`},
		{"plain text\r", `"plain text"`},
		{"bad \xff utf-8", `"bad ` + "\uFFFD" + ` utf-8"`},
		{`{"a":1} trailing`, `"{\"a\":1} trailing"`},
		{`  {"b" : [1, 2.50, 1e3]}  `, `{"b":[1,2.50,1e3]}`},
		{`{"jsonrpc":"2.0","id":7,"result":{"x":"<b>&</b>"}}`, `{"id":"<rpc:1>","jsonrpc":"2.0","result":{"x":"<b>&</b>"}}`},
	}
	for _, tt := range tests {
		if got := New(Options{}).Frame(lane.Agent, []byte(tt.line)); string(got) != tt.want {
			t.Errorf("Frame(%q) = %s, want %s", tt.line, got, tt.want)
		}
	}
}

// TestRPCIDs checks that each side's requests are numbered apart and that
// a response gets the placeholder of its request.
func TestRPCIDs(t *testing.T) {
	n := New(Options{})
	steps := []struct {
		side       lane.Lane
		line, want string
	}{
		{lane.Editor, `{"id":0,"method":"initialize"}`, "<rpc:1>"},
		{lane.Agent, `{"id":0,"method":"fs/read_text_file"}`, "<agentRpc:1>"},
		{lane.Editor, `{"id":"0","method":"session/new"}`, "<rpc:2>"},
		{lane.Agent, `{"id":0,"result":{}}`, "<rpc:1>"},
		{lane.Editor, `{"id":0,"result":{}}`, "<agentRpc:1>"},
		{lane.Agent, `{"id":"0","error":{"code":1,"message":"no"}}`, "<rpc:2>"},
		{lane.Agent, `{"id":"4f7c8d2e-0a1b-4c3d-9e8f-7a6b5c4d3e2f","method":"session/request_permission"}`, "<agentRpc:2>"},
		{lane.Editor, `{"id":"4f7c8d2e-0a1b-4c3d-9e8f-7a6b5c4d3e2f","result":{}}`, "<agentRpc:2>"},
		{lane.Agent, `{"id":"<rpc:9>","result":{}}`, "<rpc:9>"},
	}
	for i, s := range steps {
		var got struct{ ID any }
		if err := json.Unmarshal(n.Frame(s.side, []byte(s.line)), &got); err != nil {
			t.Fatal(err)
		}
		if got.ID != s.want {
			t.Errorf("step %d: %s frame %s: id = %v, want %v", i, s.side, s.line, got.ID, s.want)
		}
	}
	// A notification has no id to link, and an object that is not
	// JSON-RPC keeps its "id".
	for _, line := range []string{`{"id":null,"error":{"code":1,"message":"x"}}`, `{"id":5,"other":true}`} {
		if got := n.Frame(lane.Agent, []byte(line)); !bytes.Contains(got, []byte(`"id":`+strings.Split(strings.TrimPrefix(line, `{"id":`), ",")[0])) {
			t.Errorf("Frame(%s) = %s, want the id kept", line, got)
		}
	}
}

// TestConcurrentUse exercises the lock under the race detector.
func TestConcurrentUse(t *testing.T) {
	n := New(Options{Cwd: []string{"/w"}})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			line := []byte(`{"method":"session/update","params":{"sessionId":"s","update":{"toolCallId":"c` + string(rune('0'+i)) + `"}}}`)
			n.Frame(lane.Agent, line)
			n.Stream([]lane.Line{{Lane: lane.Agent, Data: line}})
			n.Request("POST", "/v1/messages", nil, []byte(`{"metadata":{"user_id":"u"}}`))
		})
	}
	wg.Wait()
	if got := n.Frame(lane.Agent, []byte(`{"toolCallId":"c0"}`)); !bytes.Contains(got, []byte("<toolCallId:")) {
		t.Errorf("Frame = %s, want a toolCallId placeholder", got)
	}
}

// TestReplayedModelText shows why a replayed run needs the recorded roots:
// the model's text comes from the recording.
func TestReplayedModelText(t *testing.T) {
	msg := func(text string) lane.Line {
		b, _ := json.Marshal(map[string]any{"method": "session/update", "params": map[string]any{"sessionId": "s",
			"update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}}}})
		return lane.Line{Lane: lane.Agent, Data: b}
	}
	recorded := New(Options{Cwd: []string{"/home/alice/demo"}}).Stream([]lane.Line{msg("I edited /home/alice/demo/a.go")})
	// The agent's own output names the replay's workspace, the model's
	// text the recorded one.
	replayed := []lane.Line{msg("I edited /home/alice/demo/a.go")}
	if _, _, _, ok := FirstDifference(recorded, New(Options{Cwd: []string{"/tmp/ws"}}).Stream(replayed)); !ok {
		t.Errorf("with only the replay's root, the recorded path is not normalized, want a difference")
	}
	both := New(Options{Cwd: []string{"/tmp/ws", "/home/alice/demo"}}).Stream(replayed)
	if path, av, bv, ok := FirstDifference(recorded, both); ok {
		t.Errorf("with both roots, the runs differ at %s: %v vs %v", path, av, bv)
	}
}

// TestCoalesceWithContentRule checks that a user rule that replaces the
// content of chunks keeps them apart, normalized whole.
func TestCoalesceWithContentRule(t *testing.T) {
	rules, err := ParseRules([]byte(`[{"path":"$.params.update.content","placeholder":"<content>"}]`))
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`)
	out := New(Options{Rules: rules}).Stream([]lane.Line{{Lane: lane.Agent, Data: line}, {Lane: lane.Agent, Data: line}})
	want := `{"method":"session/update","params":{"sessionId":"<sessionId:1>","update":{"content":"<content>","sessionUpdate":"agent_message_chunk"}}}`
	if len(out) != 2 || string(out[0]) != want || string(out[1]) != want {
		t.Errorf("Stream = %s, want two frames %s", joinLines(out), want)
	}
}

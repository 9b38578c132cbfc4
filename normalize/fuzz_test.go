package normalize

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acptap/acptap/lane"
)

// fuzzOptions has roots nested in each other, user rules whose
// replacements are fixed points, as ParseRules demands, and presence
// rules of each kind.
func fuzzOptions(t testing.TB) Options {
	rules, err := ParseRules([]byte(`[{"path":"$.**.started","placeholder":"<started>"},{"regexp":"build [0-9]+","replace":"build N"},` +
		`{"path":"$.**.text","regexp":"(PGID: )[0-9]+","replace":"${1}<number>"},{"path":"$.**.n","regexp":"^[0-9]+$","replace":"<number>"},` +
		`{"optional":"update tool_call_update completed","at":"last"},{"optional":"request _x/drain","after":"update tool_call_update completed"},{"optional":"notification _x/progress"}]`))
	if err != nil {
		t.Fatal(err)
	}
	return Options{Cwd: []string{"/w/ws"}, Home: []string{"/home/u"}, Tmp: []string{"/tmp", "/w/tmp"}, Rules: rules}
}

// addStreamSeeds adds every frame of the test streams, and each stream
// whole, to the corpus.
func addStreamSeeds(f *testing.F) {
	names, _ := filepath.Glob("testdata/*.ndjson")
	for _, name := range names {
		sf := readStream(f, filepath.Base(name))
		var all [][]byte
		for _, fr := range sf.frames {
			f.Add(fr.Data)
			all = append(all, fr.Data)
		}
		f.Add(bytes.Join(all, []byte("\n")))
	}
}

// FuzzIdempotent checks that normalizing twice equals normalizing once, for
// one frame, for a stream (the lines of the input) in both orders with and
// without coalescing, and for an LLM request body; that the output is
// JSON; and that ReadTranscript of a stream lists what Transcript does.
func FuzzIdempotent(f *testing.F) {
	addStreamSeeds(f)
	for _, s := range []string{"", "\xff\xfe", "/w/ws/tmp/x", "<cwd>/home/u/a", `{"a":"{\"pid\":1}"}`, "build 12026-11-29T10:00:00Z",
		`{"text":"Current date: Sat Nov 29 2026 in /w/ws.","id":"fc_1","usage":{"x_tokens":1}}`,
		"/home/u/.claude/projects/-w-ws/m -w-ws-w-ws _w_ws_x", "?p=%2Fw%2Fws%2Fa&q=%2fw%2fws <cwd>%2Fw%2Fws", `["\/w\/ws\/a","\/tmp\/b"]`, "<cwd>-w-ws/<tmp>_w_ws"} {
		f.Add([]byte(s))
	}
	// Frames the presence rules leave out, on both lanes, and around them.
	var presence []string
	for _, l := range []string{toolCall("s", "c", "Read"), toolUpdate("s", "c", "completed"), drain(1, "s"), toolUpdate("s", "c", "completed"),
		progress("s"), drain(2, "s"), permission(3, "s", "c"), msgChunk("s", "x"), answer(1, "end_turn"), drain(4, "s")} {
		presence = append(presence, l, l)
	}
	f.Add([]byte(strings.Join(presence, "\n")))
	opts := fuzzOptions(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		once := New(opts).Frame(lane.Agent, data)
		if !json.Valid(once) {
			t.Fatalf("Frame(%q) = %q, not JSON", data, once)
		}
		if twice := New(opts).Frame(lane.Agent, once); !bytes.Equal(twice, once) {
			t.Fatalf("Frame(%q):\nonce  %s\ntwice %s", data, once, twice)
		}

		var frames []lane.Line
		for i, line := range bytes.Split(data, []byte("\n")) {
			frames = append(frames, lane.Line{Lane: lane.Lane(i % 2), Data: line})
		}
		for _, order := range []Order{ByStream, Strict} {
			for _, noCoalesce := range []bool{false, true} {
				o := opts
				o.NoCoalesce, o.Order = noCoalesce, order
				onceVals := New(o).Stream(frames)
				once, twice := joinLines(onceVals), joinLines(New(o).Stream(agentFrames(onceVals)))
				if !bytes.Equal(twice, once) {
					t.Fatalf("Stream (%v, NoCoalesce %v) of %q:\nonce  %s\ntwice %s", order, noCoalesce, data, once, twice)
				}
				read, err := New(o).ReadTranscript(&reader{frames: frames})
				if err != nil {
					t.Fatal(err)
				}
				if got := joinLines(read.Values()); !bytes.Equal(got, once) {
					t.Fatalf("ReadTranscript (%v, NoCoalesce %v) of %q:\n got %s\nwant %s", order, noCoalesce, data, got, once)
				}
			}
		}

		body := encode(New(opts).Request("POST", "/v1/responses", nil, data).(map[string]any)["body"])
		again := encode(New(opts).Request("POST", "/v1/responses", nil, body).(map[string]any)["body"])
		if !bytes.Equal(again, body) {
			t.Fatalf("request body %q:\nonce  %s\ntwice %s", data, body, again)
		}
	})
}

// FuzzParseRules checks that ParseRules fails with a one-line error that
// wraps ErrRules, or returns rules that print back to what it parses
// again and that apply without trouble.
func FuzzParseRules(f *testing.F) {
	f.Add([]byte(`[{"path":"$.params.update.rawInput.*.started","placeholder":"<started>"},{"regexp":"build ([0-9]+)","replace":"build N"}]`))
	f.Add([]byte(`[{"path":"$.**[\"a.b\"][0][*]","placeholder":"","comment":"c"},{"regexp":"(?i)x(y)","replace":"${1}z"}]`))
	f.Add([]byte(`[{"path":"$..a","placeholder":"x"}]`))
	f.Add([]byte(`[{"path":"$.a[*].b","regexp":"(x=)[0-9]+","replace":"${1}<number>","comment":"calibrate"}]`))
	f.Add([]byte(`[{"regexp":"[0-9]+","replace":"N1"}]`))
	f.Add([]byte(`[{"optional":"update tool_call_update completed","at":"last","comment":"calibrate"},{"optional":"request _x/drain","after":"update tool_call completed"},{"optional":"notification _x/progress"}]`))
	f.Add([]byte(`[{"optional":"update usage_update","at":"last"},{"optional":"request x","at":"first"}]`))
	f.Add([]byte(`{"rules":[]}`))
	if b, err := os.ReadFile("testdata/rules.ndjson"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "#rules "); ok {
				f.Add([]byte(rest))
			}
		}
	}
	sample := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","rawInput":{"a":{"started":1,"b":[1,"x y"]}},"title":"build 7"}}}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := ParseRules(data)
		if err != nil {
			if !errors.Is(err, ErrRules) {
				t.Fatalf("ParseRules(%q) = %v, want an error wrapping ErrRules", data, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseRules(%q): error of several lines: %q", data, err)
			}
			return
		}
		var printed []string
		for _, r := range rules {
			printed = append(printed, r.String())
		}
		src := "[" + strings.Join(printed, ",") + "]"
		again, err := ParseRules([]byte(src))
		if err != nil {
			t.Fatalf("ParseRules(%q) fails on the printed rules %s: %v", data, src, err)
		}
		for i := range again {
			if again[i].String() != printed[i] {
				t.Fatalf("rule %d prints as %s, then as %s", i, printed[i], again[i])
			}
		}
		if out := New(Options{Rules: rules}).Frame(lane.Agent, sample); !json.Valid(out) {
			t.Fatalf("Frame with rules %s = %q, not JSON", src, out)
		}
	})
}

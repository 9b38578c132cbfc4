package normalize

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// conversation returns the bodies of a chat session of turns requests,
// each carrying the conversation so far, as an agent run with the given
// session id, working directory and clock sends them: ids, UUIDs, times,
// paths, tool calls with JSON arguments, usage reports, duplicate keys
// and a last message that changes from turn to turn (as cache markers
// move).
func conversation(turns int, session, cwd string, clock int) [][]byte {
	var bodies [][]byte
	var msgs []string
	for i := range turns {
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"user","content":"step %d in %s/src/main.go at 2026-11-2%dT10:00:0%dZ, session %s"}`, i, cwd, i%10, clock%10, session),
			fmt.Sprintf(`{"role":"assistant","tool_calls":[{"id":"call_%04dabcdef","type":"function","function":{"name":"read","arguments":"{\"path\":\"%s/notes.txt\",\"request_id\":\"%s-%d\"}"}}]}`, i, cwd, session, i),
			fmt.Sprintf(`{"role":"tool","tool_call_id":"call_%04dabcdef","content":"read 3 lines; took 1%dms; uuid 3f2b9c4e-7a8d-4e1f-9b6a-2c5d8e7f%04d"}`, i, clock%10, i))
		last := fmt.Sprintf(`{"role":"user","content":"turn %d","cache_control":{"type":"ephemeral"}}`, i)
		body := fmt.Sprintf(`{"model":"m","messages":[%s,%s],"metadata":{"session_id":%q,"created_at":%d},"usage":[{"prompt_tokens":%d}],"tools":[{"type":"function","function":{"name":"read","description":"reads a file under %s"}}],"stream":true,"model":"m2"}`,
			strings.Join(msgs, ","), last, session, 1780000000+clock+i, 10*i, cwd)
		bodies = append(bodies, []byte(body))
	}
	return bodies
}

// TestRequestsAsNormalizer checks that Requests normalizes a recorded
// conversation and its replay, interleaved as a replay compares them, as
// a fresh Normalizer normalizes each request, with and without user
// rules.
func TestRequestsAsNormalizer(t *testing.T) {
	rules, err := ParseRules([]byte(`[{"regexp":"turn [0-9]+","replace":"<turn>"},{"path":"$.body.metadata.created_at","placeholder":"<created>"}]`))
	if err != nil {
		t.Fatal(err)
	}
	recorded := conversation(12, "sess-recorded-0001", "/rec/ws", 1)
	live := conversation(12, "sess-replayed-0002", "/sb/work", 7)
	// The live side's third request repeats the recorded one's session id,
	// as an agent that resumed it would: its parts link differently.
	live[2] = recorded[2]
	header := func(id string) http.Header {
		return http.Header{"X-Request-Id": {id}, "Session_id": {"sess-" + id}, "User-Agent": {"agent/1.2.3 (linux; x86_64)"}}
	}
	for _, rs := range [][]Rule{nil, rules} {
		opts := Options{Cwd: []string{"/rec/ws", "/sb/work"}, Rules: rs}
		reqs := NewRequests(opts)
		for i := range recorded {
			for side, body := range [][]byte{recorded[i], live[i]} {
				h := header(fmt.Sprintf("%d-%d", side, i))
				want := New(opts).Request("POST", "http://h/v1/chat/completions?ts=1780000000", h, body)
				got := reqs.Request("POST", "http://h/v1/chat/completions?ts=1780000000", h, body)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%d rules, request %d of side %d:\ngot  %s\nwant %s", len(rs), i, side, pretty(got), pretty(want))
				}
			}
		}
		// Each request repeats all but the last message of the one before
		// on its side, and the tools.
		if min := 2 * 11 * 3; reqs.hits < min {
			t.Errorf("%d rules: %d parts used again, want at least %d", len(rs), reqs.hits, min)
		}
	}
}

// TestRequestsNotJSONObject checks the bodies Requests leaves to the
// usual normalization.
func TestRequestsNotJSONObject(t *testing.T) {
	reqs := NewRequests(Options{})
	for _, body := range []string{"", "  ", "[1,2]", `{"a":`, "not json at 2026-11-20T10:00:00Z", `"a string"`, `{"a":1} trailing`} {
		want := New(Options{}).Request("POST", "http://h/x", nil, []byte(body))
		got := reqs.Request("POST", "http://h/x", nil, []byte(body))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("body %q: got %s, want %s", body, pretty(got), pretty(want))
		}
	}
}

// FuzzRequests checks Requests against a fresh Normalizer on two bodies
// in turn, the second one the first with a member added, as a
// conversation grows.
func FuzzRequests(f *testing.F) {
	for _, b := range conversation(3, "sess-0001", "/ws", 3) {
		f.Add(b, `{"role":"user","content":"more"}`)
	}
	f.Add([]byte(`{"messages":[{"id":"a"},{"id":"a"},{"id":"b"}],"usage":[{"tokens":1}]}`), `{"id":"b"}`)
	f.Fuzz(func(t *testing.T, body []byte, extra string) {
		opts := Options{Cwd: []string{"/ws"}}
		reqs := NewRequests(opts)
		second := []byte(strings.Replace(string(body), `"messages":[`, `"messages":[`+extra+",", 1))
		for _, b := range [][]byte{body, second, body} {
			want := New(opts).Request("POST", "http://h/v1/messages", nil, b)
			got := reqs.Request("POST", "http://h/v1/messages", nil, b)
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Fatalf("body %q:\ngot  %s\nwant %s", b, gj, wj)
			}
		}
	})
}

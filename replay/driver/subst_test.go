package driver

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLearn(t *testing.T) {
	var s substitutions
	s.learn([]byte(`{"sessionId":"sess_0a1b2c","modes":{"current":"default"},"items":[{"id":"call_111111"},{"id":"ok"}]}`),
		[]byte(`{"sessionId":"sess_9f8e7d","modes":{"current":"default"},"items":[{"id":"call_222222"},{"id":"no"}],"extra":"x"}`))
	s.learn([]byte(`{"title":"Read a file","path":"/rec/ws1/a.txt","status":"pending","stop":"max_turn_requests","uuid":"b9f3c1e2-aaaa"}`),
		[]byte(`{"title":"Read the file","path":"/live/ws2/a.txt","status":"in_progress","stop":"end_turn","uuid":"ffffffffffffffffff"}`))
	want := map[string]string{
		"sess_0a1b2c":    "sess_9f8e7d",
		"call_111111":    "call_222222",
		"/rec/ws1/a.txt": "/live/ws2/a.txt",
		"b9f3c1e2-aaaa":  "ffffffffffffffffff",
	}
	if len(s.live) != len(want) {
		t.Errorf("learned %q, want %q", s.live, want)
	}
	for rec, live := range want {
		if s.live[rec] != live {
			t.Errorf("learned %q → %q, want %q", rec, s.live[rec], live)
		}
	}

	tests := []struct{ in, want string }{
		{"sess_0a1b2c", "sess_9f8e7d"},
		{"/tmp/sess_0a1b2c/log", "/tmp/sess_9f8e7d/log"},
		{"sessions sess_0a1b2c and sess_0a1b2c.", "sessions sess_9f8e7d and sess_9f8e7d."},
		{"xsess_0a1b2c", "xsess_0a1b2c"},
		{"sess_0a1b2c_2", "sess_0a1b2c_2"},
		{"sess_0a1b2c-x", "sess_0a1b2c-x"},
		{"/rec/ws1/a.txt", "/live/ws2/a.txt"},
		{"see /rec/ws1/a.txt", "see /rec/ws1/a.txt"}, // not a word: whole values only
		{"max_turn_requests", "max_turn_requests"},
		{"default", "default"},
	}
	for _, tt := range tests {
		if got := s.apply(tt.in); got != tt.want {
			t.Errorf("apply(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLearnRefuses(t *testing.T) {
	var s substitutions
	for _, p := range [][2]string{
		{"sess_aaaaa1", "sess_bbbbb2"},
		{"sess_aaaaa1", "sess_ccccc3"}, // the first live value stays
		{"sess_bbbbb2", "sess_ddddd4"}, // a live value as a recorded one
		{"sess_eeeee5", "sess_aaaaa1"}, // a recorded value as a live one
		{"x/sess_bbbbb2", "y/zzzzz6"},  // a live value as a word of a recorded one
		{"yyyyy7", "q/sess_aaaaa1"},    // a recorded value as a word of a live one
		{"abcde8", "abcde8/2"},         // the pair's own
		{"short1", "short"},            // not id-like
		{"with space1", "without1"},    // not id-like
		{"pending", "in_progress"},     // not id-like
	} {
		s.add(p[0], p[1])
	}
	if len(s.live) != 1 || s.live["sess_aaaaa1"] != "sess_bbbbb2" {
		t.Errorf("learned %q, want only sess_aaaaa1 → sess_bbbbb2", s.live)
	}
}

func TestPathMap(t *testing.T) {
	pm := newPathMap(map[string]string{
		"/home/rec":            "/sandbox/home",
		"/home/rec/work/":      "/tmp/ws",
		"":                     "/nowhere",
		"/same":                "/same",
		"/home/rec/work/inner": "/elsewhere",
	})
	tests := []struct{ in, want string }{
		{"/home/rec/work", "/tmp/ws"},
		{"/home/rec/work/", "/tmp/ws/"},
		{"/home/rec/work/main.go", "/tmp/ws/main.go"},
		{"/home/rec/work/inner/x", "/elsewhere/x"},
		{"/home/rec/.config", "/sandbox/home/.config"},
		{"file:///home/rec/work/a.go", "file:///tmp/ws/a.go"},
		{"Fix /home/rec/work/a.go and /home/rec/work.", "Fix /tmp/ws/a.go and /tmp/ws."},
		{"(/home/rec/work) `/home/rec/work`", "(/tmp/ws) `/tmp/ws`"},
		{"/home/rec/workshop", "/sandbox/home/workshop"},
		{"/home/rec/work.bak", "/sandbox/home/work.bak"},
		{"/home/recorded/work", "/home/recorded/work"},
		{"/x/home/rec/work", "/x/home/rec/work"},
		{"x/home/rec/work", "x/home/rec/work"},
		{"/home/recorded", "/home/recorded"},
		{"/same/x", "/same/x"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := pm.apply(tt.in); got != tt.want {
			t.Errorf("apply(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	pm = newPathMap(map[string]string{"/w/rec": "/w/live"})
	for _, in := range []string{"/w/rec.bak", "/w/rec-2", "/w/recx", "a/w/rec"} {
		if got := pm.apply(in); got != in {
			t.Errorf("apply(%q) = %q, want it unchanged", in, got)
		}
	}
}

// TestPathMapForms: a directory is also rewritten in the forms agents
// derive from it, each into the same form of the other.
func TestPathMapForms(t *testing.T) {
	pm := newPathMap(map[string]string{"/tmp/rec/ws": "/tmp/acptap-replay-1/work", "/home/rec": "/tmp/acptap-replay-1/home"})
	tests := []struct{ in, want string }{
		{"/home/rec/.claude/projects/-tmp-rec-ws/memory", "/tmp/acptap-replay-1/home/.claude/projects/-tmp-acptap-replay-1-work/memory"},
		{"key _tmp_rec_ws_x", "key _tmp_acptap-replay-1_work_x"},
		{"open?dir=%2Ftmp%2Frec%2Fws%2Fa.go", "open?dir=%2Ftmp%2Facptap-replay-1%2Fwork%2Fa.go"},
		{"open?dir=%2ftmp%2frec%2fws", "open?dir=%2ftmp%2facptap-replay-1%2fwork"},
		{`["\/tmp\/rec\/ws\/a"]`, `["\/tmp\/acptap-replay-1\/work\/a"]`},
		{"x-tmp-rec-ws -tmp-rec-wsb", "x-tmp-rec-ws -tmp-rec-wsb"},
	}
	for _, tt := range tests {
		if got := pm.apply(tt.in); got != tt.want {
			t.Errorf("apply(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzLearn(f *testing.F) {
	f.Add([]byte(`{"sessionId":"sess_0a1b2c"}`), []byte(`{"sessionId":"sess_9f8e7d"}`), "cwd /tmp/sess_0a1b2c/x", "sess_9f8e7d")
	f.Add([]byte(`["aaaaa1","bbbbb2",{"k":"ccccc3"}]`), []byte(`["bbbbb2","ccccc3",{"k":"aaaaa1"}]`), "aaaaa1 bbbbb2 ccccc3", "x")
	f.Add([]byte(`{"a":"x/yyyyy1","b":"zzzzz2"}`), []byte(`{"a":"yyyyy1","b":"x/zzzzz2"}`), "x/yyyyy1 zzzzz2", "yyyyy1")
	f.Fuzz(func(t *testing.T, rec, live []byte, s1, s2 string) {
		var s substitutions
		s.learn(rec, live)
		s.learn(live, rec)
		s.add(s1, s2)
		for k, v := range s.live {
			if k == v {
				t.Fatalf("learned %q → itself", k)
			}
			if got := s.apply(k); got != v {
				t.Fatalf("apply(%q) = %q, want %q", k, got, v)
			}
		}
		for _, in := range []string{s1, s2, string(rec), string(live), s1 + " " + s2} {
			once := s.apply(in)
			if twice := s.apply(once); twice != once {
				t.Fatalf("substitutions %q: apply(%q) = %q, but applied again %q", s.live, in, once, twice)
			}
			if once != in && len(s.live) == 0 {
				t.Fatalf("apply(%q) = %q with no substitution", in, once)
			}
		}
		for k := range s.live {
			if strings.ContainsAny(k, " \t\n") {
				t.Fatalf("learned %q, which has white space", k)
			}
		}
	})
}

// TestSessionOf: params.sessionId read where ACP puts it, first, equals
// what decoding gives, and is decoded anywhere else.
func TestSessionOf(t *testing.T) {
	for params, want := range map[string]string{
		`{"sessionId":"sess_1","update":{"sessionUpdate":"plan"}}`: "sess_1",
		`{"sessionId":"a\"b","x":1}`:                               `a"b`,
		`{"sessionId":"caf\u00e9"}`:                                "café",
		`{"update":{"sessionId":"inner"},"sessionId":"outer"}`:     "outer",
		`{ "sessionId" : "spaced" }`:                               "spaced",
		`{"cwd":"/w"}`:                                             "",
		`{"sessionId":""}`:                                         "",
		`[1,2]`:                                                    "",
		``:                                                         "",
	} {
		if got := sessionOf(json.RawMessage(params)); got != want {
			t.Errorf("sessionOf(%s) = %q, want %q", params, got, want)
		}
	}
}

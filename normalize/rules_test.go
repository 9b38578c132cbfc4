package normalize

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acptap/acptap/lane"
)

func TestParseRules(t *testing.T) {
	src := `[
		{"path": "$.params.update.rawInput.*.started", "placeholder": "<started>"},
		{"path": "$.**[\"odd.key\"][2][*]", "placeholder": "", "comment": "an empty placeholder is allowed"},
		{"regexp": "build ([0-9]+)", "replace": "build N"},
		{"regexp": "x", "replace": ""}
	]`
	rules, err := ParseRules([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"path":"$.params.update.rawInput.*.started","placeholder":"<started>"}`,
		`{"comment":"an empty placeholder is allowed","path":"$.**[\"odd.key\"][2][*]","placeholder":""}`,
		`{"regexp":"build ([0-9]+)","replace":"build N"}`,
		`{"regexp":"x","replace":""}`,
	}
	if len(rules) != len(want) {
		t.Fatalf("got %d rules, want %d", len(rules), len(want))
	}
	for i, r := range rules {
		if r.String() != want[i] {
			t.Errorf("rule %d = %s, want %s", i, r, want[i])
		}
	}
	if rules, err := ParseRules([]byte(`[]`)); err != nil || len(rules) != 0 {
		t.Errorf("ParseRules([]) = %v, %v; want no rules, no error", rules, err)
	}
}

func TestParseRulesErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{`{"path":"$"}`, `want a JSON array of rule objects, got object`},
		{`null`, `want a JSON array of rule objects, got null`},
		{"[\n  {\"path\": \"$.a\",\n  \"placeholder\" \"x\"}]", `line 3, column 17: invalid character '"' after object key`},
		{`[17]`, `rules[0]: want an object, got number`},
		{`[{}]`, `rules[0]: has neither path, regexp nor optional`},
		{`[{"path":"$.a","placeholder":"x"},{"path":"$.b","regexp":"b","placeholder":"x"}]`, `rules[1]: has a path, a regexp and a placeholder; a path rule takes a placeholder, a regexp rule (with or without a path) a replace`},
		{`[{"path":"$.b","regexp":"b"}]`, `rules[0].replace: missing: a regexp rule needs a replacement ("" deletes)`},
		{`[{"path":"$.b[","regexp":"b","replace":"c"}]`, `rules[0].path: missing ] at offset 3`},
		{`[{"path":"$.a"}]`, `rules[0].placeholder: missing: a path rule needs the value to put at its path`},
		{`[{"path":"$.a","placeholder":7}]`, `rules[0].placeholder: want a string, got number`},
		{`[{"path":"$.a","replace":"x"}]`, `rules[0].replace: belongs to a regexp rule; a path rule takes a placeholder`},
		{`[{"path":"params.a","placeholder":"x"}]`, `rules[0].path: must start with "$", the root of the value`},
		{`[{"path":"$..a","placeholder":"x"}]`, `rules[0].path: empty key at offset 2 (use .** for any depth)`},
		{`[{"path":"$.a[x]","placeholder":"x"}]`, `rules[0].path: bad index "x" (want a number, *, or a quoted key) at offset 3`},
		{`[{"path":"$.a[-1]","placeholder":"x"}]`, `rules[0].path: bad index "-1" (want a number, *, or a quoted key) at offset 3`},
		{`[{"path":"$.a[2","placeholder":"x"}]`, `rules[0].path: missing ] at offset 3`},
		{`[{"path":"$.a[\"b\"","placeholder":"x"}]`, `rules[0].path: missing ] after quoted key at offset 3`},
		{`[{"path":"$a","placeholder":"x"}]`, `rules[0].path: unexpected 'a' at offset 1 (want . or [)`},
		{`[{"regexp":"build ([0-9]+"}]`, `rules[0].replace: missing: a regexp rule needs a replacement ("" deletes)`},
		{`[{"regexp":"build ([0-9]+","replace":"b"}]`, `rules[0].regexp: missing closing ) in "build ([0-9]+"`},
		{`[{"regexp":"a*","replace":"b"}]`, `rules[0].regexp: "a*" matches the empty string, so it would insert its replacement everywhere`},
		{`[{"regexp":"[0-9]+","replace":"N1"}]`, `rules[0].replace: "N1" is rewritten again by the regexp (to "NN1"), so normalizing twice would differ from once`},
		{`[{"regexp":"(a)b","replace":"${1}ab"}]`, `rules[0].replace: "ab" is rewritten again by the regexp (to "aab"), so normalizing twice would differ from once`},
		{`[{"regexp":"b","placeholder":"x","replace":"c"}]`, `rules[0].placeholder: belongs to a path rule; a regexp rule takes a replace`},
		{`[{"regexp":"b","replacement":"c"}]`, `rules[0]: unknown field "replacement" (want path and placeholder, regexp and replace, or optional)`},
	}
	for _, tt := range tests {
		_, err := ParseRules([]byte(tt.src))
		if err == nil {
			t.Errorf("ParseRules(%s): no error, want %q", tt.src, tt.want)
			continue
		}
		if !errors.Is(err, ErrRules) {
			t.Errorf("ParseRules(%s) = %v, want it to wrap ErrRules", tt.src, err)
		}
		if want := "normalize: invalid rules: " + tt.want; err.Error() != want {
			t.Errorf("ParseRules(%s):\n got error %s\nwant error %s", tt.src, err, want)
		}
	}
}

func TestLoadRules(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "rules.json")
	if err := os.WriteFile(good, []byte(`[{"regexp":"build [0-9]+","replace":"build N"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	rules, err := LoadRules(good)
	if err != nil || len(rules) != 1 {
		t.Fatalf("LoadRules = %v, %v; want one rule", rules, err)
	}

	_, err = LoadRules(filepath.Join(dir, "missing.json"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "normalize: load rules: open ") {
		t.Errorf("LoadRules(missing) = %v, want a not-exist error that says what failed", err)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"regexp":"("}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadRules(bad)
	if want := bad + ": normalize: invalid rules: rules[0].replace: missing"; err == nil || !errors.Is(err, ErrRules) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("LoadRules(bad) = %v, want an error starting %q", err, want)
	}
}

func TestMatchPath(t *testing.T) {
	path := []step{{key: "params"}, {key: "update"}, {key: "rawInput"}, {index: 2, isIndex: true}, {key: "started"}}
	tests := []struct {
		pattern string
		want    bool
	}{
		{"$.params.update.rawInput[2].started", true},
		{"$.params.update.rawInput[*].started", true},
		{"$.params.update.rawInput.*.started", true},
		{"$.params.*.*.*.started", true},
		{"$.**.started", true},
		{"$.**", true},
		{"$.params.**.started", true},
		{"$.params.update.**.rawInput[2].started", true},
		{`$["params"].update.rawInput[2]["started"]`, true},
		{"$.**.**.started", true},
		{"$", false},
		{"$.params.update.rawInput[3].started", false},
		{"$.params.update.rawInput.2.started", false},
		{"$.params.update.rawInput[2]", false},
		{"$.*.started", false},
		{"$.**.rawInput", false},
		{"$.params.update.rawInput[2].started.x", false},
	}
	for _, tt := range tests {
		segs, err := parsePath(tt.pattern)
		if err != nil {
			t.Fatalf("parsePath(%q): %v", tt.pattern, err)
		}
		if got := matchPath(segs, path); got != tt.want {
			t.Errorf("%s matches $.params.update.rawInput[2].started = %v, want %v", tt.pattern, got, tt.want)
		}
	}
	if segs, _ := parsePath("$"); !matchPath(segs, nil) {
		t.Errorf("$ does not match the root")
	}
}

// TestRulesOnRequests checks that user rules see the whole request and
// that a path FirstDifference reports works as a rule's path.
func TestRulesOnRequests(t *testing.T) {
	runs := readRequests(t, "request_anthropic.json")
	a := runs[0]
	b := runs[1]
	b.Body = []byte(strings.Replace(string(b.Body), "Linux 6.8.0-49-generic", "Linux 6.11.0-1015-azure", 1))
	path, _, _, ok := FirstDifference(a.normalize(), b.normalize())
	if !ok || path != "$.body.system[1].text" {
		t.Fatalf("FirstDifference = %q, %v; want the system prompt", path, ok)
	}
	rules, err := ParseRules([]byte(`[{"regexp":"OS Version: [^\\n]*","replace":"OS Version: <os>"},{"path":"$.header[\"x-app\"]","placeholder":"<app>"}]`))
	if err != nil {
		t.Fatal(err)
	}
	norm := func(r requestRun) any {
		return New(Options{Cwd: r.Cwd, Home: r.Home, Tmp: r.Tmp, Rules: rules}).Request(r.Method, r.URL, r.Header, r.Body)
	}
	na, nb := norm(a), norm(b)
	if path, av, bv, ok := FirstDifference(na, nb); ok {
		t.Errorf("with the rules, the runs differ at %s: %v vs %v", path, av, bv)
	}
	if got := na.(map[string]any)["header"].(map[string]any)["x-app"]; got != "<app>" {
		t.Errorf("x-app = %v, want <app>", got)
	}
}

// TestRegexpRuleWithPath: a regexp rule with a path rewrites the strings
// and the numbers at the paths it matches, and nothing elsewhere.
func TestRegexpRuleWithPath(t *testing.T) {
	rules, err := ParseRules([]byte(`[
		{"path": "$.params.update.content[*].text", "regexp": "(Job: )[0-9]+", "replace": "${1}<number>", "comment": "learned"},
		{"path": "$.params.update.rawOutput.tokens", "regexp": "^[0-9]+$", "replace": "<number>"}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rules[0].String(), `{"comment":"learned","path":"$.params.update.content[*].text","regexp":"(Job: )[0-9]+","replace":"${1}<number>"}`; got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
	if rules[0].Comment() != "learned" || rules[1].Comment() != "" {
		t.Errorf("comments %q, %q; want learned and none", rules[0].Comment(), rules[1].Comment())
	}
	frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","title":"Job: 17876","content":[{"text":"Process Group Job: 17876"},{"text":"Job: 3"}],"rawOutput":{"tokens":8680,"other":8680,"tokensText":"8680"}}}}`)
	got := string(New(Options{Rules: rules}).Frame(lane.Agent, frame))
	want := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"<sessionId:1>","update":{"content":[{"text":"Process Group Job: <number>"},{"text":"Job: <number>"}],"rawOutput":{"other":8680,"tokens":"<number>","tokensText":"8680"},"sessionUpdate":"tool_call_update","title":"Job: 17876","toolCallId":"<toolCallId:1>"}}}`
	if got != want {
		t.Errorf("Frame =\n%s\nwant\n%s", got, want)
	}
	if again := string(New(Options{Rules: rules}).Frame(lane.Agent, []byte(got))); again != got {
		t.Errorf("normalized again:\n%s\nwant it unchanged:\n%s", again, got)
	}
	back, err := ParseRules(FormatRules(rules))
	if err != nil || len(back) != 2 || back[0].String() != rules[0].String() || back[1].String() != rules[1].String() {
		t.Errorf("ParseRules(FormatRules(rules)) = %v, %v; want the rules back", back, err)
	}
	if got := string(FormatRules(nil)); got != "[]\n" {
		t.Errorf("FormatRules(nil) = %q, want []", got)
	}
}

// TestRulesRematched checks rules whose replacement forms a new match with
// the text around it, which ParseRules's check of the replacement alone
// lets through: normalizing once must equal normalizing twice.
func TestRulesRematched(t *testing.T) {
	for _, tc := range []struct {
		rules, text, want string
	}{
		// ab → a: aabb, aab, aa.
		{`[{"regexp": "ab", "replace": "a"}]`, "aabb", "aa"},
		// Two rules feeding each other: x1 → y, y2 → x.
		{`[{"regexp": "x1", "replace": "y"}, {"regexp": "y2", "replace": "x"}]`, "x121", "y"},
	} {
		rules, err := ParseRules([]byte(tc.rules))
		if err != nil {
			t.Fatalf("ParseRules(%s): %v", tc.rules, err)
		}
		frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"content":{"text":"` + tc.text + `"}}}}`)
		n := New(Options{Rules: rules})
		once := n.Frame(lane.Agent, frame)
		twice := New(Options{Rules: rules}).Frame(lane.Agent, once)
		if !bytes.Contains(once, []byte(`"text":"`+tc.want+`"`)) {
			t.Errorf("rules %s on %q: got %s, want the text %q", tc.rules, tc.text, once, tc.want)
		}
		if !bytes.Equal(once, twice) {
			t.Errorf("rules %s: normalized once %s, twice %s", tc.rules, once, twice)
		}
	}
}

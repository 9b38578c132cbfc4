package scenario

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestParseRefuses(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "A"})
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"near miss", `{"promts": ["hi"]}`, "unknown field promts (did you mean prompts?)"},
		{"unknown", `{"prompts": ["hi"], "colour": 1}`, "unknown field colour; the fields here are $schema, name, workspace, timeout, prompts, permissions, mode, mcpServers, sessions"},
		{"in a session", `{"sessions": [{"prompts": ["hi"]}, {"prompts": ["hi"], "permisions": []}]}`, "unknown field sessions[1].permisions (did you mean permissions?)"},
		{"in a prompt", `{"prompts": [{"text": "hi", "cancelAfter": 2}]}`, "unknown field prompts[0].cancelAfter (did you mean cancelAfterChunks?)"},
		{"session member at the top level of a session", `{"sessions": [{"prompts": ["hi"], "workspace": "."}]}`, "unknown field sessions[0].workspace; the fields here are prompts, permissions, mode, mcpServers"},
		{"not JSON", "{\n\"prompts\": [\"hi\",]\n}", "not JSON: line 2: invalid character ']' looking for beginning of value"},
		{"two values", `{"prompts": ["hi"]} {}`, "not JSON: more than one JSON value"},
		{"not an object", `["hi"]`, "invalid scenario: want a JSON object at the top"},
		{"prompt type", `{"prompts": [3]}`, "invalid scenario: prompts: want a string or an object, not number"},
		{"prompts type", `{"prompts": "hi"}`, "invalid scenario: prompts: want an array, not string"},
		{"count type", `{"prompts": [{"text": "hi", "cancelAfterChunks": "two"}]}`, "invalid scenario: prompts.cancelAfterChunks: want a number, not string"},
		{"no prompts", `{"permissions": ["allow_once"]}`, "invalid scenario: prompts: no prompts; give one prompt or more"},
		{"empty prompt", `{"prompts": [{"attach": []}]}`, "invalid scenario: prompts[0] is empty; give text or files"},
		{"kind", `{"prompts": ["hi"], "permissions": ["allow_once", "allow"]}`, `invalid scenario: permissions[1]: "allow" is no permission option kind; use one of allow_once, allow_always, reject_once, reject_always`},
		{"timeout", `{"prompts": ["hi"], "timeout": "soon"}`, `invalid scenario: timeout "soon": want a positive duration such as 90s or 5m`},
		{"workspace", `{"prompts": ["hi"], "workspace": "nowhere"}`, `invalid scenario: workspace "nowhere": no such directory (relative to the scenario file's directory)`},
		{"attach missing", `{"workspace": ".", "prompts": [{"text": "x", "attach": ["b.txt"]}]}`, `invalid scenario: prompts[0].attach[0]: "b.txt": no such file in the workspace ` + ws},
		{"attach outside", `{"workspace": ".", "prompts": [{"text": "x", "embed": ["../a.txt"]}]}`, `invalid scenario: prompts[0].embed[0]: "../a.txt" is not a path inside the workspace; give it relative to the workspace`},
		{"attach without workspace", `{"prompts": [{"text": "x", "attach": ["a.txt"]}]}`, `invalid scenario: prompts[0].attach[0]: "a.txt": the scenario has no workspace to take it from; add one`},
		{"both", `{"prompts": ["hi"], "sessions": [{"prompts": ["x"]}]}`, "invalid scenario: both sessions and a session's members (prompts, permissions, mode, mcpServers) at the top; put them in sessions[0]"},
		{"no sessions", `{"sessions": []}`, "invalid scenario: sessions is empty; give one session or more, or prompts at the top for one"},
		{"cancel", `{"prompts": [{"text": "x", "cancelAfterChunks": -1}]}`, "invalid scenario: prompts[0].cancelAfterChunks -1: want a count of 1 or more"},
		{"mcp name", `{"prompts": ["x"], "mcpServers": [{"command": "srv"}]}`, "invalid scenario: mcpServers[0]: no name; every server needs one"},
		{"mcp command", `{"prompts": ["x"], "mcpServers": [{"name": "n"}]}`, "invalid scenario: mcpServers[0] (n): a stdio server needs a command"},
		{"mcp url", `{"sessions": [{"prompts": ["x"], "mcpServers": [{"name": "n", "type": "http"}]}]}`, "invalid scenario: sessions[0].mcpServers[0] (n): an http server needs a url"},
		{"mcp array", `{"prompts": ["x"], "mcpServers": {"name": "n"}}`, "invalid scenario: mcpServers: want an array of objects as ACP's session/new has it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), ws)
			if err == nil {
				t.Fatalf("got no error, want %q", tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("got  %q\nwant %q", err, tc.want)
			}
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrSyntax) {
				t.Errorf("got %v, want ErrInvalid or ErrSyntax", err)
			}
		})
	}
}

func TestParse(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "A"})
	sc := parse(t, `{
		"$schema": "https://acptap.dev/scenario.schema.json",
		"name": "reads",
		"workspace": ".",
		"timeout": "90s",
		"prompts": ["hi", {"text": "read it", "attach": ["a.txt"], "cancelAfterChunks": 3}],
		"permissions": ["allow_once"],
		"mode": "code"
	}`, ws)
	if sc.Name != "reads" || sc.Workspace != ws || sc.Timeout != 90*time.Second || len(sc.Sessions) != 1 {
		t.Fatalf("got %+v", sc)
	}
	s := sc.Sessions[0]
	if len(s.Prompts) != 2 || s.Prompts[0].Text != "hi" || s.Prompts[1].Attach[0] != "a.txt" || s.Prompts[1].CancelAfterChunks != 3 || s.Mode != "code" || s.Permissions[0] != "allow_once" {
		t.Errorf("got %+v", s)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "say-hi.json")
	if err := os.WriteFile(path, []byte(`{"workspace": "ws", "prompts": ["hi"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "say-hi" || sc.Workspace != filepath.Join(dir, "ws") || sc.Timeout != DefaultTimeout {
		t.Errorf("got name %q, workspace %q, timeout %v; want the file's base name, ws beside it, the default", sc.Name, sc.Workspace, sc.Timeout)
	}
	if _, err := Load(filepath.Join(dir, "none.json")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: got %v", err)
	}
	os.WriteFile(path, []byte(`{"prompt": ["hi"]}`), 0o644)
	if _, err := Load(path); err == nil || err.Error() != "scenario "+path+": unknown field prompt (did you mean prompts?)" {
		t.Errorf("got %v", err)
	}
}

// FuzzParse: no input makes Parse panic, and what it accepts it accepts
// again the same.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"prompts": ["hi"]}`,
		`{"sessions": [{"prompts": [{"text": "x", "cancelAfterChunks": 2}], "permissions": ["allow_once"], "mode": "m"}]}`,
		`{"prompts": ["hi"], "mcpServers": [{"name": "n", "command": "c"}, {"name": "h", "type": "http", "url": "u"}]}`,
		`{"promts": 1}`, `[]`, `{"prompts": [null]}`, `{"timeout": "1s", "prompts": [""]}`,
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Parse(data, dir)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v is neither ErrInvalid nor ErrSyntax", err)
			}
			return
		}
		if len(sc.Sessions) == 0 {
			t.Fatal("accepted a scenario without sessions")
		}
		for _, s := range sc.Sessions {
			if len(s.Prompts) == 0 {
				t.Fatal("accepted a session without prompts")
			}
		}
	})
}

// TestSchema: the JSON Schema in docs names the fields Parse takes, no
// more and no fewer.
func TestSchema(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "scenario.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Defs       struct {
			Session struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"session"`
			Prompts struct {
				Items struct {
					OneOf []struct {
						Properties map[string]json.RawMessage `json:"properties"`
					} `json:"oneOf"`
				} `json:"items"`
			} `json:"prompts"`
			Permissions struct {
				Items struct {
					Enum []string `json:"enum"`
				} `json:"items"`
			} `json:"permissions"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	check := func(what string, props map[string]json.RawMessage, want []string) {
		got := slices.Sorted(maps.Keys(props))
		want = slices.Sorted(slices.Values(want))
		if !slices.Equal(got, want) {
			t.Errorf("%s: the schema has %v, Parse takes %v", what, got, want)
		}
	}
	check("the file", schema.Properties, fileFields)
	check("a session", schema.Defs.Session.Properties, sessionFields)
	if len(schema.Defs.Prompts.Items.OneOf) != 2 {
		t.Fatalf("a prompt: want a string or an object in the schema")
	}
	check("a prompt", schema.Defs.Prompts.Items.OneOf[1].Properties, promptFields)
	if !slices.Equal(schema.Defs.Permissions.Items.Enum, Kinds) {
		t.Errorf("permission kinds: the schema has %v, Parse takes %v", schema.Defs.Permissions.Items.Enum, Kinds)
	}
}

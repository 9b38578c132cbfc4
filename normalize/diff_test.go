package normalize

import (
	"encoding/json"
	"testing"

	"github.com/acptap/acptap/mismatch"
)

func TestFirstDifference(t *testing.T) {
	tests := []struct {
		name   string
		a, b   any
		path   string
		av, bv any
	}{
		{"equal", map[string]any{"a": []any{1.0, "x", nil, true}}, json.RawMessage(`{"a":[1,"x",null,true]}`), "", nil, nil},
		{"numbers by value", json.RawMessage(`[1, 1.0, 1e2, 0.10]`), json.RawMessage(`[1.0, 1, 100, 0.1]`), "", nil, nil},
		{"big numbers exactly", json.RawMessage(`[9007199254740993]`), json.RawMessage(`[9007199254740992]`), "$[0]", json.Number("9007199254740993"), json.Number("9007199254740992")},
		{"huge exponents", json.RawMessage(`[1e999999999]`), json.RawMessage(`[1e999999998]`), "$[0]", json.Number("1e999999999"), json.Number("1e999999998")},
		{"string", json.RawMessage(`{"params":{"update":{"content":{"text":"a"}}}}`), json.RawMessage(`{"params":{"update":{"content":{"text":"b"}}}}`), "$.params.update.content.text", "a", "b"},
		{"missing member", json.RawMessage(`{"a":1,"b":2}`), json.RawMessage(`{"a":1}`), "$.b", json.Number("2"), Missing{}},
		{"extra member", json.RawMessage(`{"b":2}`), json.RawMessage(`{"a":1,"b":2}`), "$.a", Missing{}, json.Number("1")},
		{"first key in order", json.RawMessage(`{"z":1,"m":1}`), json.RawMessage(`{"z":2,"m":2}`), "$.m", json.Number("1"), json.Number("2")},
		{"extra element", []json.RawMessage{json.RawMessage(`1`)}, []json.RawMessage{json.RawMessage(`1`), json.RawMessage(`{"x":1}`)}, "$[1]", Missing{}, map[string]any{"x": json.Number("1")}},
		{"type", json.RawMessage(`{"a":"1"}`), json.RawMessage(`{"a":1}`), "$.a", "1", json.Number("1")},
		{"null and missing", json.RawMessage(`{"a":null}`), json.RawMessage(`{}`), "$.a", nil, Missing{}},
		{"odd keys", json.RawMessage(`{"x-app":{"a b":{"0k":1}}}`), json.RawMessage(`{"x-app":{"a b":{"0k":2}}}`), `$["x-app"]["a b"]["0k"]`, json.Number("1"), json.Number("2")},
		{"scalars", "a", "a", "", nil, nil},
		{"root", "a", false, "$", "a", false},
		{"not JSON", json.RawMessage(`{`), json.RawMessage(`{`), "", nil, nil},
		{"not JSON, different", json.RawMessage(`{`), json.RawMessage(`[`), "$", json.RawMessage(`{`), json.RawMessage(`[`)},
	}
	for _, tt := range tests {
		path, av, bv, ok := FirstDifference(tt.a, tt.b)
		if ok != (tt.path != "") || path != tt.path || !same(av, tt.av) || !same(bv, tt.bv) {
			t.Errorf("%s: FirstDifference = %q, %#v, %#v, %v; want %q, %#v, %#v", tt.name, path, av, bv, ok, tt.path, tt.av, tt.bv)
		}
	}
	if got := (Missing{}).String(); got != "(missing)" {
		t.Errorf("Missing.String() = %q", got)
	}
}

func TestKeyPathRoundTrip(t *testing.T) {
	for _, k := range []string{"a", "_x9", "x-app", "a b", "0k", "", `q"uote`, "<cwd>/a.go", "ü"} {
		p := "$" + keyPath(k)
		segs, err := parsePath(p)
		if err != nil || len(segs) != 1 || segs[0].kind != segKey || segs[0].key != k {
			t.Errorf("parsePath(%s) = %v, %v; want the key %q", p, segs, err, k)
		}
	}
}

func TestMismatches(t *testing.T) {
	a := json.RawMessage(`{"a":[1,2,3],"b":{"c":"x","d":true},"e":null,"f":"same"}`)
	b := json.RawMessage(`{"a":[1,5],"b":{"c":"y"},"e":{"z":1},"f":"same","g":0}`)
	got := Mismatches(a, b)
	want := []mismatch.Mismatch{
		{Path: "$.a[1]", Recorded: json.Number("2"), Live: json.Number("5")},
		{Path: "$.a[2]", Recorded: json.Number("3"), Live: Missing{}},
		{Path: "$.b.c", Recorded: "x", Live: "y"},
		{Path: "$.b.d", Recorded: true, Live: Missing{}},
		{Path: "$.e", Recorded: nil, Live: map[string]any{"z": json.Number("1")}},
		{Path: "$.g", Recorded: Missing{}, Live: json.Number("0")},
	}
	if len(got) != len(want) {
		t.Fatalf("Mismatches = %#v, want %#v", got, want)
	}
	for i := range want {
		if got[i].Path != want[i].Path || !same(got[i].Recorded, want[i].Recorded) || !same(got[i].Live, want[i].Live) {
			t.Errorf("difference %d = %#v, want %#v", i, got[i], want[i])
		}
	}
	if path, _, _, _ := FirstDifference(a, b); path != got[0].Path {
		t.Errorf("FirstDifference at %s, Mismatches starts at %s", path, got[0].Path)
	}
	if d := Mismatches(a, a); d != nil {
		t.Errorf("Mismatches of a value and itself = %#v, want nil", d)
	}
	if d := Mismatches(json.RawMessage(`{`), json.RawMessage(`[`)); len(d) != 1 || d[0].Path != "$" {
		t.Errorf("Mismatches of two non-JSON values = %#v, want one at $", d)
	}
}

// TestDifferencesOfMixedValues checks that values of other types than
// decode's, deep inside plain ones, are compared as their JSON.
func TestDifferencesOfMixedValues(t *testing.T) {
	a := map[string]any{"n": float64(2), "raw": json.RawMessage(`{"x":[1,2]}`), "s": []string{"a"}}
	b := map[string]any{"n": json.Number("2.0"), "raw": map[string]any{"x": []any{json.Number("1"), json.Number("3")}}, "s": []any{"a"}}
	got := Mismatches(a, b)
	if len(got) != 1 || got[0].Path != "$.raw.x[1]" || got[0].Recorded != json.Number("2") || got[0].Live != json.Number("3") {
		t.Errorf("Mismatches = %+v, want one at $.raw.x[1]: 2 vs 3", got)
	}
	if got := Mismatches([]any{func() {}}, []any{func() {}}); len(got) != 1 || got[0].Path != "$[0]" {
		t.Errorf("Mismatches of two funcs = %+v, want one at $[0]", got)
	}
}

package jsonscan

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

var samples = []string{
	``, ` `, `{}`, `[]`, `null`, `true`, `false`, `nul`, `truex`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `.5`,
	`"a"`, `"a`, `"\u00e9"`, `"\u00g9"`, `"\x"`, "\"\x01\"", "\"\xff\xfe\"", `"\\"`, `"\"`, `"\/\b\f\n\r\t"`,
	`{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":[1,2,{"b":"]}"}],"c":null}`, `[1,]`, `[,1]`, `[1 2]`,
	` {"a" : [ 1 , 2 ] } `, `{"a":1}x`, `{"a":1} {}`, `[[[]]]`, `[[[]]`, "\t[\n1\r]\n",
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
}

func TestValid(t *testing.T) {
	for _, s := range samples {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%.40q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range samples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, want %v", b, got, want)
		}
		checkValidMembers(t, b)
		if !json.Valid(b) {
			return
		}
		checkSplit(t, b)
	})
}

// checkSplit checks that Members and Elements split valid b into the
// members and elements encoding/json finds.
func checkSplit(t *testing.T, b []byte) {
	t.Helper()
	var obj []json.RawMessage
	var keys []string
	isObj := Members(b, func(k, v []byte) bool {
		var key string
		if err := json.Unmarshal(k, &key); err != nil {
			t.Fatalf("Members(%q): key %q: %v", b, k, err)
		}
		keys = append(keys, key)
		obj = append(obj, v)
		return true
	})
	first := byte(0)
	if tb := bytes.TrimSpace(b); len(tb) > 0 {
		first = tb[0]
	}
	if isObj != (first == '{') {
		t.Fatalf("Members(%q) ok = %v, want %v", b, isObj, !isObj)
	}
	var m map[string]json.RawMessage
	if isObj {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if len(m) > len(keys) {
			t.Fatalf("Members(%q): %d members, encoding/json has %d", b, len(keys), len(m))
		}
		for i, k := range keys {
			if !bytes.Equal(m[k], obj[i]) && bytes.Equal(k2last(keys, k, i), nil) {
				t.Fatalf("Members(%q): %q = %q, want %q", b, k, obj[i], m[k])
			}
		}
	}
	for i, k := range keys {
		if !json.Valid(obj[i]) {
			t.Fatalf("Members(%q): value %q of %q is not valid", b, obj[i], k)
		}
	}
	var arr []json.RawMessage
	isArr := Elements(b, func(e []byte) bool { arr = append(arr, e); return true })
	if isArr != (first == '[') {
		t.Fatalf("Elements(%q) ok = %v, want %v", b, isArr, !isArr)
	}
	var want []json.RawMessage
	if isArr {
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
	}
	if len(arr) != len(want) {
		t.Fatalf("Elements(%q): %d elements, want %d", b, len(arr), len(want))
	}
	for i := range arr {
		if !bytes.Equal(arr[i], bytes.TrimSpace(want[i])) {
			t.Fatalf("Elements(%q)[%d] = %q, want %q", b, i, arr[i], want[i])
		}
	}
}

// k2last returns nil if keys[i] is the last occurrence of k, the one
// encoding/json keeps.
func k2last(keys []string, k string, i int) []byte {
	for _, later := range keys[i+1:] {
		if later == k {
			return []byte{1}
		}
	}
	return nil
}

// checkValidMembers checks that ValidMembers says what json.Valid says of
// b and, of valid b, yields what Members yields.
func checkValidMembers(t *testing.T, b []byte) {
	t.Helper()
	var got []string
	valid := ValidMembers(b, func(k, v []byte) bool {
		got = append(got, string(k)+"="+string(v))
		return true
	})
	if want := json.Valid(b); valid != want {
		t.Fatalf("ValidMembers(%q) = %v, want %v", b, valid, want)
	}
	if !valid {
		return
	}
	var want []string
	Members(b, func(k, v []byte) bool {
		want = append(want, string(k)+"="+string(v))
		return true
	})
	if !slices.Equal(got, want) {
		t.Fatalf("ValidMembers(%q) yields %q, Members %q", b, got, want)
	}
}

func TestValidMembers(t *testing.T) {
	for _, s := range samples {
		checkValidMembers(t, []byte(s))
	}
	// fn is no longer called once it returns false, but the check goes on.
	var n int
	b := []byte(`{"a":1,"b":2,"c":3} x`)
	if ValidMembers(b, func(k, v []byte) bool { n++; return false }) {
		t.Errorf("ValidMembers(%q) = true, want false", b)
	}
	if n != 1 {
		t.Errorf("ValidMembers called fn %d times after it returned false, want 1", n)
	}
}

func TestSplit(t *testing.T) {
	for _, s := range samples {
		if json.Valid([]byte(s)) {
			checkSplit(t, []byte(s))
		}
	}
	var got []string
	Members([]byte(` { "a\"b" : [1, "]"] , "c":{"d":"}"},"e":-1.5e3 } `), func(k, v []byte) bool {
		got = append(got, string(k)+"="+string(v))
		return true
	})
	want := []string{`"a\"b"=[1, "]"]`, `"c"={"d":"}"}`, `"e"=-1.5e3`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Members: got %q, want %q", got, want)
	}
	var n int
	Elements([]byte(`[1,2,3]`), func([]byte) bool { n++; return n < 2 })
	if n != 2 {
		t.Errorf("Elements went on after fn returned false: %d calls, want 2", n)
	}
}

// TestNoControl tries every byte at every position of a run of plain
// ones, of every length up to 17 (the word-at-a-time part and the rest).
func TestNoControl(t *testing.T) {
	for n := 1; n <= 17; n++ {
		for pos := range n {
			for c := range 256 {
				b := []byte(strings.Repeat("aZ~ \x7f\x80\xff\"\\", 3)[:n])
				b[pos] = byte(c)
				want := true
				for _, x := range b {
					if x < 0x20 {
						want = false
					}
				}
				if got := noControl(b); got != want {
					t.Errorf("noControl(%q) = %v, want %v", b, got, want)
				}
			}
		}
	}
}

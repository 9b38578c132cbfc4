package normalize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"strconv"
	"strings"
)

// decode parses b as exactly one JSON value, numbers kept as json.Number so
// that their literal survives. It reports false for anything else, trailing
// data included.
func decode(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

// encode returns the canonical form of a decoded JSON value: compact, object
// keys sorted, and '<', '>' and '&' left as they are so that placeholders
// stay readable in diffs.
func encode(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// The values encoded here are built from decoded JSON and
		// strings, which always encode.
		panic(fmt.Sprintf("normalize: encoding a JSON value: %v", err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// plain converts v to the types decode produces, so that values built by a
// caller (float64, int, []string, structs) compare like decoded ones. It
// reports false for a value that does not encode as JSON.
func plain(v any) (any, bool) {
	switch x := v.(type) {
	case nil, bool, string, json.Number, Missing:
		return v, true
	case json.RawMessage:
		return decode(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			p, ok := plain(e)
			if !ok {
				return nil, false
			}
			out[k] = p
		}
		return out, true
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			p, ok := plain(e)
			if !ok {
				return nil, false
			}
			out[i] = p
		}
		return out, true
	case []json.RawMessage:
		out := make([]any, len(x))
		for i, e := range x {
			p, ok := decode(e)
			if !ok {
				return nil, false
			}
			out[i] = p
		}
		return out, true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return decode(b)
}

// plainView is plain for values only read: what is plain already is
// returned as it is, not copied.
func plainView(v any) (any, bool) {
	if isPlain(v) {
		return v, true
	}
	return plain(v)
}

// isPlain reports whether v is made of the types decode produces only.
func isPlain(v any) bool {
	switch x := v.(type) {
	case nil, bool, string, json.Number, Missing:
		return true
	case map[string]any:
		for _, e := range x {
			if !isPlain(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !isPlain(e) {
				return false
			}
		}
		return true
	}
	return false
}

// sameMap reports whether two maps are one.
func sameMap(a, b map[string]any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// numbersEqual compares two JSON number literals by value, exactly, so that
// 1, 1.0 and 1e0 are equal and 2^53 and 2^53+1 are not.
func numbersEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	if hugeExponent(a) || hugeExponent(b) {
		// big.Rat would build 10^exp; such literals are only equal
		// when spelled alike.
		return false
	}
	var x, y big.Rat
	if _, ok := x.SetString(string(a)); !ok {
		return false
	}
	if _, ok := y.SetString(string(b)); !ok {
		return false
	}
	return x.Cmp(&y) == 0
}

// hugeExponent reports whether a number literal has an exponent beyond
// what float64 can represent, which exact comparison cannot afford.
func hugeExponent(n json.Number) bool {
	i := strings.IndexAny(string(n), "eE")
	if i < 0 {
		return false
	}
	e, err := strconv.Atoi(string(n[i+1:]))
	return err != nil || e > 400 || e < -400
}

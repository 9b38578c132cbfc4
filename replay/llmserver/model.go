package llmserver

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/acptap/acptap/internal/jsonscan"
	"github.com/acptap/acptap/internal/wire"
)

// requestModel returns the model a request asks for, if it names one, as
// wire.RequestInfo reads it, but without decoding the body: a request
// that carries a whole conversation is only scanned for its top-level
// "model" member.
func requestModel(format wire.Format, rawURL string, body []byte) string {
	return scanBody(body).model(format, rawURL)
}

// requestFacts returns what a request's queue key reads of its body: the
// model it asks for (requestModel) and whether it asks for structured
// output (structuredOutput), in one scan of the body.
func requestFacts(format wire.Format, rawURL string, body []byte) (model string, structured bool) {
	m := scanBody(body)
	return m.model(format, rawURL), m.structured()
}

// bodyMembers are the top-level members of a JSON object body that the
// queue key reads, raw.
type bodyMembers struct {
	// modelValue is the value of the last member named "model", matched
	// as encoding/json matches a struct field's name (ignoring case); nil
	// if none or the body is not a valid object.
	modelValue []byte
	// structuredObject is an object of the members structuredOutput
	// reads (structuredKeys); nil if the body is not a valid object.
	structuredObject []byte
}

// scanBody reads body's members for the queue key in one pass that also
// checks it is valid JSON.
func scanBody(body []byte) bodyMembers {
	var m bodyMembers
	small := []byte{'{'}
	valid := jsonscan.ValidMembers(body, func(k, v []byte) bool {
		key := k[1 : len(k)-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(k, &s) != nil {
				return true
			}
			key = []byte(s)
		}
		if bytes.EqualFold(key, []byte("model")) {
			m.modelValue = v
		}
		if structuredKeys[strings.ToLower(string(key))] {
			if len(small) > 1 {
				small = append(small, ',')
			}
			small = append(append(append(small, k...), ':'), v...)
		}
		return true
	})
	if !valid {
		return bodyMembers{}
	}
	if isObject(body) {
		m.structuredObject = append(small, '}')
	}
	return m
}

// isObject reports whether valid JSON text b is an object.
func isObject(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) > 0 && t[0] == '{'
}

// model returns the model the request asks for, from the body's member or
// the URL, as wire.RequestInfo decides between them for the format.
func (m bodyMembers) model(format wire.Format, rawURL string) string {
	var small []byte
	if v := m.modelValue; len(v) > 0 && v[0] == '"' {
		var name string
		if json.Unmarshal(v, &name) == nil {
			// RequestInfo decides between the body's model and the URL's
			// by the format; given only the member it reads, it reads it
			// alike.
			small, _ = json.Marshal(map[string]string{"model": name})
		}
	}
	model, _ := wire.RequestInfo(format, rawURL, small)
	return model
}

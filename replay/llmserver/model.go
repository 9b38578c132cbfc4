package llmserver

import (
	"bytes"
	"encoding/json"

	"github.com/acptap/acptap/internal/jsonscan"
	"github.com/acptap/acptap/internal/wire"
)

// requestModel returns the model a request asks for, if it names one, as
// wire.RequestInfo reads it, but without decoding the body: a request
// that carries a whole conversation is only scanned for its top-level
// "model" member.
func requestModel(format wire.Format, rawURL string, body []byte) string {
	var small []byte
	if m, ok := bodyModel(body); ok {
		// RequestInfo decides between the body's model and the URL's by
		// the format; given only the member it reads, it reads it alike.
		small, _ = json.Marshal(map[string]string{"model": m})
	}
	model, _ := wire.RequestInfo(format, rawURL, small)
	return model
}

// bodyModel returns the string value of the "model" member of a JSON
// object, matched as encoding/json matches a struct field's name (the
// last member whose key equals "model" ignoring case), and false where
// json.Unmarshal into such a struct would leave it unset or not a string.
func bodyModel(body []byte) (string, bool) {
	if !jsonscan.Valid(body) {
		return "", false
	}
	var last []byte
	jsonscan.Members(body, func(k, v []byte) bool {
		if len(k) < 7 {
			return true
		}
		key := k[1 : len(k)-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(k, &s) != nil {
				return true
			}
			key = []byte(s)
		}
		if bytes.EqualFold(key, []byte("model")) {
			last = v
		}
		return true
	})
	if len(last) == 0 || last[0] != '"' {
		return "", false
	}
	var m string
	if json.Unmarshal(last, &m) != nil {
		return "", false
	}
	return m, true
}

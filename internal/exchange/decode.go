package exchange

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acptap/acptap/internal/jsonscan"
)

// decodeFast decodes an exchange as Unmarshal's encoding/json path does,
// in one scan of data and without reflection, for the text Marshal writes:
// exact field names, each once, plain integers, base64 without escapes.
// It returns false, having decided nothing, for anything else (another
// spelling of a field name, a repeated field, a number with a fraction, a
// value of the wrong type, text that is not valid JSON), which the
// encoding/json path then decodes or refuses with its own error.
//
// A replay decodes every exchange of a recording, each request carrying
// the conversation so far: encoding/json's validation pass and its
// reflection were most of a long replay's time.
func decodeFast(data []byte) (*Exchange, bool) {
	e, _, ok := decodeFields(data, allFields)
	return e, ok
}

// decodeFields is decodeFast decoding only the fields of the set fields,
// checking the names of the others and that each is there once, and the
// text as a whole, but not their values. It also returns the raw value of
// the request body's member, of data, nil if there is none or it is null.
func decodeFields(data []byte, fields uint32) (e *Exchange, body []byte, ok bool) {
	var (
		x      Exchange
		seen   uint32
		hasEnd bool
	)
	ok = true
	valid := jsonscan.ValidMembers(data, func(k, v []byte) bool {
		f, known := fieldOf(k)
		if !known {
			// encoding/json matches names ignoring case, so a key that
			// is a field's name in another case, or written with an
			// escape, is the field: leave those to it.
			ok = !foldsToField(k)
			return ok
		}
		if seen&(1<<f) != 0 {
			ok = false // a repeated field: the last wins, or merges
			return false
		}
		seen |= 1 << f
		if bytes.Equal(v, []byte("null")) {
			// null leaves the field as it is (zero), or sets a slice or
			// map to nil, which it is; "end": null is no end.
			return true
		}
		if f == fieldRequestBody {
			body = v
		}
		if fields&(1<<f) == 0 {
			return true
		}
		hasEnd = hasEnd || f == fieldEnd
		ok = x.decodeField(f, v)
		return ok
	})
	if !valid || !ok || !isObject(data) {
		return nil, nil, false
	}
	if !hasEnd && fields&(1<<fieldEnd) != 0 {
		x.End = legacyEnd(x.Status, x.Error)
	}
	return &x, body, true
}

// The fields of the stored form, as bits of a set.
const (
	fieldRoute = iota
	fieldBaseURLVar
	fieldMCPServer
	fieldMethod
	fieldURL
	fieldProto
	fieldRequestHeaders
	fieldRequestBody
	fieldRequestEncoding
	fieldStatus
	fieldResponseHeaders
	fieldResponseEncoding
	fieldChunks
	fieldTTFB
	fieldDuration
	fieldEnd
	fieldError

	allFields = 1<<(fieldError+1) - 1
)

// fieldNames are the JSON names of the fields, as Exchange's tags give
// them, quoted as they appear in the text.
var fieldNames = map[string]int{
	`"route"`:             fieldRoute,
	`"base_url_var"`:      fieldBaseURLVar,
	`"mcp_server"`:        fieldMCPServer,
	`"method"`:            fieldMethod,
	`"url"`:               fieldURL,
	`"proto"`:             fieldProto,
	`"request_headers"`:   fieldRequestHeaders,
	`"request_body"`:      fieldRequestBody,
	`"request_encoding"`:  fieldRequestEncoding,
	`"status"`:            fieldStatus,
	`"response_headers"`:  fieldResponseHeaders,
	`"response_encoding"`: fieldResponseEncoding,
	`"chunks"`:            fieldChunks,
	`"ttfb"`:              fieldTTFB,
	`"duration"`:          fieldDuration,
	`"end"`:               fieldEnd,
	`"error"`:             fieldError,
}

func fieldOf(key []byte) (int, bool) {
	f, ok := fieldNames[string(key)]
	return f, ok
}

// foldsToField reports whether a raw key that is not a field's exact name
// may still be one to encoding/json: it has an escape, or equals a name
// ignoring case (encoding/json folds Unicode too: the K of the Kelvin
// sign is a k, so any non-ASCII key counts).
func foldsToField(key []byte) bool {
	if bytes.IndexByte(key, '\\') >= 0 {
		return true
	}
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	for name := range fieldNames {
		if strings.EqualFold(name, string(key)) {
			return true
		}
	}
	return false
}

// decodeField decodes v, valid JSON and not null, into field f of e.
func (e *Exchange) decodeField(f int, v []byte) bool {
	switch f {
	case fieldRoute:
		return decodeString(v, &e.Route)
	case fieldBaseURLVar:
		return decodeString(v, &e.BaseURLVar)
	case fieldMCPServer:
		n, ok := decodeInt(v, strconv.IntSize)
		e.MCPServer = int(n)
		return ok
	case fieldMethod:
		return decodeString(v, &e.Method)
	case fieldURL:
		return decodeString(v, &e.URL)
	case fieldProto:
		return decodeString(v, &e.Proto)
	case fieldRequestHeaders:
		return decodeHeader(v, &e.RequestHeaders)
	case fieldRequestBody:
		return decodeBytes(v, &e.RequestBody)
	case fieldRequestEncoding:
		return decodeString(v, &e.RequestEncoding)
	case fieldStatus:
		n, ok := decodeInt(v, strconv.IntSize)
		e.Status = int(n)
		return ok
	case fieldResponseHeaders:
		return decodeHeader(v, &e.ResponseHeaders)
	case fieldResponseEncoding:
		return decodeString(v, &e.ResponseEncoding)
	case fieldChunks:
		return decodeChunks(v, &e.Chunks)
	case fieldTTFB:
		n, ok := decodeInt(v, 64)
		e.TTFB = time.Duration(n)
		return ok
	case fieldDuration:
		n, ok := decodeInt(v, 64)
		e.Duration = time.Duration(n)
		return ok
	case fieldEnd:
		var word string
		return decodeString(v, &word) && e.End.UnmarshalText([]byte(word)) == nil
	case fieldError:
		return decodeString(v, &e.Error)
	}
	return false
}

// decodeString decodes a JSON string. One without escapes and of valid
// UTF-8, as Marshal writes most, is its bytes; others go through
// encoding/json, which replaces invalid UTF-8 and reads escapes.
func decodeString(v []byte, s *string) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		*s = string(inner)
		return true
	}
	return json.Unmarshal(v, s) == nil
}

// decodeBytes decodes a JSON string of base64, as encoding/json decodes a
// []byte.
func decodeBytes(v []byte, b *[]byte) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') >= 0 {
		return json.Unmarshal(v, b) == nil
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(inner)))
	n, err := base64.StdEncoding.Decode(out, inner)
	if err != nil {
		return false
	}
	*b = out[:n]
	return true
}

// decodeInt decodes a JSON number that is an integer of bits bits, as
// encoding/json decodes into an int: no fraction, no exponent.
func decodeInt(v []byte, bits int) (int64, bool) {
	if len(v) == 0 || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, bits)
	return n, err == nil
}

// decodeHeader decodes a header, small next to the bodies, with
// encoding/json.
func decodeHeader(v []byte, h *http.Header) bool {
	if v[0] != '{' {
		return false
	}
	return json.Unmarshal(v, h) == nil
}

// decodeChunks decodes the chunks array, each {"at":N,"data":"BASE64"}.
func decodeChunks(v []byte, chunks *[]Chunk) bool {
	if v[0] != '[' {
		return false
	}
	out := []Chunk{}
	ok := true
	jsonscan.Elements(v, func(el []byte) bool {
		var c Chunk
		if ok = decodeChunk(el, &c); ok {
			out = append(out, c)
		}
		return ok
	})
	*chunks = out
	return ok
}

func decodeChunk(el []byte, c *Chunk) bool {
	if el[0] != '{' {
		return false
	}
	var seenAt, seenData, seenBinary, ok = false, false, false, true
	jsonscan.Members(el, func(k, v []byte) bool {
		switch string(k) {
		case `"at"`:
			if seenAt {
				ok = false
				break
			}
			seenAt = true
			if string(v) != "null" {
				var n int64
				n, ok = decodeInt(v, 64)
				c.At = time.Duration(n)
			}
		case `"data"`:
			if seenData {
				ok = false
				break
			}
			seenData = true
			if string(v) != "null" {
				ok = decodeBytes(v, &c.Data)
			}
		case `"binary"`:
			if seenBinary {
				ok = false
				break
			}
			seenBinary = true
			switch string(v) {
			case "true":
				c.Binary = true
			case "false", "null":
			default:
				ok = false
			}
		default:
			ok = !foldsToChunkField(k)
		}
		return ok
	})
	return ok
}

// foldsToChunkField is foldsToField for a Chunk's fields.
func foldsToChunkField(key []byte) bool {
	if bytes.IndexByte(key, '\\') >= 0 {
		return true
	}
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return strings.EqualFold(string(key), `"at"`) || strings.EqualFold(string(key), `"data"`) || strings.EqualFold(string(key), `"binary"`)
}

// isObject reports whether valid JSON text b is an object.
func isObject(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

package exchange

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"
)

// encodeFast encodes e as encoding/json does, byte for byte, without
// reflection and into one buffer of about the right size. It returns false
// for what encoding/json refuses (an End that is no End), leaving the
// error to it.
//
// The tap encodes every exchange twice, in flight and ended, and
// encoding/json's reflection and buffer growth were a sixth of the
// recording process's CPU under load.
func encodeFast(e *Exchange) ([]byte, bool) {
	if int(e.End) >= len(endWords) {
		return nil, false
	}
	b := make([]byte, 0, encodedSize(e))
	b = append(b, `{"route":`...)
	b = appendString(b, e.Route)
	if e.BaseURLVar != "" {
		b = append(b, `,"base_url_var":`...)
		b = appendString(b, e.BaseURLVar)
	}
	if e.MCPServer != 0 {
		b = append(b, `,"mcp_server":`...)
		b = strconv.AppendInt(b, int64(e.MCPServer), 10)
	}
	b = append(b, `,"method":`...)
	b = appendString(b, e.Method)
	b = append(b, `,"url":`...)
	b = appendString(b, e.URL)
	if e.Proto != "" {
		b = append(b, `,"proto":`...)
		b = appendString(b, e.Proto)
	}
	b = append(b, `,"request_headers":`...)
	b = appendHeader(b, e.RequestHeaders)
	b = append(b, `,"request_body":`...)
	b = appendBytes(b, e.RequestBody)
	if e.RequestEncoding != "" {
		b = append(b, `,"request_encoding":`...)
		b = appendString(b, e.RequestEncoding)
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	if len(e.ResponseHeaders) > 0 {
		b = append(b, `,"response_headers":`...)
		b = appendHeader(b, e.ResponseHeaders)
	}
	if e.ResponseEncoding != "" {
		b = append(b, `,"response_encoding":`...)
		b = appendString(b, e.ResponseEncoding)
	}
	if len(e.Chunks) > 0 {
		b = append(b, `,"chunks":[`...)
		for i, c := range e.Chunks {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"at":`...)
			b = strconv.AppendInt(b, int64(c.At), 10)
			b = append(b, `,"data":`...)
			b = appendBytes(b, c.Data)
			if c.Binary {
				b = append(b, `,"binary":true`...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"ttfb":`...)
	b = strconv.AppendInt(b, int64(e.TTFB), 10)
	b = append(b, `,"duration":`...)
	b = strconv.AppendInt(b, int64(e.Duration), 10)
	b = append(b, `,"end":`...)
	b = appendString(b, endWords[e.End])
	if e.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, e.Error)
	}
	return append(b, '}'), true
}

// encodedSize is about the length of e encoded: exact for the bodies,
// which are most of it, and a guess for the rest.
func encodedSize(e *Exchange) int {
	n := 256 + len(e.URL) + len(e.Error) + base64.StdEncoding.EncodedLen(len(e.RequestBody))
	for _, c := range e.Chunks {
		n += 32 + base64.StdEncoding.EncodedLen(len(c.Data))
	}
	for _, h := range [...]http.Header{e.RequestHeaders, e.ResponseHeaders} {
		for k, vv := range h {
			n += len(k) + 6
			for _, v := range vv {
				n += len(v) + 3
			}
		}
	}
	return n
}

// appendHeader appends h as encoding/json encodes a map of string slices:
// null for nil, keys in order.
func appendHeader(b []byte, h http.Header) []byte {
	if h == nil {
		return append(b, "null"...)
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		vv := h[k]
		if vv == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '[')
		for j, v := range vv {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendBytes appends p as encoding/json encodes a []byte: null for nil,
// else standard base64 in quotes.
func appendBytes(b, p []byte) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, p)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s quoted as encoding/json quotes it with HTML
// escaping, as json.Marshal does: <, > and & escaped, invalid UTF-8 as
// U+FFFD, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

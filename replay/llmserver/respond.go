package llmserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/acptap/acptap/internal/hop"
	"github.com/acptap/acptap/internal/wire"
)

// markHeader is set on the responses the server makes up rather than
// replays: "unanswered" on the answer to a request the recording cannot
// answer, "fault" on an injected error status.
const markHeader = "X-Acptap-Replay"

// replayHeader returns the header to replay of a recorded response: the
// recorded one without hop-by-hop headers, Content-Length, which the
// replay sets for the body it sends, and Content-Encoding, since recorded
// bodies are decoded.
func replayHeader(recorded http.Header) http.Header {
	h := recorded.Clone()
	if h == nil {
		h = http.Header{}
	}
	hop.RemoveHeaders(h)
	h.Del("Content-Length")
	h.Del("Content-Encoding")
	return h
}

// newResponse returns a response to req.
func newResponse(req *http.Request, status int, h http.Header, body io.ReadCloser, length int64) *http.Response {
	return &http.Response{
		Status:        strings.TrimSpace(strconv.Itoa(status) + " " + http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          body,
		ContentLength: length,
		Request:       req,
	}
}

// errorResponse returns a JSON error response in the shape of wire format
// f, with header h added.
func errorResponse(req *http.Request, f wire.Format, status int, typ, msg string, h http.Header) *http.Response {
	b := errorBody(f, status, typ, msg)
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	return newResponse(req, status, h, io.NopCloser(bytes.NewReader(b)), int64(len(b)))
}

// errorBody returns an error body as the API of format f words it:
// OpenAI's {"error":{"message","type","param","code"}} for the OpenAI
// formats and unknown ones, Anthropic's {"type":"error","error":{...}},
// Google's {"error":{"code","message","status"}}, Ollama's {"error":"..."}.
func errorBody(f wire.Format, status int, typ, msg string) []byte {
	var v any
	switch f {
	case wire.Anthropic:
		v = struct {
			Type  string `json:"type"`
			Error any    `json:"error"`
		}{"error", struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}{typ, msg}}
	case wire.Gemini:
		v = struct {
			Error any `json:"error"`
		}{struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		}{status, msg, googleStatus(status)}}
	case wire.Ollama:
		v = struct {
			Error string `json:"error"`
		}{msg}
	default:
		v = struct {
			Error any `json:"error"`
		}{struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Param   any    `json:"param"`
			Code    any    `json:"code"`
		}{msg, typ, nil, nil}}
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Strings and ints always encode.
		panic(fmt.Sprintf("llmserver: encoding an error body: %v", err))
	}
	return b
}

// googleStatus returns the canonical status name that Google APIs give
// with an HTTP status.
func googleStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

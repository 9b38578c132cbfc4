package normalize

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Request normalizes an LLM request (its body already decoded from any
// Content-Encoding) and returns it as a JSON value,
//
//	{"method": "POST", "url": "/v1/responses", "header": {...}, "body": ...}
//
// for comparison with its recorded twin, normalized by a Normalizer of the
// recorded run, with FirstDifference. User rules see this whole value:
// a path rule for the body starts with $.body.
//
// The url keeps the path and query only, since the replay server's host is
// not the API's, and drops credentials in the query (key, api_key, ...).
// A query value is normalized as the value of a JSON member of its key
// is: ts=1718000000000 is a <time>, session_id=... a linked id.
// The body is normalized as JSON when it is JSON (as text otherwise, and
// null when empty), with the default rules and these for LLM requests:
// a bare "id" member is an id, and dates in text become <date>, for the
// date agents put into system prompts.
//
// Header names are lowercased. Dropped: the headers of the transport
// (Host, Content-Length, Accept-Encoding, Connection, ...), which differ
// between the API and the replay server; credentials (Authorization,
// X-Api-Key, Cookie, ...), which replay replaces with dummies; and the
// headers that describe the machine rather than the agent
// (X-Stainless-OS, -Arch, -Runtime-Version). Values of id headers (names
// ending in -id or _id, such as session_id, conversation_id and
// x-request-id, and traceparent) are linked ids like those in the body.
// In User-Agent, Version, X-Goog-Api-Client and other version headers,
// version numbers become <version> and User-Agent comments such as
// "(Ubuntu 24.4.0; x86_64)" are dropped. Other headers, OpenAI-Beta and
// Anthropic-Beta among them, are compared as they are.
func (n *Normalizer) Request(method, rawURL string, header http.Header, body []byte) any {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.request(method, rawURL, header, body, nil)
}

// request is Request, with the parts r remembers if r is not nil. The
// URL, the header and the body are normalized in this order, which
// numbers their placeholders.
func (n *Normalizer) request(method, rawURL string, header http.Header, body []byte, r *Requests) any {
	req := map[string]any{
		"method": strings.ToUpper(method),
		"url":    n.url(rawURL),
		"header": n.header(header),
		"body":   n.body(body, r),
	}
	return applyRules(n.rules, req, nil)
}

func (n *Normalizer) url(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return n.str(raw, fromHeader)
	}
	p := n.str(u.Path, fromHeader)
	q := u.Query()
	var params []string
	for _, k := range sortedKeys(q) {
		switch strings.ToLower(k) {
		case "key", "api_key", "api-key", "apikey", "access_token", "token", "sig", "signature":
			continue
		}
		for _, v := range q[k] {
			params = append(params, n.str(k, fromHeader)+"="+fmt.Sprint(n.member(k, v, fromHeader, false)))
		}
	}
	if len(params) == 0 {
		return p
	}
	return p + "?" + strings.Join(params, "&")
}

func (n *Normalizer) header(h http.Header) map[string]any {
	values := map[string][]any{}
	for _, name := range sortedKeys(h) {
		lname := strings.ToLower(name)
		if droppedHeader(lname) {
			continue
		}
		for _, v := range h[name] {
			values[lname] = append(values[lname], n.headerValue(lname, v))
		}
	}
	out := make(map[string]any, len(values))
	for name, vs := range values {
		if len(vs) == 1 {
			out[name] = vs[0]
		} else {
			out[name] = vs
		}
	}
	return out
}

func droppedHeader(name string) bool {
	switch name {
	case "host", "content-length", "connection", "accept-encoding", "content-encoding",
		"transfer-encoding", "te", "trailer", "upgrade", "keep-alive", "via", "forwarded", "expect",
		"authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie",
		"x-stainless-os", "x-stainless-arch", "x-stainless-runtime-version":
		return true
	}
	return strings.HasPrefix(name, "proxy-") || strings.HasPrefix(name, "x-forwarded-")
}

func (n *Normalizer) headerValue(name, v string) any {
	if !n.defaults {
		return n.str(v, fromHeader)
	}
	switch {
	case strings.HasSuffix(name, "-id") || strings.HasSuffix(name, "_id") ||
		name == "traceparent" || name == "tracestate" || name == "sentry-trace":
		if v == "" || isPlaceholder(v) {
			return v
		}
		kind := "id"
		if strings.Contains(name, "session") {
			kind = "sessionId"
		}
		return n.link(kind, valueKey(v))
	case name == "user-agent" || name == "version" || name == "x-goog-api-client" ||
		strings.HasSuffix(name, "-version") && name != "anthropic-version":
		if name == "user-agent" {
			v = strings.Join(strings.Fields(uaComment.ReplaceAllString(v, " ")), " ")
		}
		v = versionNumber.ReplaceAllString(v, "<version>")
	}
	return n.str(v, fromHeader)
}

var (
	uaComment     = regexp.MustCompile(`\([^()]*\)`)
	versionNumber = regexp.MustCompile(`\bv?[0-9]+(?:\.[0-9]+)+(?:[-+][0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)*`)
)

func (n *Normalizer) body(b []byte, r *Requests) any {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if r != nil {
		if v, ok := n.bodyParts(b, r); ok {
			return v
		}
	}
	if v, ok := decode(b); ok {
		return n.value(v, fromWire, false)
	}
	return n.str(strings.ToValidUTF8(string(b), "\uFFFD"), fromWire)
}

// Conversation returns the conversation of a request normalized by
// Request: its system prompt, when the request has one apart from its
// messages (system, systemInstruction, instructions), then each of its
// messages (messages for Chat Completions and Anthropic, input for
// Responses, contents for Gemini), in order, each as canonical JSON; nil
// if the request has none of these. Two requests of one conversation
// share what came before: a request continues the conversation of an
// earlier one if the earlier one's conversation is a prefix of its own.
func Conversation(request any) []string {
	req, _ := request.(map[string]any)
	body, _ := req["body"].(map[string]any)
	var out []string
	for _, key := range []string{"system", "systemInstruction", "instructions"} {
		if v, ok := body[key]; ok && v != nil {
			out = append(out, string(encode(v)))
		}
	}
	for _, key := range []string{"messages", "input", "contents"} {
		switch v := body[key].(type) {
		case []any:
			for _, m := range v {
				out = append(out, string(encode(m)))
			}
		case string:
			out = append(out, string(encode(v)))
		}
	}
	return out
}

package wire

import (
	"net/http"
	"strings"
)

// LLMRequest reports whether a request, by its method and URL, asks an
// LLM to generate: a request of one of the formats RequestFormat knows,
// or a generation call of an API whose responses this package does not
// reassemble (OpenAI's legacy /completions, Amazon Bedrock's
// /model/ID/invoke, /invoke-with-response-stream, /converse and
// /converse-stream, and Vertex AI's rawPredict and streamRawPredict of any
// publisher).
//
// Other calls of LLM APIs are not generation: listing models, embeddings,
// uploads, and token counts (Anthropic's /messages/count_tokens, Gemini's
// :countTokens), whose answer depends on the request alone and which
// agents make as often as their bookkeeping wants rather than once per
// turn of the conversation.
func LLMRequest(method, rawURL string) bool {
	if RequestFormat(method, rawURL) != Unknown {
		return true
	}
	if method != http.MethodPost {
		return false
	}
	path := urlPath(rawURL)
	if _, verb, ok := modelMethod(path); ok {
		return verb == "rawPredict" || verb == "streamRawPredict"
	}
	if strings.HasSuffix(path, "/completions") {
		return true
	}
	// Bedrock: /model/{modelId}/{action}, the model id percent-encoded
	// or not (an ARN has slashes).
	if i := strings.Index(path, "/model/"); i >= 0 {
		switch path[strings.LastIndexByte(path, '/')+1:] {
		case "invoke", "invoke-with-response-stream", "converse", "converse-stream":
			return strings.LastIndexByte(path, '/') > i+len("/model/")
		}
	}
	return false
}

package llmserver

import (
	"encoding/json"
	"strings"
)

// structuredOutput reports whether a JSON request body asks the model
// for structured output, in any of the wire formats: Anthropic's
// output_config.format, OpenAI Chat's response_format and Responses'
// text.format of a JSON type, Gemini's generationConfig responseMimeType
// application/json or response schema, Ollama's format.
func structuredOutput(body []byte) bool {
	return scanBody(body).structured()
}

// structured reports whether the members say the request asks for
// structured output (see structuredOutput).
func (m bodyMembers) structured() bool {
	var req struct {
		OutputConfig struct {
			Format json.RawMessage `json:"format"`
		} `json:"output_config"`
		ResponseFormat struct {
			Type string `json:"type"`
		} `json:"response_format"`
		Text struct {
			Format struct {
				Type string `json:"type"`
			} `json:"format"`
		} `json:"text"`
		GenerationConfig struct {
			ResponseMimeType   string          `json:"responseMimeType"`
			ResponseSchema     json.RawMessage `json:"responseSchema"`
			ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		} `json:"generationConfig"`
		Format json.RawMessage `json:"format"`
	}
	// A body that is not JSON, or has a field of another type, asks for
	// nothing this can tell. Only the members read are decoded: a request
	// that carries a whole conversation is scanned, not decoded.
	if m.structuredObject == nil || json.Unmarshal(m.structuredObject, &req) != nil {
		return false
	}
	jsonType := func(t string) bool { return strings.HasPrefix(t, "json") }
	g := req.GenerationConfig
	return present(req.OutputConfig.Format) ||
		jsonType(req.ResponseFormat.Type) ||
		jsonType(req.Text.Format.Type) ||
		strings.EqualFold(g.ResponseMimeType, "application/json") || present(g.ResponseSchema) || present(g.ResponseJSONSchema) ||
		present(req.Format)
}

// present reports whether a JSON field is there and not null or "".
func present(v json.RawMessage) bool {
	s := strings.TrimSpace(string(v))
	return s != "" && s != "null" && s != `""`
}

// structuredKeys are the top-level members structuredOutput reads, in
// lower case: encoding/json matches them ignoring case.
var structuredKeys = map[string]bool{"output_config": true, "response_format": true, "text": true, "generationconfig": true, "format": true}

package wire

import (
	"encoding/json"
	"strings"
)

// chatDecoder reads OpenAI Chat Completions: a stream of
// chat.completion.chunk objects ending with [DONE], or one chat.completion.
// It follows the first choice only; a response with n > 1 has several
// answers, and a Message holds one.
type chatDecoder struct {
	assembler
	byIndex map[int]*call // streamed tool calls by their index
}

type chatChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int          `json:"index"`
		Delta        *chatMessage `json:"delta"`
		Message      *chatMessage `json:"message"`
		FinishReason string       `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails *struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	Error *apiError `json:"error"`
}

type chatMessage struct {
	Content content `json:"content"`
	Refusal string  `json:"refusal"`
	// Servers that expose reasoning use one of these two names.
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"`
	ToolCalls        []struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	// FunctionCall is the legacy functions API's single call.
	FunctionCall *struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function_call"`
}

func (d *chatDecoder) event(data []byte) error {
	if string(trimSpace(data)) == "[DONE]" {
		return nil
	}
	return d.chunk(data, true)
}

func (d *chatDecoder) document(body []byte) (int, error) {
	return 1, d.chunk(body, false)
}

// chunk handles a chunk of a stream, whose messages are deltas, or a whole
// completion.
func (d *chatDecoder) chunk(data []byte, streamed bool) error {
	var c chatChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return err
	}
	d.setIDs(c.ID, c.Model)
	d.addError(c.Error)
	if u := c.Usage; u != nil {
		d.msg.Usage = Usage{
			InputTokens:  u.PromptTokens,
			OutputTokens: u.CompletionTokens,
			TotalTokens:  u.TotalTokens,
		}
		if u.PromptTokensDetails != nil {
			d.msg.Usage.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
		if u.CompletionTokensDetails != nil {
			d.msg.Usage.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
		}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		m := ch.Message
		if streamed {
			m = ch.Delta
		}
		if m != nil {
			d.add(m, streamed)
		}
		if ch.FinishReason != "" {
			d.msg.StopReason = ch.FinishReason
		}
	}
	return nil
}

func (d *chatDecoder) add(m *chatMessage, streamed bool) {
	d.text.add("", string(m.Content))
	d.text.add("", m.Refusal)
	d.reasoning.add("", m.ReasoningContent)
	d.reasoning.add("", m.Reasoning)
	for _, tc := range m.ToolCalls {
		args := argsText(tc.Function.Arguments)
		if !streamed {
			d.newCall(tc.ID, tc.Function.Name).args.WriteString(args)
			continue
		}
		c := d.streamedCall(tc.Index, tc.ID)
		if c.id == "" {
			c.id = tc.ID
		}
		// The name comes whole in the first fragment; some servers
		// repeat it in later ones.
		if c.name == "" {
			c.name = tc.Function.Name
		}
		c.args.WriteString(args)
	}
	if fc := m.FunctionCall; fc != nil {
		var c *call
		if streamed {
			c = d.streamedCall(nil, "")
		} else {
			c = d.newCall("", "")
		}
		if c.name == "" {
			c.name = fc.Name
		}
		c.args.WriteString(argsText(fc.Arguments))
	}
}

// streamedCall returns the tool call a streamed fragment belongs to. The
// index says which; without one, which some servers omit, a fragment with
// a new id starts a call and any other continues the last call.
func (d *chatDecoder) streamedCall(index *int, id string) *call {
	if index != nil {
		c := d.byIndex[*index]
		if c == nil {
			if d.byIndex == nil {
				d.byIndex = make(map[int]*call)
			}
			c = d.newCall("", "")
			d.byIndex[*index] = c
		}
		return c
	}
	if n := len(d.calls); n > 0 && (id == "" || id == d.calls[n-1].id) {
		return d.calls[n-1]
	}
	return d.newCall("", "")
}

// content is the text of a message's content, which is a string, or with
// some servers an array of parts.
type content string

func (c *content) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case 'n':
		*c = ""
		return nil
	case '[':
		var ps []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &ps); err != nil {
			return err
		}
		var sb strings.Builder
		for _, p := range ps {
			if p.Type == "text" || p.Type == "output_text" {
				sb.WriteString(p.Text)
			}
		}
		*c = content(sb.String())
		return nil
	}
	return json.Unmarshal(b, (*string)(c))
}

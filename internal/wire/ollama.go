package wire

import "encoding/json"

// ollamaDecoder reads Ollama's /api/chat and /api/generate responses: a
// stream of NDJSON objects, or one object when not streamed.
type ollamaDecoder struct {
	assembler
}

type ollamaLine struct {
	Model   string `json:"model"`
	Message *struct {
		Content   string `json:"content"`
		Thinking  string `json:"thinking"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"message"`
	// /api/generate puts the text at the top level.
	Response        string    `json:"response"`
	Thinking        string    `json:"thinking"`
	Done            bool      `json:"done"`
	DoneReason      string    `json:"done_reason"`
	PromptEvalCount int       `json:"prompt_eval_count"`
	EvalCount       int       `json:"eval_count"`
	Error           *apiError `json:"error"`
}

func (d *ollamaDecoder) document(body []byte) (int, error) {
	return 1, d.event(body)
}

func (d *ollamaDecoder) event(data []byte) error {
	var l ollamaLine
	if err := json.Unmarshal(data, &l); err != nil {
		return err
	}
	d.setIDs("", l.Model)
	d.addError(l.Error)
	d.text.add("", l.Response)
	d.reasoning.add("", l.Thinking)
	if m := l.Message; m != nil {
		d.text.add("", m.Content)
		d.reasoning.add("", m.Thinking)
		for _, tc := range m.ToolCalls {
			d.newCall(tc.ID, tc.Function.Name).args.WriteString(objectArgs(tc.Function.Arguments))
		}
	}
	if l.Done {
		d.msg.StopReason = l.DoneReason
		d.msg.Usage = Usage{
			InputTokens:  l.PromptEvalCount,
			OutputTokens: l.EvalCount,
			TotalTokens:  l.PromptEvalCount + l.EvalCount,
		}
	}
	return nil
}

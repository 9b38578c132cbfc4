package wire

import (
	"encoding/json"
	"errors"
	"fmt"
)

// geminiDecoder reads Gemini generateContent responses: a stream of
// GenerateContentResponse chunks, one such object, or a JSON array of them
// (what streamGenerateContent sends without alt=sse). It follows the
// first candidate only.
type geminiDecoder struct {
	assembler
}

type geminiChunk struct {
	Candidates []struct {
		Index   int `json:"index"`
		Content struct {
			Parts []struct {
				Text         string `json:"text"`
				Thought      bool   `json:"thought"`
				FunctionCall *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	// Every chunk repeats the usage so far, so the last one counts.
	UsageMetadata *struct {
		PromptTokenCount        int `json:"promptTokenCount"`
		CandidatesTokenCount    int `json:"candidatesTokenCount"`
		TotalTokenCount         int `json:"totalTokenCount"`
		ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
		CachedContentTokenCount int `json:"cachedContentTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string    `json:"modelVersion"`
	ResponseID   string    `json:"responseId"`
	Error        *apiError `json:"error"`
}

func (d *geminiDecoder) document(body []byte) (int, error) {
	if trimSpace(body)[0] != '[' {
		return 1, d.event(body)
	}
	var chunks []json.RawMessage
	if err := json.Unmarshal(body, &chunks); err != nil {
		return 0, err
	}
	var errs []error
	for i, c := range chunks {
		if err := d.event(c); err != nil {
			errs = append(errs, fmt.Errorf("element %d: %w", i, err))
		}
	}
	return len(chunks), errors.Join(errs...)
}

func (d *geminiDecoder) event(data []byte) error {
	var c geminiChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return err
	}
	d.setIDs(c.ResponseID, c.ModelVersion)
	d.addError(c.Error)
	if pf := c.PromptFeedback; pf != nil && pf.BlockReason != "" {
		d.msg.StopReason = pf.BlockReason
	}
	if u := c.UsageMetadata; u != nil {
		d.msg.Usage = Usage{
			InputTokens:     u.PromptTokenCount,
			OutputTokens:    u.CandidatesTokenCount + u.ThoughtsTokenCount,
			TotalTokens:     u.TotalTokenCount,
			CachedTokens:    u.CachedContentTokenCount,
			ReasoningTokens: u.ThoughtsTokenCount,
		}
	}
	for _, cand := range c.Candidates {
		if cand.Index != 0 {
			continue
		}
		for _, p := range cand.Content.Parts {
			switch {
			case p.FunctionCall != nil:
				fc := p.FunctionCall
				d.newCall(fc.ID, fc.Name).args.WriteString(objectArgs(fc.Args))
			case p.Thought:
				d.reasoning.add("", p.Text)
			default:
				d.text.add("", p.Text)
			}
		}
		if cand.FinishReason != "" {
			d.msg.StopReason = cand.FinishReason
		}
	}
	return nil
}

package wire

import (
	"encoding/json"
	"strconv"
)

// responsesDecoder reads OpenAI Responses: a stream of typed events, or one
// response object. A stream sends each piece of output twice, as deltas
// and again whole when the piece is done; the whole copy counts only for a
// piece whose deltas did not come.
type responsesDecoder struct {
	assembler
	byItem   map[string]*call // tool calls by item id
	byOutput map[int]*call    // tool calls by output index
	streamed map[string]bool  // keys of the text parts that had deltas
}

func newResponsesDecoder() *responsesDecoder {
	return &responsesDecoder{
		byItem:   make(map[string]*call),
		byOutput: make(map[int]*call),
		streamed: make(map[string]bool),
	}
}

type responsesEvent struct {
	Type         string             `json:"type"`
	Response     *responsesResponse `json:"response"`
	Item         *responsesItem     `json:"item"`
	ItemID       string             `json:"item_id"`
	OutputIndex  int                `json:"output_index"`
	ContentIndex int                `json:"content_index"`
	SummaryIndex int                `json:"summary_index"`
	Delta        string             `json:"delta"`
	// The whole text, arguments or input of a piece that is done.
	Text      string `json:"text"`
	Refusal   string `json:"refusal"`
	Arguments string `json:"arguments"`
	Input     string `json:"input"`
	// An error event carries its code and message at the top level, or
	// in newer versions an error object.
	Code    looseString `json:"code"`
	Message looseString `json:"message"`
	Error   *apiError   `json:"error"`
}

type responsesResponse struct {
	ID                string          `json:"id"`
	Model             string          `json:"model"`
	Status            string          `json:"status"`
	Output            []responsesItem `json:"output"`
	Error             *apiError       `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage *struct {
		InputTokens        int `json:"input_tokens"`
		OutputTokens       int `json:"output_tokens"`
		TotalTokens        int `json:"total_tokens"`
		InputTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokensDetails *struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
}

type responsesItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"` // function_call
	Input     string          `json:"input"`     // custom_tool_call
	Action    json.RawMessage `json:"action"`    // local_shell_call
	Content   []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
	Summary []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

func (d *responsesDecoder) document(body []byte) (int, error) {
	var r responsesResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return 1, err
	}
	for i := range r.Output {
		d.item(&r.Output[i], i)
	}
	d.response(&r)
	return 1, nil
}

func (d *responsesDecoder) event(data []byte) error {
	var e responsesEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return err
	}
	switch e.Type {
	case "response.created", "response.in_progress", "response.queued":
		if e.Response != nil {
			d.setIDs(e.Response.ID, e.Response.Model)
		}
	case "response.completed", "response.incomplete", "response.failed":
		if e.Response != nil {
			d.response(e.Response)
		}
	case "error":
		if e.Error != nil {
			d.addError(e.Error)
		} else {
			d.addError(&apiError{Code: e.Code, Message: e.Message})
		}

	case "response.output_item.added":
		if e.Item != nil && isCall(e.Item.Type) {
			c := d.call(e.Item.ID, e.OutputIndex)
			c.id, c.name = e.Item.CallID, callName(e.Item)
		}
	case "response.output_item.done":
		if e.Item != nil {
			d.item(e.Item, e.OutputIndex)
		}

	case "response.output_text.delta", "response.refusal.delta":
		d.delta(&d.text, e.ItemID, textKey(e.ItemID, e.ContentIndex), e.Delta)
	case "response.output_text.done":
		d.done(&d.text, e.ItemID, textKey(e.ItemID, e.ContentIndex), e.Text)
	case "response.refusal.done":
		d.done(&d.text, e.ItemID, textKey(e.ItemID, e.ContentIndex), e.Refusal)
	case "response.reasoning_summary_text.delta":
		k := summaryKey(e.ItemID, e.SummaryIndex)
		d.delta(&d.reasoning, k, k, e.Delta)
	case "response.reasoning_summary_text.done":
		k := summaryKey(e.ItemID, e.SummaryIndex)
		d.done(&d.reasoning, k, k, e.Text)
	case "response.reasoning_text.delta":
		k := reasoningKey(e.ItemID, e.ContentIndex)
		d.delta(&d.reasoning, k, k, e.Delta)
	case "response.reasoning_text.done":
		k := reasoningKey(e.ItemID, e.ContentIndex)
		d.done(&d.reasoning, k, k, e.Text)

	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		d.call(e.ItemID, e.OutputIndex).args.WriteString(e.Delta)
	case "response.function_call_arguments.done":
		d.call(e.ItemID, e.OutputIndex).setArgs(e.Arguments)
	case "response.custom_tool_call_input.done":
		d.call(e.ItemID, e.OutputIndex).setArgs(e.Input)
	}
	return nil
}

// response handles the final state of a response.
func (d *responsesDecoder) response(r *responsesResponse) {
	d.setIDs(r.ID, r.Model)
	d.addError(r.Error)
	d.msg.StopReason = r.Status
	if r.IncompleteDetails != nil && r.IncompleteDetails.Reason != "" {
		d.msg.StopReason = r.IncompleteDetails.Reason
	}
	if u := r.Usage; u != nil {
		d.msg.Usage = Usage{
			InputTokens:  u.InputTokens,
			OutputTokens: u.OutputTokens,
			TotalTokens:  u.TotalTokens,
		}
		if u.InputTokensDetails != nil {
			d.msg.Usage.CachedTokens = u.InputTokensDetails.CachedTokens
		}
		if u.OutputTokensDetails != nil {
			d.msg.Usage.ReasoningTokens = u.OutputTokensDetails.ReasoningTokens
		}
	}
}

// item handles an output item that is done, whole.
func (d *responsesDecoder) item(it *responsesItem, outputIndex int) {
	switch it.Type {
	case "message":
		for i, c := range it.Content {
			d.done(&d.text, it.ID, textKey(it.ID, i), c.Text+c.Refusal)
		}
	case "reasoning":
		for i, s := range it.Summary {
			k := summaryKey(it.ID, i)
			d.done(&d.reasoning, k, k, s.Text)
		}
		for i, c := range it.Content {
			k := reasoningKey(it.ID, i)
			d.done(&d.reasoning, k, k, c.Text)
		}
	default:
		if !isCall(it.Type) {
			return
		}
		c := d.call(it.ID, outputIndex)
		if it.CallID != "" {
			c.id = it.CallID
		}
		if name := callName(it); name != "" {
			c.name = name
		}
		if args := callArgs(it); args != "" {
			c.setArgs(args)
		}
	}
}

// delta appends a delta of the text part key to p, joining it to the
// earlier text as part of join: the parts of one message are one text, but
// reasoning summary parts are separate.
func (d *responsesDecoder) delta(p *parts, join, key, s string) {
	d.streamed[key] = true
	p.add(join, s)
}

// done handles the whole text of part key, which counts only if its
// deltas did not come.
func (d *responsesDecoder) done(p *parts, join, key, s string) {
	if !d.streamed[key] {
		d.streamed[key] = true
		p.add(join, s)
	}
}

// call returns the tool call of an output item, found by its id or else
// by its output index, starting one if there is none.
func (d *responsesDecoder) call(itemID string, outputIndex int) *call {
	c := d.byItem[itemID]
	if c == nil {
		c = d.byOutput[outputIndex]
	}
	if c == nil {
		c = d.newCall("", "")
		d.byOutput[outputIndex] = c
	}
	if itemID != "" {
		d.byItem[itemID] = c
	}
	return c
}

// isCall reports whether an output item of type t is a call of a tool the
// client runs. Hosted tools, such as web search, run at OpenAI.
func isCall(t string) bool {
	return t == "function_call" || t == "custom_tool_call" || t == "local_shell_call"
}

func callName(it *responsesItem) string {
	if it.Type == "local_shell_call" {
		return "local_shell"
	}
	return it.Name
}

func callArgs(it *responsesItem) string {
	switch it.Type {
	case "custom_tool_call":
		return it.Input
	case "local_shell_call":
		return argsText(it.Action)
	}
	return it.Arguments
}

func textKey(item string, i int) string      { return item + "/text/" + strconv.Itoa(i) }
func summaryKey(item string, i int) string   { return item + "/summary/" + strconv.Itoa(i) }
func reasoningKey(item string, i int) string { return item + "/reasoning/" + strconv.Itoa(i) }

package acp

import "encoding/json"

// Details are the parts of a request's or notification's params that
// one-line summaries of it show (acptap show's timeline, the HTML page).
type Details struct {
	HasPrompt bool   // params.prompt has a block
	Prompt    string // the text of its first block
	Path      string // params.path (fs/*)
	Command   string // params.command (terminal/create)
	// ToolCallTitle is params.toolCall.title (session/request_permission).
	ToolCallTitle string
	// Title and Status are params.update's (tool_call, tool_call_update).
	Title, Status string
	// Text is params.update.content.text when it is a non-empty string
	// (message and thought chunks).
	Text string
}

// ParamsDetails reads the Details of params; ok is false when params is
// not an object of the expected shapes.
func ParamsDetails(params json.RawMessage) (d Details, ok bool) {
	var p struct {
		Path    string `json:"path"`
		Command string `json:"command"`
		Prompt  []struct {
			Text string `json:"text"`
		} `json:"prompt"`
		Update struct {
			Content json.RawMessage `json:"content"`
			Title   string          `json:"title"`
			Status  string          `json:"status"`
		} `json:"update"`
		ToolCall struct {
			Title string `json:"title"`
		} `json:"toolCall"`
	}
	if json.Unmarshal(params, &p) != nil {
		return Details{}, false
	}
	d = Details{Path: p.Path, Command: p.Command, ToolCallTitle: p.ToolCall.Title, Title: p.Update.Title, Status: p.Update.Status}
	if len(p.Prompt) > 0 {
		d.HasPrompt, d.Prompt = true, p.Prompt[0].Text
	}
	var text struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(p.Update.Content, &text) == nil {
		d.Text = text.Text
	}
	return d, true
}

// ResultDetails are the parts of a response's result that one-line
// summaries of it show.
type ResultDetails struct {
	SessionID  string // result.sessionId (session/new)
	StopReason string // result.stopReason (session/prompt)
	TerminalID string // result.terminalId (terminal/create)
	// Outcome and OptionID are result.outcome's (session/request_permission).
	Outcome, OptionID string
	// Content is result.content when it is a string (fs/read_text_file).
	Content *string
}

// ParseResultDetails reads the ResultDetails of result; ok is false when
// result is not an object.
func ParseResultDetails(result json.RawMessage) (d ResultDetails, ok bool) {
	var r struct {
		SessionID  string `json:"sessionId"`
		StopReason string `json:"stopReason"`
		TerminalID string `json:"terminalId"`
		Outcome    struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(result, &r) != nil {
		return ResultDetails{}, false
	}
	var content *string
	// A content that is not a string (an MCP tool result's blocks, say)
	// is left out rather than making the rest unreadable.
	if json.Unmarshal(r.Content, &content) != nil {
		content = nil
	}
	return ResultDetails{
		SessionID:  r.SessionID,
		StopReason: r.StopReason,
		TerminalID: r.TerminalID,
		Outcome:    r.Outcome.Outcome,
		OptionID:   r.Outcome.OptionID,
		Content:    content,
	}, true
}

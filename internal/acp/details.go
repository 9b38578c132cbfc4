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

// Package chatapi is the request side of OpenAI's Chat Completions API as a client sends it, for the demo agent and the test agent, which both speak it to their LLM.
package chatapi

// Message is one message of a conversation.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a call of a function tool, in an assistant message.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Request is a request of /chat/completions.
type Request struct {
	Model    string            `json:"model"`
	Stream   bool              `json:"stream"`
	Messages []Message         `json:"messages"`
	Tools    []any             `json:"tools,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

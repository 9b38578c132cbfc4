package wire

import (
	"encoding/json"
	"strconv"
)

// anthropicDecoder reads Anthropic Messages: a stream of typed events, or
// one message object.
type anthropicDecoder struct {
	assembler
	blocks map[int]*anthropicCall // tool_use blocks by index
	usage  anthropicUsage         // the latest value of each count
}

// anthropicCall is a tool_use block being streamed.
type anthropicCall struct {
	*call
	// fromStart says the arguments are still the input object of the
	// block's start, which input_json_delta fragments replace.
	fromStart bool
}

func newAnthropicDecoder() *anthropicDecoder {
	return &anthropicDecoder{blocks: make(map[int]*anthropicCall)}
}

type anthropicEvent struct {
	Type         string            `json:"type"`
	Message      *anthropicMessage `json:"message"`
	Index        int               `json:"index"`
	ContentBlock *anthropicBlock   `json:"content_block"`
	Delta        *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
	Error *apiError       `json:"error"`
}

type anthropicMessage struct {
	Type       string           `json:"type"`
	ID         string           `json:"id"`
	Model      string           `json:"model"`
	Content    []anthropicBlock `json:"content"`
	StopReason string           `json:"stop_reason"`
	Usage      *anthropicUsage  `json:"usage"`
	Error      *apiError        `json:"error"`
}

type anthropicBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Thinking string          `json:"thinking"`
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
}

// anthropicUsage has pointers because events report some counts and not
// others, and a count not reported keeps its earlier value.
type anthropicUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
}

func (d *anthropicDecoder) document(body []byte) (int, error) {
	var m anthropicMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return 1, err
	}
	d.header(&m)
	for i := range m.Content {
		d.blockStart(i, &m.Content[i])
	}
	return 1, nil
}

func (d *anthropicDecoder) event(data []byte) error {
	var e anthropicEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return err
	}
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			d.header(e.Message)
		}
	case "content_block_start":
		if e.ContentBlock != nil {
			d.blockStart(e.Index, e.ContentBlock)
		}
	case "content_block_delta":
		if e.Delta == nil {
			break
		}
		switch e.Delta.Type {
		case "text_delta":
			d.text.add("", e.Delta.Text)
		case "thinking_delta":
			d.reasoning.add(blockKey(e.Index), e.Delta.Thinking)
		case "input_json_delta":
			c := d.blocks[e.Index]
			if c == nil {
				c = &anthropicCall{call: d.newCall("", "")}
				d.blocks[e.Index] = c
			}
			if e.Delta.PartialJSON == "" {
				break
			}
			if c.fromStart {
				c.args.Reset()
				c.fromStart = false
			}
			c.args.WriteString(e.Delta.PartialJSON)
		}
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" {
			d.msg.StopReason = e.Delta.StopReason
		}
		d.addUsage(e.Usage)
	case "error":
		d.addError(e.Error)
	}
	return nil
}

// header handles the parts of a message outside its content: of a whole
// message, or of the start of a streamed one.
func (d *anthropicDecoder) header(m *anthropicMessage) {
	d.setIDs(m.ID, m.Model)
	d.addError(m.Error)
	if m.StopReason != "" {
		d.msg.StopReason = m.StopReason
	}
	d.addUsage(m.Usage)
}

// blockStart handles a content block that starts, or a whole one.
func (d *anthropicDecoder) blockStart(index int, b *anthropicBlock) {
	switch b.Type {
	case "text":
		d.text.add("", b.Text)
	case "thinking":
		d.reasoning.add(blockKey(index), b.Thinking)
	case "tool_use":
		c := &anthropicCall{call: d.newCall(b.ID, b.Name), fromStart: true}
		c.args.WriteString(objectArgs(b.Input))
		d.blocks[index] = c
	}
}

func (d *anthropicDecoder) addUsage(u *anthropicUsage) {
	if u == nil {
		return
	}
	set := func(dst **int, src *int) {
		if src != nil {
			*dst = src
		}
	}
	set(&d.usage.InputTokens, u.InputTokens)
	set(&d.usage.OutputTokens, u.OutputTokens)
	set(&d.usage.CacheReadInputTokens, u.CacheReadInputTokens)
	set(&d.usage.CacheCreationInputTokens, u.CacheCreationInputTokens)
	val := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	cached := val(d.usage.CacheReadInputTokens)
	in := val(d.usage.InputTokens) + cached + val(d.usage.CacheCreationInputTokens)
	out := val(d.usage.OutputTokens)
	d.msg.Usage = Usage{InputTokens: in, OutputTokens: out, TotalTokens: in + out, CachedTokens: cached}
}

func blockKey(index int) string { return strconv.Itoa(index) }

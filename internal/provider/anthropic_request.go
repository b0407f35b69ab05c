package provider

// The chat form (OpenAI chat completions) mapped to Anthropic's Messages
// API: system apart, content blocks, tool calls as tool_use blocks and tool
// answers as tool_result blocks in a user message.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/inkwell/inkwell"
)

// messagesRequest is the body of POST /v1/messages.
type messagesRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        string          `json:"system,omitempty"`
	Messages      []anthMessage   `json:"messages"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Tools         []anthTool      `json:"tools,omitempty"`
	ToolChoice    *anthToolChoice `json:"tool_choice,omitempty"`
}

type anthMessage struct {
	Role    string      `json:"role"` // user or assistant
	Content []anthBlock `json:"content"`
}

// anthBlock is one content block: text, image, tool_use or tool_result.
type anthBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *anthSource     `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   []anthBlock     `json:"content,omitempty"`
}

// anthSource is an image's source: base64 data, or a URL.
type anthSource struct {
	Type      string `json:"type"` // base64 or url
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type anthTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anthToolChoice struct {
	Type string `json:"type"` // auto, any, none or tool
	Name string `json:"name,omitempty"`
}

// toMessages maps a chat request. What has no place in the Messages API
// is a rejection (ClassClient) before anything is sent: the same request
// would fail the same way again.
func toMessages(c inkwell.ChatRequest) (messagesRequest, error) {
	mr := messagesRequest{Model: c.Model, MaxTokens: c.MaxOutputTokens, Temperature: c.Temperature, TopP: c.TopP, StopSequences: c.Stop}
	if mr.MaxTokens <= 0 {
		mr.MaxTokens = defaultAnthropicMaxTokens
	}
	if err := unmappedFields(c); err != nil {
		return mr, err
	}
	var system []string
	lastTurn, lastKept := -1, -1 // the last message that is not system or developer; the last sent
	for i, m := range c.Messages {
		if m.Role != "system" && m.Role != "developer" {
			lastTurn = i
		}
	}
	for i, m := range c.Messages {
		if m.Role == "system" || m.Role == "developer" {
			if t := nonTextPart(m.Content); t != "" {
				// Text() would keep the text and drop the rest: the model
				// would answer another conversation than the one sent.
				return mr, unmappable("messages[%d]: a %s message's part of type %q has no place in the Messages API, whose system prompt is text only", i, m.Role, t)
			}
			system = append(system, m.Text())
			continue
		}
		role, blocks, err := toBlocks(m)
		if err != nil {
			return mr, unmappable("messages[%d]: %s", i, err)
		}
		if len(blocks) == 0 {
			continue // an empty turn: the Messages API refuses empty content, and it says nothing
		}
		lastKept = i
		mr.Messages = appendMerged(mr.Messages, role, blocks)
	}
	if n := len(mr.Messages); n > 0 && mr.Messages[n-1].Role == "assistant" && lastKept != lastTurn {
		// The request ended on empty turns, left out: what is left ends on
		// an earlier answer, which the Messages API would continue as a
		// prefill instead of answering the question the empty turn stood
		// for. A request that ends on an assistant message with content
		// asks for that prefill itself.
		return mr, unmappable("messages[%d]: the last message is empty; the Messages API refuses empty content, and without it the answer before it would be continued instead of answered", lastTurn)
	}
	if len(mr.Messages) == 0 {
		return mr, unmappable("messages has no user or assistant message with content; the Messages API needs at least one")
	}
	if trimFinalAssistant(&mr); len(mr.Messages) == 0 {
		return mr, unmappable("messages has no user or assistant message with content; the Messages API needs at least one")
	}
	mr.System = strings.Join(system, "\n\n")
	var err error
	if mr.Tools, err = toTools(c.Tools); err != nil {
		return mr, err
	}
	mr.ToolChoice, err = toToolChoice(c.ToolChoice)
	return mr, err
}

// appendMerged adds a message, merged into the last one when both have the
// same role: the Messages API wants user and assistant turns to alternate.
func appendMerged(msgs []anthMessage, role string, blocks []anthBlock) []anthMessage {
	if n := len(msgs); n > 0 && msgs[n-1].Role == role {
		msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
		return msgs
	}
	return append(msgs, anthMessage{Role: role, Content: blocks})
}

// toBlocks is a user, assistant or tool message as the role and blocks
// of a Messages API message.
func toBlocks(m inkwell.ChatMessage) (string, []anthBlock, error) {
	switch m.Role {
	case "user":
		blocks, err := contentBlocks(m.Content)
		return "user", blocks, err
	case "assistant":
		blocks, err := contentBlocks(m.Content)
		if err != nil {
			return "", nil, err
		}
		calls, err := toolUses(m.ToolCalls)
		return "assistant", append(blocks, calls...), err
	case "tool":
		result, err := contentBlocks(m.Content)
		if err != nil {
			return "", nil, err
		}
		return "user", []anthBlock{{Type: "tool_result", ToolUseID: m.ToolCallID, Content: result}}, nil
	}
	return "", nil, fmt.Errorf("role %q has no place in the Messages API", m.Role)
}

// chatPart is one part of a chat message's content array.
type chatPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// contentBlocks maps a message's content: a string, or an array of parts
// (text, refusal and image_url). Empty text has no block: the Messages API
// refuses an empty text block.
func contentBlocks(content json.RawMessage) ([]anthBlock, error) {
	c := bytes.TrimSpace(content)
	if len(c) == 0 || string(c) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(c, &s) == nil {
		return textBlock(nil, s), nil
	}
	var parts []chatPart
	if err := json.Unmarshal(c, &parts); err != nil {
		return nil, fmt.Errorf("content is neither a string nor an array of parts")
	}
	var blocks []anthBlock
	for j, p := range parts {
		switch p.Type {
		case "text":
			blocks = textBlock(blocks, p.Text)
		case "refusal":
			blocks = textBlock(blocks, p.Refusal)
		case "image_url":
			b, err := imageBlock(p.ImageURL.URL)
			if err != nil {
				return nil, fmt.Errorf("part %d: %w", j, err)
			}
			blocks = append(blocks, b)
		default:
			return nil, fmt.Errorf("part %d of type %q has no place in the Messages API (text and image_url do)", j, p.Type)
		}
	}
	return blocks, nil
}

func textBlock(blocks []anthBlock, text string) []anthBlock {
	if strings.TrimSpace(text) == "" {
		return blocks // the Messages API refuses a text block of white space only
	}
	return append(blocks, anthBlock{Type: "text", Text: text})
}

// imageBlock maps an image_url: a base64 data: URL becomes a base64
// source, an http(s) URL a url source.
func imageBlock(u string) (anthBlock, error) {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		media, isBase64 := strings.CutSuffix(meta, ";base64")
		if !ok || !isBase64 || media == "" {
			return anthBlock{}, fmt.Errorf("image data URL must be data:<media type>;base64,<data>")
		}
		return anthBlock{Type: "image", Source: &anthSource{Type: "base64", MediaType: media, Data: data}}, nil
	}
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return anthBlock{Type: "image", Source: &anthSource{Type: "url", URL: u}}, nil
	}
	return anthBlock{}, fmt.Errorf("image_url.url must be a data: URL or an http(s) URL")
}

// toolUses maps an assistant's tool_calls, whose arguments are a JSON
// string, to tool_use blocks, whose input is the object itself.
func toolUses(raw json.RawMessage) ([]anthBlock, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var calls []toolCall
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, fmt.Errorf("tool_calls must be an array of {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}")
	}
	blocks := make([]anthBlock, 0, len(calls))
	for j, call := range calls {
		input := json.RawMessage(strings.TrimSpace(call.Function.Arguments))
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		if !json.Valid(input) || input[0] != '{' {
			return nil, fmt.Errorf("tool_calls[%d].function.arguments must be a JSON object", j)
		}
		blocks = append(blocks, anthBlock{Type: "tool_use", ID: call.ID, Name: call.Function.Name, Input: input})
	}
	return blocks, nil
}

// toTools maps OpenAI function tools to Anthropic tools.
func toTools(raw json.RawMessage) ([]anthTool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, unmappable("tools must be an array of {\"type\": \"function\", \"function\": {...}}")
	}
	out := make([]anthTool, 0, len(tools))
	for i, t := range tools {
		if t.Type != "function" || t.Function.Name == "" {
			return nil, unmappable("tools[%d]: only function tools with a name map to the Messages API", i)
		}
		schema := t.Function.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out = append(out, anthTool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
	}
	return out, nil
}

// toToolChoice maps "auto", "required", "none" and {"function": {"name"}}.
func toToolChoice(raw json.RawMessage) (*anthToolChoice, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto":
			return &anthToolChoice{Type: "auto"}, nil
		case "required":
			return &anthToolChoice{Type: "any"}, nil
		case "none":
			return &anthToolChoice{Type: "none"}, nil
		}
		return nil, unmappable("tool_choice %q is not auto, required or none", s)
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &named) != nil || named.Function.Name == "" {
		return nil, unmappable("tool_choice must be \"auto\", \"required\", \"none\" or {\"type\": \"function\", \"function\": {\"name\"}}")
	}
	return &anthToolChoice{Type: "tool", Name: named.Function.Name}, nil
}

// unmappable is a request the Messages API has no form for: rejected, and
// never sent.
// trimFinalAssistant trims the white space at the end of a last assistant
// turn (a prefill), which the Messages API refuses; a turn left with
// nothing is dropped.
func trimFinalAssistant(mr *messagesRequest) {
	n := len(mr.Messages)
	if n == 0 || mr.Messages[n-1].Role != "assistant" {
		return
	}
	last := &mr.Messages[n-1]
	if k := len(last.Content); k > 0 && last.Content[k-1].Type == "text" {
		last.Content[k-1].Text = strings.TrimRightFunc(last.Content[k-1].Text, unicode.IsSpace)
		if last.Content[k-1].Text == "" {
			last.Content = last.Content[:k-1]
		}
	}
	if len(last.Content) == 0 {
		mr.Messages = mr.Messages[:n-1]
	}
}

// nonTextPart is the type of a content's first part that is not text
// ("" for string content, or parts all text).
func nonTextPart(content json.RawMessage) string {
	var parts []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(content, &parts) != nil {
		return ""
	}
	for _, p := range parts {
		if p.Type != "text" {
			return p.Type
		}
	}
	return ""
}

// CheckMessages refuses, with the words a call would fail with, a chat
// request the Messages API mapping cannot carry: accept asks it
// (catalog.Check) so that such a request is refused before anything is
// written, not stored and then rejected by the lane.
func CheckMessages(c inkwell.ChatRequest) error {
	_, err := toMessages(c)
	if ce, ok := AsCallError(err); ok {
		return errors.New(ce.Msg)
	}
	return err
}

// ignoredFields are the message fields the mapping may leave out beside
// ChatMessage's own (a message's name has no place in the Messages API
// and says nothing to the model): they are no input, such as an answer's
// url citations, which an SDK sends back as they came.
var ignoredFields = []string{"annotations"}

// unmappedFields refuses a message field the mapping would not send, such
// as an assistant's "audio" (an answer's audio, stored at OpenAI) or a
// legacy "function_call", or a "refusal" with text: left out, the model
// would answer another conversation than the one sent. A field that is
// null or empty says nothing, and is no refusal (an SDK sends a message
// back as it was answered: "refusal": null, "audio": null). The parser
// read them (ChatMessage.Others): nothing is decoded again here.
func unmappedFields(c inkwell.ChatRequest) error {
	for i, m := range c.Messages {
		for _, f := range m.Others {
			if f.Empty || slices.Contains(ignoredFields, f.Name) {
				continue
			}
			return unmappable("messages[%d].%s has no place in the Messages API (its fields: role, content, and an assistant's tool_calls or a tool's tool_call_id); left out, the model would answer another conversation than the one sent", i, f.Name)
		}
	}
	return nil
}

func unmappable(format string, args ...any) *CallError {
	return &CallError{Class: ClassClient, Msg: "cannot send to Anthropic's Messages API: " + fmt.Sprintf(format, args...)}
}

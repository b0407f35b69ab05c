package inkwell

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
)

// ChatRequest is a job's work in the chat form (docs/design.md §12): an
// OpenAI chat-completions request. The typed fields are the ones Inkwell
// reads; Fields keeps every top-level field of the body as it was sent
// (Inkwell's own account and metadata removed), which is what an
// OpenAI-compatible provider is sent, unchanged but for the model's name.
type ChatRequest struct {
	Model    string        // the model the client named; "" is the default model
	Messages []ChatMessage // at least one
	// MaxOutputTokens is max_completion_tokens, else max_tokens; 0 when
	// the request names neither (the model's max_output_tokens applies).
	MaxOutputTokens int
	Temperature     *float64
	TopP            *float64
	Stop            []string
	Seed            *int64
	ResponseFormat  string          // "", "text", "json_object" or "json_schema"
	Tools           json.RawMessage // an array of tools, as sent
	ToolChoice      json.RawMessage // a string or an object, as sent
	Fields          map[string]json.RawMessage
}

// ChatMessage is one message of a chat request. Content is a string, an
// array of parts, or null (an assistant message that only calls tools).
type ChatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// TokensPerWord is how the short form's max_words becomes max_tokens: two
// tokens a word leaves a real model room to finish (English runs about
// 1.3 a word), and the simulator writes max_tokens/TokensPerWord words.
const TokensPerWord = 2

// Limits on the chat form, enforced before anything is written.
const (
	MaxChatBodyBytes = 1 << 20 // one request, as POST /v1/jobs or a batch line carries it
	MaxMessages      = 4096
	MaxOutputLimit   = 1 << 24 // the most max_tokens may ask for: far above any model's, and a bound every price can be multiplied by
)

// ChatRoles are the message roles a chat request may use.
var ChatRoles = []string{"system", "developer", "user", "assistant", "tool"}

// ChatFields are the top-level fields of the chat form Inkwell knows (its
// own account and metadata aside). Any other field is passed to an
// OpenAI-compatible provider unchanged and refused for the others.
var ChatFields = []string{"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
	"stop", "seed", "response_format", "tools", "tool_choice", "n", "stream"}

// ParseChat reads the chat form from a body's top-level fields, without
// account and metadata (the caller takes those). Every refusal is an
// EINVALID naming the field and what to send instead.
func ParseChat(fields map[string]json.RawMessage) (ChatRequest, error) {
	c := ChatRequest{Fields: fields}
	if raw, ok := fields["model"]; ok {
		if err := json.Unmarshal(raw, &c.Model); err != nil || strings.TrimSpace(c.Model) == "" {
			return c, Errorf(EINVALID, "model must be a model's name, a non-empty string (leave it out for the default model)")
		}
	}
	if err := c.parseMessages(fields["messages"]); err != nil {
		return c, err
	}
	if err := c.parseLimits(fields); err != nil {
		return c, err
	}
	if err := c.parseSampling(fields); err != nil {
		return c, err
	}
	return c, c.parseTools(fields)
}

func (c *ChatRequest) parseMessages(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return Errorf(EINVALID, "messages is required: an array of {\"role\", \"content\"}, at least one")
	}
	if err := json.Unmarshal(raw, &c.Messages); err != nil {
		return Errorf(EINVALID, "messages must be an array of {\"role\": \"user\", \"content\": \"...\"} objects")
	}
	switch {
	case len(c.Messages) == 0:
		return Errorf(EINVALID, "messages must hold at least one message")
	case len(c.Messages) > MaxMessages:
		return Errorf(EINVALID, "messages holds %d messages; at most %d", len(c.Messages), MaxMessages)
	}
	for i, m := range c.Messages {
		if !slices.Contains(ChatRoles, m.Role) {
			return Errorf(EINVALID, "messages[%d].role %q is not one of %s", i, m.Role, strings.Join(ChatRoles, ", "))
		}
		if err := checkContent(m); err != nil {
			return Errorf(EINVALID, "messages[%d].content %s", i, err.(*Error).Message)
		}
	}
	return nil
}

// checkContent accepts a string, an array of parts each with a "type", or
// null for an assistant message that calls tools.
func checkContent(m ChatMessage) error {
	c := bytes.TrimSpace(m.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			return nil
		}
		return Errorf(EINVALID, "is required: a string, or an array of parts")
	case c[0] == '"':
		return nil
	case c[0] == '[':
		var parts []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(c, &parts) != nil {
			return Errorf(EINVALID, "must be a string, or an array of parts such as {\"type\": \"text\", \"text\": \"...\"}")
		}
		for j, p := range parts {
			if p.Type == "" {
				return Errorf(EINVALID, "part %d has no \"type\"", j)
			}
		}
		return nil
	}
	return Errorf(EINVALID, "must be a string, or an array of parts")
}

func (c *ChatRequest) parseLimits(fields map[string]json.RawMessage) error {
	for _, name := range []string{"max_tokens", "max_completion_tokens"} {
		raw, ok := fields[name]
		if !ok || string(raw) == "null" {
			continue
		}
		var n int
		if err := json.Unmarshal(raw, &n); err != nil || n < 1 || n > MaxOutputLimit {
			return Errorf(EINVALID, "%s must be a whole number from 1 to %d", name, MaxOutputLimit)
		}
		if name == "max_completion_tokens" || c.MaxOutputTokens == 0 {
			c.MaxOutputTokens = n
		}
	}
	if raw, ok := fields["n"]; ok && string(raw) != "null" && string(raw) != "1" {
		return Errorf(EINVALID, "n must be 1 (or left out): a job is one answer; send one job per answer wanted")
	}
	if raw, ok := fields["stream"]; ok && string(raw) != "null" && string(raw) != "false" {
		return Errorf(EINVALID, "stream must be false (or left out): a job's answer is stored whole and read when it ends (GET /v1/jobs/{id}?wait=)")
	}
	return nil
}

func (c *ChatRequest) parseSampling(fields map[string]json.RawMessage) error {
	var err error
	if c.Temperature, err = optFloat(fields, "temperature", 0, 2); err != nil {
		return err
	}
	if c.TopP, err = optFloat(fields, "top_p", 0, 1); err != nil {
		return err
	}
	if raw, ok := fields["seed"]; ok && string(raw) != "null" {
		var s int64
		if err := json.Unmarshal(raw, &s); err != nil {
			return Errorf(EINVALID, "seed must be a whole number")
		}
		c.Seed = &s
	}
	if raw, ok := fields["stop"]; ok && string(raw) != "null" {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			c.Stop = []string{one}
		} else if err := json.Unmarshal(raw, &c.Stop); err != nil || len(c.Stop) > 4 {
			return Errorf(EINVALID, "stop must be a string or an array of at most 4 strings")
		}
	}
	return nil
}

func optFloat(fields map[string]json.RawMessage, name string, lo, hi float64) (*float64, error) {
	raw, ok := fields[name]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || math.IsNaN(f) || f < lo || f > hi {
		return nil, Errorf(EINVALID, "%s must be a number from %g to %g", name, lo, hi)
	}
	return &f, nil
}

func (c *ChatRequest) parseTools(fields map[string]json.RawMessage) error {
	if raw, ok := fields["response_format"]; ok && string(raw) != "null" {
		var rf struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &rf) != nil || !slices.Contains([]string{"text", "json_object", "json_schema"}, rf.Type) {
			return Errorf(EINVALID, "response_format must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or {\"type\": \"json_schema\", \"json_schema\": {...}}")
		}
		c.ResponseFormat = rf.Type
	}
	if raw, ok := fields["tools"]; ok && string(raw) != "null" {
		var tools []json.RawMessage
		if json.Unmarshal(raw, &tools) != nil {
			return Errorf(EINVALID, "tools must be an array of tools, such as {\"type\": \"function\", \"function\": {\"name\", \"parameters\"}}")
		}
		c.Tools = raw
	}
	if raw, ok := fields["tool_choice"]; ok && string(raw) != "null" {
		b := bytes.TrimSpace(raw)
		if len(b) == 0 || (b[0] != '"' && b[0] != '{') {
			return Errorf(EINVALID, "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\"}}")
		}
		c.ToolChoice = raw
	}
	return nil
}

// Unknown lists, sorted, the top-level fields Inkwell does not know.
func (c ChatRequest) Unknown() []string {
	var out []string
	for k := range c.Fields {
		if !slices.Contains(ChatFields, k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// InputBytes is the size of everything a provider turns into input
// tokens: the body's fields as JSON. A byte-level BPE token covers at
// least one byte, so it bounds the prompt's tokens, chat markup included
// (each message's JSON braces and role name outweigh its few marker
// tokens).
func (c ChatRequest) InputBytes() int {
	n := 2
	for k, v := range c.Fields {
		n += len(k) + len(v) + 4
	}
	return n
}

// Text is a message's text: its string content, or its text parts joined.
func (m ChatMessage) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// LastUserText is the text of the last user message: what the simulators
// write from.
func (c ChatRequest) LastUserText() string {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == "user" {
			return c.Messages[i].Text()
		}
	}
	return ""
}

package provider

// A Messages API answer mapped back to the chat form: its text, its tool
// calls, its finish reason and its usage, as a chat.completion object.

import (
	"encoding/json"
	"math"
	"strings"

	"github.com/inkwell/inkwell"
)

// messagesAnswer is the part of a Messages API answer we read.
type messagesAnswer struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Content []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason string `json:"stop_reason"`
	// Usage without input_tokens or output_tokens (an empty object, a null
	// count) reports no usage, and is charged at its bound rather than as
	// zero tokens.
	Usage *messagesUsage `json:"usage"`
}

type messagesUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens int64  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64  `json:"cache_read_input_tokens"`
}

// counted says the answer reports its usage: both counts present.
func (u *messagesUsage) counted() bool {
	return u != nil && u.InputTokens != nil && u.OutputTokens != nil
}

// toolCall is one of a chat.completion message's tool_calls.
type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// finishReasons maps stop_reason to the chat form's finish_reason; one not
// listed is "stop".
var finishReasons = map[string]string{
	"end_turn":                      "stop",
	"stop_sequence":                 "stop",
	"max_tokens":                    "length",
	"model_context_window_exceeded": "length",
	"tool_use":                      "tool_calls",
	"refusal":                       "content_filter",
}

func (p *Anthropic) parse(status int, body []byte) (inkwell.ProviderResponse, error) {
	var a messagesAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return inkwell.ProviderResponse{}, malformed(status, "answer is not Messages API JSON: %s", p.scrub(err.Error()))
	}
	text, calls := a.text(), a.toolCalls()
	switch {
	case a.ID == "":
		// Without an id a charge could not name the request it paid for.
		return inkwell.ProviderResponse{}, malformed(status, "answer has no id")
	case strings.TrimSpace(text) == "" && len(calls) == 0 && a.StopReason != "refusal" && !a.Usage.counted():
		// With its usage it is an answer, billed: Claude documents empty
		// end_turn answers (content [], a few output tokens), most often
		// after a tool result. Without it nothing says what was billed.
		return inkwell.ProviderResponse{}, malformed(status, "answer has no text, no tool call and no usage")
	}
	resp := inkwell.ProviderResponse{Text: text, RequestID: a.ID, AmountMicros: Price(text), FinishReason: a.finishReason()}
	if u := a.Usage; u.counted() {
		resp.Usage = true
		resp.PromptTokens = sumTokens(*u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens)
		resp.CompletionTokens = *u.OutputTokens
		if total := sumTokens(resp.PromptTokens, resp.CompletionTokens); total > 0 && total <= math.MaxInt32 {
			resp.TokensUsed = int(total)
		}
	}
	resp.Response = p.completion(a, resp, calls)
	if err := storable(resp); err != nil {
		return inkwell.ProviderResponse{}, malformed(status, "%s", err)
	}
	return resp, nil
}

// sumTokens adds token counts without wrapping around: a negative count
// makes the sum that count (storable refuses a negative usage), and a sum
// past int64 is math.MaxInt64 (a usage no model's prices can charge, which
// the worker refuses), so that no part can lower what the others count.
func sumTokens(counts ...int64) int64 {
	var sum int64
	for _, n := range counts {
		switch {
		case n < 0:
			return n
		case n > math.MaxInt64-sum:
			return math.MaxInt64
		}
		sum += n
	}
	return sum
}

// text is the text blocks, joined as they follow each other.
func (a messagesAnswer) text() string {
	var b strings.Builder
	for _, c := range a.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// toolCalls is the tool_use blocks as chat tool calls, whose arguments are
// the input object as a JSON string.
func (a messagesAnswer) toolCalls() []toolCall {
	var calls []toolCall
	for _, c := range a.Content {
		if c.Type != "tool_use" {
			continue
		}
		tc := toolCall{ID: c.ID, Type: "function"}
		tc.Function.Name, tc.Function.Arguments = c.Name, string(compactJSON(c.Input))
		if len(c.Input) == 0 {
			tc.Function.Arguments = "{}"
		}
		calls = append(calls, tc)
	}
	return calls
}

func (a messagesAnswer) finishReason() string {
	if fr, ok := finishReasons[a.StopReason]; ok {
		return fr
	}
	return "stop"
}

// completion is the answer as a chat.completion object, the form every
// stored answer has (provider.Completion's, with tool calls and a null
// content when there is no text).
func (p *Anthropic) completion(a messagesAnswer, resp inkwell.ProviderResponse, calls []toolCall) json.RawMessage {
	message := map[string]any{"role": "assistant", "content": nil}
	if resp.Text != "" {
		message["content"] = resp.Text
	}
	if len(calls) > 0 {
		message["tool_calls"] = calls
	}
	c := map[string]any{
		"id":      a.ID,
		"object":  "chat.completion",
		"created": p.cfg.NowFunc().Unix(),
		"model":   a.Model,
		"choices": []map[string]any{{"index": 0, "message": message, "finish_reason": resp.FinishReason}},
	}
	if resp.Usage {
		c["usage"] = map[string]int64{
			"prompt_tokens":     resp.PromptTokens,
			"completion_tokens": resp.CompletionTokens,
			"total_tokens":      sumTokens(resp.PromptTokens, resp.CompletionTokens),
		}
	}
	b, _ := json.Marshal(c)
	return b
}

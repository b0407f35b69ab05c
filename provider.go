package inkwell

import (
	"context"
	"encoding/json"
)

// Provider generates text for a job. Implementations live in
// internal/provider: sim (in-process, deterministic) and openai (the
// OpenAI-compatible chat-completions API).
//
// Generate is called outside any database transaction. It must send
// req.IdempotencyKey to a paid provider so that a repeated call for the same
// job is not billed twice.
type Provider interface {
	Generate(ctx context.Context, req ProviderRequest) (ProviderResponse, error)
}

// ProviderRequest is one call to a provider.
type ProviderRequest struct {
	IdempotencyKey string // job-scoped, see ProviderKey
	// Chat is the request: its Model is the name sent upstream, its
	// MaxOutputTokens the bound in force (the request's, else the
	// model's). A request without Fields is Prompt as the short form.
	Chat ChatRequest
	// Prompt and MaxWords are what the simulators write from: the short
	// form's own; for the chat form Prompt is empty (SimPrompt reads its
	// last user message) and MaxWords is its output bound in words.
	Prompt   string
	MaxWords int
}

// SimPrompt is the text a simulator writes from: Prompt, or the chat
// form's last user message.
func (req ProviderRequest) SimPrompt() string {
	if req.Prompt == "" && req.Chat.Fields != nil {
		return req.Chat.LastUserText()
	}
	return req.Prompt
}

// ChatOf is the chat request a provider sends for req: req.Chat, or for a
// request that has none, Prompt and MaxWords as the short form.
func (req ProviderRequest) ChatOf() ChatRequest {
	if req.Chat.Fields != nil {
		return req.Chat
	}
	return Request{Prompt: req.Prompt, MaxWords: req.MaxWords}.Chat()
}

// ProviderResponse is a provider's answer.
type ProviderResponse struct {
	Text         string
	RequestID    string // the provider's id for the billed request
	AmountMicros int64  // what the provider billed, in millionths of the currency unit
	TokensUsed   int    // tokens the call used, from the answer's usage (0: not reported)
	// PromptTokens and CompletionTokens are the answer's usage; Usage
	// says whether it reported any.
	PromptTokens, CompletionTokens int64
	Usage                          bool
	FinishReason                   string          // stop, length, tool_calls, content_filter
	Response                       json.RawMessage // the chat.completion object (an Anthropic answer mapped to it); nil: none
}

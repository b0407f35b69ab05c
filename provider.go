package inkwell

import "context"

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
	Prompt         string
	MaxWords       int
}

// ProviderResponse is a provider's answer.
type ProviderResponse struct {
	Text         string
	RequestID    string // the provider's id for the billed request
	AmountMicros int64  // what the provider billed, in millionths of the currency unit
	TokensUsed   int    // tokens the call used, from the answer's usage (0: not reported)
}

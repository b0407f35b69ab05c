package provider

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
)

// Sim is the in-process provider: it waits Latency, then answers with
// Generate's text and Price's amount. It keeps no ledger: the same request
// always gets the same answer, which is what an idempotent provider owes a
// repeated key. The zero value answers at once.
type Sim struct {
	// Latency is how long each call takes, as a slow paid provider would.
	Latency time.Duration
}

// NewSim returns a Sim whose calls take latency.
func NewSim(latency time.Duration) *Sim { return &Sim{Latency: latency} }

var _ inkwell.Provider = (*Sim)(nil)

// Generate waits Latency and answers. If ctx ends first it returns ctx's
// error, as a real call cut short would, and no text.
//
// It reads what the answer depends on (the prompt's seed and word count,
// the request id, the model) before it waits, and keeps none of the
// request while it waits: as with a provider over HTTP, whose request is
// on the provider's side once sent, a call in flight holds nothing of its
// request in this process (BenchmarkChatHeapCallsInFlight).
func (s *Sim) Generate(ctx context.Context, req inkwell.ProviderRequest) (inkwell.ProviderResponse, error) {
	a := planSimAnswer(req)
	if err := s.wait(ctx); err != nil {
		return inkwell.ProviderResponse{}, err
	}
	text := generate(a.seed1, a.seed2, a.words)
	u := Usage{PromptTokens: a.promptTokens, CompletionTokens: UsageOf("", text).CompletionTokens}.Within(a.maxTokens)
	return inkwell.ProviderResponse{
		Text:         text,
		RequestID:    a.id,
		AmountMicros: Price(text),
		TokensUsed:   u.TotalTokens(),
		Usage:        true, PromptTokens: int64(u.PromptTokens), CompletionTokens: int64(u.CompletionTokens),
		FinishReason: "stop",
		Response:     Completion(a.id, a.model, time.Now().Unix(), text, u), // created: when it answered, as a real one says
	}, nil
}

// simAnswer is all of a request the sim's answer depends on: Generate's
// seed and word count, the prompt's tokens, the request id and
// the model named in the answer.
type simAnswer struct {
	seed1, seed2        uint64
	words, promptTokens int
	maxTokens           int // the output bound it was sent (0: none)
	id, model           string
}

func planSimAnswer(req inkwell.ProviderRequest) simAnswer {
	prompt := req.SimPrompt()
	a := simAnswer{
		words:        Words(req.MaxWords),
		promptTokens: UsageOf(prompt, "").PromptTokens,
		maxTokens:    req.Chat.MaxOutputTokens,
		id:           simRequestID(req),
		// A copy: the model name must not keep the request's bytes alive.
		model: strings.Clone(cmp.Or(req.Chat.Model, "sim")),
	}
	a.seed1, a.seed2 = seed(prompt, a.words)
	return a
}

// Completion is the chat.completion object of an answer: one choice, its
// text as the assistant's message, finish_reason stop, and its usage. The
// simulators answer with it, so a stored answer has the form a real one
// has.
func Completion(id, model string, created int64, text string, u Usage) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"id":      id,
		"object":  "chat.completion",
		"created": created,
		"model":   model,
		"choices": []map[string]any{{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": text},
			"finish_reason": "stop",
		}},
		"usage": map[string]int{
			"prompt_tokens":     u.PromptTokens,
			"completion_tokens": u.CompletionTokens,
			"total_tokens":      u.TotalTokens(),
		},
	})
	return b
}

// Usage is an answer's token count as the chat-completions API reports it
// in "usage". Sim and the simulator count TokensPerWord tokens for each
// word of the prompt and of the answer, so that the limiter's correction
// and the simulator's tokens-per-minute limit see the same numbers.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
}

// TotalTokens is what the call used in all.
func (u Usage) TotalTokens() int { return u.PromptTokens + u.CompletionTokens }

// Within is u as an answer sent maxTokens reports it: a provider stops
// writing at max_tokens, and the simulators' words are two tokens each, so
// max_tokens 1 gets one whole word that counts as 1 (0: no bound).
func (u Usage) Within(maxTokens int) Usage {
	if maxTokens > 0 {
		u.CompletionTokens = min(u.CompletionTokens, maxTokens)
	}
	return u
}

// UsageOf counts the tokens of a prompt and of the text that answered it.
func UsageOf(prompt, text string) Usage {
	return Usage{
		PromptTokens:     len(strings.Fields(prompt)) * TokensPerWord,
		CompletionTokens: len(strings.Fields(text)) * TokensPerWord,
	}
}

func (s *Sim) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.Latency <= 0 {
		return nil
	}
	t := time.NewTimer(s.Latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// simRequestID is derived from the idempotency key, so a repeated call for
// a job names the same provider request, as a paid provider's record would.
// Without a key it falls back to the prompt, which keeps it deterministic.
func simRequestID(req inkwell.ProviderRequest) string {
	basis := "key\x00" + req.IdempotencyKey
	if req.IdempotencyKey == "" {
		basis = "prompt\x00" + req.SimPrompt()
	}
	sum := sha256.Sum256([]byte(basis))
	return "sim-" + hex.EncodeToString(sum[:8])
}

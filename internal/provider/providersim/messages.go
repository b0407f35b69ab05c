package providersim

// POST /v1/messages: Anthropic's Messages API, with the simulator's text,
// limits and failures in Anthropic's shapes. It honours no idempotency key,
// as Anthropic does not: every answered call is billed as its own entry.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/inkwell/inkwell/internal/provider"
)

// messagesRequest is the part of a Messages API request the simulator reads.
type messagesRequest struct {
	Model       string        `json:"model"`
	MaxTokens   *int          `json:"max_tokens"`
	Messages    []chatMessage `json:"messages"`
	Temperature *float64      `json:"temperature"`
	TopP        *float64      `json:"top_p"`

	prompt string // the last user message's text
}

// messages answers POST /v1/messages in the order completions does:
// validate, enforce the rate limits, inject failures, wait, then bill and
// answer. A refused, rate-limited, failed or hung call writes nothing.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	req, status, err := decodeMessages(w, r)
	if err != nil {
		writeAnthropicError(w, status, "invalid_request_error", err.Error())
		return
	}
	form := apiForm{
		writeError: writeAnthropicError, writeLimited: refusal.writeAnthropic,
		failStatus: 529, failType: "overloaded_error", failMessage: "Overloaded (injected failure: nothing was billed)",
	}
	key, words, text, ok := s.beforeBilling(w, r, form, req.prompt, *req.MaxTokens)
	if !ok {
		return
	}
	s.answerMessage(w, r, key, req, words, text)
}

// answerMessage bills the call as a new entry, whatever its key, then
// answers it.
func (s *Server) answerMessage(w http.ResponseWriter, r *http.Request, key string, req messagesRequest, words int, text string) {
	e := entry{
		RequestID:   newMessageID(),
		RequestHash: requestHash(req.prompt, words),
		Model:       req.Model,
		Text:        text,
		Amount:      provider.Price(text),
		SentKey:     sql.NullString{String: key, Valid: key != ""},
	}
	// Billed once the simulator decided to answer, as completions is.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	v := s.bills.submit(ctx, e, true, s.cfg.NowFunc())
	stored, err := v.stored, v.err
	if err != nil {
		s.log.ErrorContext(r.Context(), "bill", "key", key, "err", err)
		writeAnthropicError(w, http.StatusInternalServerError, "api_error", "ledger unavailable: nothing was billed")
		return
	}
	s.log.InfoContext(r.Context(), "message", "key", key, "request_id", stored.RequestID, "amount_micros", stored.Amount)
	writeJSON(w, http.StatusOK, message(stored, req.prompt, *req.MaxTokens))
}

// decodeMessages reads and checks a request as the Messages API does:
// anthropic-version, model, max_tokens (at least 1) and messages (at least
// one, user or assistant) are required.
func decodeMessages(w http.ResponseWriter, r *http.Request) (messagesRequest, int, error) {
	var req messagesRequest
	if r.Header.Get("anthropic-version") == "" {
		return req, http.StatusBadRequest, errors.New("anthropic-version: header is required")
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes)).Decode(&req); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return req, http.StatusRequestEntityTooLarge, errors.New("request body larger than 1 MiB")
		}
		return req, http.StatusBadRequest, errors.New("request body is not Messages API JSON")
	}
	switch {
	case req.Model == "":
		return req, http.StatusBadRequest, errors.New("model: Field required")
	case req.MaxTokens == nil:
		return req, http.StatusBadRequest, errors.New("max_tokens: Field required")
	case *req.MaxTokens < 1:
		return req, http.StatusBadRequest, errors.New("max_tokens: must be at least 1")
	case len(req.Messages) == 0:
		return req, http.StatusBadRequest, errors.New("messages: at least one message is required")
	}
	for name, v := range map[string]*float64{"temperature": req.Temperature, "top_p": req.TopP} {
		if v != nil && (*v < 0 || *v > 1) {
			return req, http.StatusBadRequest, fmt.Errorf("%s: Input should be less than or equal to 1", name)
		}
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return req, http.StatusBadRequest, fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if err := checkContent(m, i == len(req.Messages)-1); err != nil {
			return req, http.StatusBadRequest, fmt.Errorf("messages.%d: %w", i, err)
		}
	}
	req.prompt = lastUserText(req.Messages)
	return req, 0, nil
}

// checkContent refuses what the Messages API refuses in a message's
// content: null or an empty list (but for a final assistant turn), a text
// block of white space only, and a final assistant turn (a prefill) whose
// text ends in white space.
func checkContent(m chatMessage, last bool) error {
	prefill := last && m.Role == "assistant"
	if c := strings.TrimSpace(string(m.Content)); c == "" || c == "null" {
		return errors.New("content: Input should be a valid string or list")
	}
	var text string
	if json.Unmarshal(m.Content, &text) == nil {
		if prefill && text != strings.TrimRight(text, " \t\r\n") {
			return errors.New("final assistant content cannot end with trailing whitespace")
		}
		return nil
	}
	var blocks []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(m.Content, &blocks) != nil || blocks == nil {
		return errors.New("content: Input should be a valid string or list")
	}
	if len(blocks) == 0 && !prefill {
		return errors.New("all messages must have non-empty content except for the optional final assistant message")
	}
	for j, b := range blocks {
		if b.Type != "text" || b.Text == nil {
			continue
		}
		if strings.TrimSpace(*b.Text) == "" {
			return fmt.Errorf("content.%d: text content blocks must contain non-whitespace text", j)
		}
		if prefill && j == len(blocks)-1 && *b.Text != strings.TrimRight(*b.Text, " \t\r\n") {
			return errors.New("final assistant content cannot end with trailing whitespace")
		}
	}
	return nil
}

// newMessageID names a message. It is random: no key is honoured, so every
// call is its own billed request.
func newMessageID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "msg_sim" + hex.EncodeToString(b)
}

// message is the Messages API answer: one text block, end_turn, and the
// usage the simulator counts.
func message(e entry, prompt string, maxTokens int) map[string]any {
	u := provider.UsageOf(prompt, e.Text).Within(maxTokens)
	return map[string]any{
		"id":            e.RequestID,
		"type":          "message",
		"role":          "assistant",
		"model":         e.Model,
		"content":       []map[string]string{{"type": "text", "text": e.Text}},
		"stop_reason":   "end_turn",
		"stop_sequence": nil,
		"usage": map[string]int{
			"input_tokens":                u.PromptTokens,
			"output_tokens":               u.CompletionTokens,
			"cache_creation_input_tokens": 0,
			"cache_read_input_tokens":     0,
		},
	}
}

// writeAnthropic answers a refused call as Anthropic does: 429, retry-after,
// and a rate_limit_error.
func (r refusal) writeAnthropic(w http.ResponseWriter) {
	w.Header().Set("retry-after", r.retryAfterHeader())
	writeAnthropicError(w, http.StatusTooManyRequests, "rate_limit_error",
		fmt.Sprintf("Rate limit reached for %s per minute (limit %d): try again in %s; nothing was billed",
			r.limit, r.perMinute, r.retryAfter.Round(time.Millisecond)))
}

// writeAnthropicError answers in Anthropic's error shape, which its SDKs parse.
func writeAnthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

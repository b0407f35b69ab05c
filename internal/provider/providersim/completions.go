package providersim

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

const (
	maxRequestBytes = 1 << 20
	maxKeyBytes     = 1024
)

// completions answers POST /v1/chat/completions. The order is the point:
// validate, enforce the rate limits, inject failures, wait, then bill and
// commit, then answer. A refused, rate-limited, failed or hung call writes
// nothing.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	req, status, err := decodeChat(w, r)
	if err != nil {
		writeError(w, status, "invalid_request_error", err.Error())
		return
	}
	form := apiForm{
		writeError: writeError, writeLimited: refusal.write,
		failStatus: http.StatusInternalServerError, failType: "server_error", failMessage: "injected failure: nothing was billed",
	}
	key, words, text, ok := s.beforeBilling(w, r, form, req.prompt, req.maxTokens())
	if !ok {
		return
	}
	s.answer(w, r, key, req, words, text)
}

// apiForm is how one simulated API words what the simulator refuses: its
// error shape, its rate-limit answer and its injected failure.
type apiForm struct {
	writeError   func(w http.ResponseWriter, status int, typ, msg string)
	writeLimited func(no refusal, w http.ResponseWriter)
	failStatus   int
	failType     string
	failMessage  string
}

// beforeBilling takes a call's steps before the bill, in the order both APIs
// share: the key's length, the rate limits, an injected failure or hang, the
// latency. It returns false when the call was answered (nothing billed).
func (s *Server) beforeBilling(w http.ResponseWriter, r *http.Request, form apiForm, prompt string, maxTokens int) (key string, words int, text string, ok bool) {
	key = r.Header.Get("Idempotency-Key")
	if len(key) > maxKeyBytes {
		form.writeError(w, http.StatusBadRequest, "invalid_request_error", "Idempotency-Key longer than 1024 bytes")
		return key, 0, "", false
	}
	words = provider.WordsForMaxTokens(maxTokens)
	text = provider.Generate(prompt, words)
	if no, ok := s.limits.admit(s.cfg.NowFunc(), provider.UsageOf(prompt, text).Within(maxTokens).TotalTokens()); !ok {
		s.log.InfoContext(r.Context(), "rate limited", "key", key, "limit", no.limit, "retry_after", no.retryAfterHeader())
		form.writeLimited(no, w)
		return key, words, text, false
	}
	switch s.decide() {
	case fail:
		s.log.InfoContext(r.Context(), "injected failure", "key", key)
		// As OpenAI and Anthropic say of their own 5xx and 529: the same
		// call may succeed if sent again.
		w.Header().Set("X-Should-Retry", "true")
		form.writeError(w, form.failStatus, form.failType, form.failMessage)
		return key, words, text, false
	case hang:
		s.log.InfoContext(r.Context(), "injected hang", "key", key)
		s.hold(r, 0)
		return key, words, text, false
	}
	if s.cfg.Latency > 0 && !s.hold(r, s.cfg.Latency) {
		return key, words, text, false // the client left while we were "generating": not billed
	}
	return key, words, text, true
}

// hold waits d (forever when 0) and reports whether it waited it out. It
// ends early when the client leaves, and aborts the connection when the
// server stops, as a dying provider would.
func (s *Server) hold(r *http.Request, d time.Duration) bool {
	var elapsed <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		elapsed = t.C
	}
	select {
	case <-elapsed:
		return true
	case <-r.Context().Done():
		return false
	case <-s.stopping:
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, key string, req chatRequest, words int, text string) {
	e := entry{
		RequestID:   newRequestID(key),
		RequestHash: requestHash(req.prompt, words),
		Model:       cmp.Or(req.Model, "providersim"),
		Text:        text,
		Amount:      provider.Price(text),
	}
	if key != "" {
		e.Key = sql.NullString{String: key, Valid: true}
	}
	// The provider bills once it has decided to answer, whether or not the
	// client is still there to read it: that is the window idempotency covers.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	// Answered only once the group holding the bill has committed.
	v := s.bills.submit(ctx, e, false, s.cfg.NowFunc())
	stored, billed, err := v.stored, v.billed, v.err
	switch {
	case errors.Is(err, errKeyReused):
		writeError(w, http.StatusUnprocessableEntity, "idempotency_error", err.Error())
		return
	case err != nil:
		s.log.ErrorContext(r.Context(), "bill", "key", key, "err", err)
		writeError(w, http.StatusInternalServerError, "server_error", "ledger unavailable: nothing was billed")
		return
	}
	s.log.InfoContext(r.Context(), "chat completion", "key", key, "request_id", stored.RequestID,
		"billed", billed, "calls", stored.Calls, "amount_micros", stored.Amount)
	writeJSON(w, http.StatusOK, completion(stored, req.prompt, req.maxTokens()))
}

// newRequestID names a completion. With a key it derives from the key, so
// the id survives even a lost ledger; without one it is random, because
// every keyless call is its own billed request, across restarts too.
func newRequestID(key string) string {
	if key == "" {
		b := make([]byte, 12)
		rand.Read(b)
		return "simcmpl-n" + hex.EncodeToString(b)
	}
	sum := sha256.Sum256([]byte(key))
	return "simcmpl-k" + hex.EncodeToString(sum[:12])
}

func requestHash(prompt string, words int) string {
	sum := sha256.Sum256([]byte(strconv.Itoa(words) + "\x00" + prompt))
	return hex.EncodeToString(sum[:])
}

type chatRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	MaxTokens           int           `json:"max_tokens"`
	MaxCompletionTokens int           `json:"max_completion_tokens"`

	prompt string // the last user message
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// maxTokens accepts both names OpenAI has used for the limit.
func (c chatRequest) maxTokens() int {
	if c.MaxCompletionTokens > 0 {
		return c.MaxCompletionTokens
	}
	return c.MaxTokens
}

func decodeChat(w http.ResponseWriter, r *http.Request) (chatRequest, int, error) {
	var req chatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes)).Decode(&req); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return req, http.StatusRequestEntityTooLarge, errors.New("request body larger than 1 MiB")
		}
		return req, http.StatusBadRequest, errors.New("request body is not chat-completion JSON")
	}
	req.prompt = lastUserText(req.Messages)
	if strings.TrimSpace(req.prompt) == "" {
		return req, http.StatusBadRequest, errors.New("messages need a user message with text content")
	}
	return req, 0, nil
}

// lastUserText is the text of the latest user message that has some: what
// both the chat and the messages forms write from.
func lastUserText(msgs []chatMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			if t := (inkwell.ChatMessage{Content: msgs[i].Content}).Text(); t != "" {
				return t
			}
		}
	}
	return ""
}

// completion is the OpenAI chat.completion object, with its usage, plus
// inkwell_amount_micros: exactly what this answer was billed.
func completion(e entry, prompt string, maxTokens int) map[string]any {
	u := provider.UsageOf(prompt, e.Text).Within(maxTokens)
	return map[string]any{
		"id":      e.RequestID,
		"object":  "chat.completion",
		"created": e.Created,
		"model":   e.Model,
		"choices": []map[string]any{{
			"index":         0,
			"message":       map[string]string{"role": "assistant", "content": e.Text},
			"finish_reason": "stop",
		}},
		"usage": map[string]int{
			"prompt_tokens":     u.PromptTokens,
			"completion_tokens": u.CompletionTokens,
			"total_tokens":      u.TotalTokens(),
		},
		"inkwell_amount_micros": e.Amount,
	}
}

func (s *Server) ledger(w http.ResponseWriter, r *http.Request) {
	l, err := readLedger(r.Context(), s.db)
	if err != nil {
		s.log.ErrorContext(r.Context(), "read ledger", "err", err)
		writeError(w, http.StatusInternalServerError, "server_error", "ledger unavailable")
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError answers in OpenAI's error shape, which clients already parse.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"message": msg, "type": typ}})
}

package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/inkwell/inkwell"
)

// Defaults of OpenAIConfig.
const (
	DefaultTimeout = 60 * time.Second
	DefaultModel   = "gpt-4o-mini"
)

// maxAnswerBytes bounds what one answer may make us read.
const maxAnswerBytes = 4 << 20

// OpenAIConfig configures an OpenAI provider.
type OpenAIConfig struct {
	// URL is the server's base URL, with or without a trailing /v1:
	// "https://api.openai.com" and "http://127.0.0.1:9090/v1/" both work.
	URL string
	// Model is sent as "model"; DefaultModel when empty.
	Model string
	// APIKey is sent as "Authorization: Bearer". It is never logged and
	// never appears in an error, even when a server echoes it back.
	APIKey string
	// Timeout bounds one call, answer body included; DefaultTimeout when zero.
	Timeout time.Duration
	// MicrosPerToken, when set, prices an answer that carries usage but no
	// inkwell_amount_micros: total_tokens * MicrosPerToken.
	MicrosPerToken int64
	// LimitField is the one name the output limit is sent under:
	// "max_tokens" for an API that refuses max_completion_tokens (Mistral,
	// Azure's older API versions); "" sends the limit as the client named
	// it, and max_completion_tokens when it named none.
	LimitField string
	// Client sends the request; a client on http.DefaultTransport when nil.
	// Its CheckRedirect is replaced (on a copy): a redirect is never
	// followed, so that a call is one request and never a second POST or
	// GET elsewhere. A Transport that makes the request replayable again
	// (gives it a GetBody) can still resend it; OnResend counts that.
	Client *http.Client
	// Logger receives a warning, with the job's provider key, for each
	// time the transport sends one call again (see OnResend);
	// slog.Default() when nil.
	Logger *slog.Logger
	// OnResend, when set, is called once for each connection the HTTP
	// transport obtains for one call after the first: a request the
	// provider may have received (and billed) twice. cmd/inkwell counts
	// them in inkwell_provider_http_resends_total.
	OnResend func()
	// NowFunc is the clock a Retry-After given as an HTTP date is read
	// against; time.Now when nil.
	NowFunc func() time.Time
}

// OpenAI is the provider that speaks the OpenAI-compatible chat-completions
// API. Each Generate makes at most one HTTP request (transport.go says how,
// and how a resend would still be seen).
type OpenAI struct {
	cfg      OpenAIConfig
	client   *http.Client
	endpoint string
}

var _ inkwell.Provider = (*OpenAI)(nil)

// NewOpenAI checks cfg and fills in its defaults.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	endpoint, err := endpointURL(cfg.URL, "/v1/chat/completions")
	if err != nil {
		return nil, err
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.LimitField != "" && cfg.LimitField != "max_tokens" && cfg.LimitField != "max_completion_tokens" {
		return nil, inkwell.Errorf(inkwell.EINVALID, "output limit field %q: want max_tokens or max_completion_tokens", cfg.LimitField)
	}
	fillCallDefaults(&cfg.Timeout, &cfg.Logger, &cfg.NowFunc)
	return &OpenAI{cfg: cfg, client: noRedirects(cfg.Client), endpoint: endpoint}, nil
}

// Endpoint is the chat-completions URL each call is sent to.
func (p *OpenAI) Endpoint() string { return p.endpoint }

// Model is the model name sent with each call.
func (p *OpenAI) Model() string { return p.cfg.Model }

// Timeout bounds each call.
func (p *OpenAI) Timeout() time.Duration { return p.cfg.Timeout }

// Generate sends one chat completion with req.IdempotencyKey as the
// Idempotency-Key header (omitted when empty) and MaxWords as max_tokens
// (see TokensPerWord). Every failure is a *CallError; a 429's carries its
// Retry-After. The answer's usage.total_tokens becomes TokensUsed. It sends
// at most one HTTP request, and never follows a redirect (transport.go).
func (p *OpenAI) Generate(ctx context.Context, req inkwell.ProviderRequest) (inkwell.ProviderResponse, error) {
	callCtx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	callCtx, trace := p.trace(callCtx, req.IdempotencyKey)
	httpReq, err := p.newRequest(callCtx, req)
	if err != nil {
		return inkwell.ProviderResponse{}, err
	}
	res, body, err := send(ctx, p.client, httpReq, trace, p.scrub)
	if err != nil {
		return inkwell.ProviderResponse{}, err
	}
	if res.StatusCode >= 300 && res.StatusCode <= 399 {
		return inkwell.ProviderResponse{}, p.redirected(res)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		e := statusError(res.StatusCode, p.errorText(body), res.Header, p.cfg.NowFunc())
		if e.Class == ClassRateLimited && quotaSpent(body) {
			// OpenAI's 429 for an account whose credit is spent: no wait
			// helps until someone pays, so it is a refusal (rejected: not
			// retried automatically, no pause of the provider's calls),
			// retried by hand once the account is paid for.
			e.Class, e.RetryAfter, e.ShouldRetry = ClassClient, 0, ""
			e.Msg = "insufficient_quota, the provider account's credit is spent (waiting does not help; pay, then retry): " + e.Msg
		}
		return inkwell.ProviderResponse{}, e
	}
	if len(body) > maxAnswerBytes {
		return inkwell.ProviderResponse{}, malformed(res.StatusCode, "answer larger than %d bytes", maxAnswerBytes)
	}
	return p.parse(res.StatusCode, res.Header, body)
}

func (p *OpenAI) newRequest(ctx context.Context, req inkwell.ProviderRequest) (*http.Request, error) {
	body, err := json.Marshal(p.chatBody(req.ChatOf()))
	if err != nil {
		return nil, fmt.Errorf("encode chat request: %w", err)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, nil)
	if err != nil {
		return nil, fmt.Errorf("build chat request: %w", err)
	}
	sendOnce(r, body)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json")
	if p.cfg.APIKey != "" {
		r.Header.Set("Authorization", "Bearer "+p.cfg.APIKey)
	}
	if req.IdempotencyKey != "" {
		r.Header.Set("Idempotency-Key", req.IdempotencyKey)
	}
	return r, nil
}

// chatBody is what is sent: the request's fields as the client sent them
// (fields Inkwell does not know included), the model under its upstream
// name (the configured Model when the request has none), and when the
// request names no output limit, max_completion_tokens at the bound in
// force, so that what a call may cost is bounded (docs/providers.md).
func (p *OpenAI) chatBody(c inkwell.ChatRequest) map[string]json.RawMessage {
	body := make(map[string]json.RawMessage, len(c.Fields)+2)
	for k, v := range c.Fields {
		body[k] = v
	}
	model := c.Model
	if model == "" {
		model = p.cfg.Model
	}
	body["model"], _ = json.Marshal(model)
	for _, limit := range []string{"max_tokens", "max_completion_tokens"} {
		if v, ok := body[limit]; ok && string(bytes.TrimSpace(v)) == "null" {
			delete(body, limit) // a null limit names none: the bound goes out instead
		}
	}
	if p.cfg.LimitField != "" {
		// One name only, the API's: the bound in force under it, the
		// client's own limit included (it is c.MaxOutputTokens then).
		delete(body, "max_tokens")
		delete(body, "max_completion_tokens")
		if c.MaxOutputTokens > 0 {
			body[p.cfg.LimitField], _ = json.Marshal(c.MaxOutputTokens)
		}
		return body
	}
	_, hasMax := body["max_tokens"]
	_, hasMaxCompletion := body["max_completion_tokens"]
	if !hasMax && !hasMaxCompletion && c.MaxOutputTokens > 0 {
		body["max_completion_tokens"], _ = json.Marshal(c.MaxOutputTokens)
	}
	return body
}

// redirected is the error for a 3xx answer, which is never followed.
func (p *OpenAI) redirected(res *http.Response) *CallError {
	return redirectError(res.StatusCode, p.scrub(res.Header.Get("Location")))
}

// chatResponse is the part of an answer we read. InkwellAmountMicros is the
// simulator's extension: what it billed, exactly.
type chatResponse struct {
	ID      string `json:"id"`
	Choices []struct {
		Message struct {
			Content   answerContent   `json:"content"`
			Refusal   *string         `json:"refusal"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	// Usage's two counts are pointers: a usage without them (an empty
	// object, total_tokens alone, a null count) reports no usage, and is
	// charged at its bound rather than as zero tokens.
	Usage *struct {
		PromptTokens     *int64 `json:"prompt_tokens"`
		CompletionTokens *int64 `json:"completion_tokens"`
		TotalTokens      int64  `json:"total_tokens"`
	} `json:"usage"`
	InkwellAmountMicros *int64 `json:"inkwell_amount_micros"`
}

// answerText is the first choice's text: its content; for an answer that
// only calls tools, "" (the calls are in the response); for a refusal,
// the refusal. ok is false when it has none of these and reports no
// usage: an empty answer that says what it billed is an answer (a
// reasoning model that spent max_completion_tokens thinking answers
// content "" with finish_reason "length"), one that does not is not.
func (cr chatResponse) answerText() (text string, ok bool) {
	m := cr.Choices[0].Message
	switch {
	case m.Content.text != nil && strings.TrimSpace(*m.Content.text) != "":
		return *m.Content.text, true
	case len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" && string(m.ToolCalls) != "[]":
		return "", true
	case m.Refusal != nil && strings.TrimSpace(*m.Refusal) != "":
		return *m.Refusal, true
	case cr.counted() && m.Content.text != nil:
		return *m.Content.text, true // "", or white space, as sent
	case cr.counted():
		return "", true // content null or absent
	}
	return "", false
}

// answerContent is a message's content as OpenAI-compatible providers
// send it: a string, null, or (Mistral's reasoning models, and others) an
// array of chunks, of which the "text" ones are the answer and the rest
// (a "thinking" chunk) are not. text is nil for null or absent.
type answerContent struct{ text *string }

func (c *answerContent) UnmarshalJSON(b []byte) error {
	switch b = bytes.TrimSpace(b); {
	case string(b) == "null":
		c.text = nil
		return nil
	case len(b) > 0 && b[0] == '[':
		var chunks []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(b, &chunks); err != nil {
			return err
		}
		var text strings.Builder
		for _, ch := range chunks {
			if ch.Type == "text" && ch.Text != nil {
				text.WriteString(*ch.Text)
			}
		}
		s := text.String()
		c.text = &s
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	c.text = &s
	return nil
}

// counted says the answer reports its usage: both counts present.
func (cr chatResponse) counted() bool {
	return cr.Usage != nil && cr.Usage.PromptTokens != nil && cr.Usage.CompletionTokens != nil
}

func (p *OpenAI) parse(status int, header http.Header, body []byte) (inkwell.ProviderResponse, error) {
	var cr chatResponse
	if err := json.Unmarshal(body, &cr); err != nil {
		return inkwell.ProviderResponse{}, malformed(status, "answer is not chat-completion JSON: %s", p.scrub(err.Error()))
	}
	if len(cr.Choices) == 0 {
		return inkwell.ProviderResponse{}, malformed(status, "answer has no choices")
	}
	text, ok := cr.answerText()
	if !ok {
		return inkwell.ProviderResponse{}, malformed(status, "answer has empty content and no usage")
	}
	// The charge names the request it paid for by the answer's id, else
	// the request id the provider's headers gave, else none: an answer
	// without an id (Gemini's OpenAI-compatible endpoint sent none for
	// months) is still a paid answer, and is kept.
	requestID := cr.ID
	if requestID == "" {
		requestID = p.scrub(strings.TrimSpace(header.Get("X-Request-Id")))
	}
	resp := inkwell.ProviderResponse{Text: text, RequestID: requestID, AmountMicros: p.amount(cr, text), TokensUsed: tokensUsed(cr),
		FinishReason: cr.Choices[0].FinishReason, Response: compactJSON(body)}
	if u := cr.Usage; cr.counted() {
		resp.Usage, resp.PromptTokens, resp.CompletionTokens = true, *u.PromptTokens, *u.CompletionTokens
		if in, out := *u.PromptTokens, *u.CompletionTokens; in >= 0 && out >= 0 && in <= math.MaxInt64-out && u.TotalTokens > in+out {
			// Tokens the total counts and the two counts do not: a thinking
			// model's thoughts, which Gemini leaves out of
			// completion_tokens and bills as output all the same. Charged
			// as output, so that what the provider billed is charged.
			// (Gemini's total counts a tool's prompt tokens too, which are
			// then charged at the output price; never past the reservation.)
			resp.CompletionTokens = u.TotalTokens - in
		}
	}
	if err := storable(resp); err != nil {
		return inkwell.ProviderResponse{}, malformed(status, "%s", err)
	}
	return resp, nil
}

// compactJSON is a JSON answer without its white space (as received
// otherwise), to store.
func compactJSON(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return json.RawMessage(b)
	}
	return buf.Bytes()
}

// maxRequestIDBytes bounds the provider's request id we store on a charge.
const maxRequestIDBytes = 255

// MaxAmountMicros bounds what one answer may bill: a million currency
// units. No writing request costs that, and an account's sums of charges
// (spent_micros) stay far inside int64 however many are stored: an amount
// near the int64 limit made SQLite turn the sum into a float, which broke
// every read of the accounts, and PostgreSQL refuse the settle.
const MaxAmountMicros = inkwell.MaxChargeMicros

// storable refuses an answer the database could not store, so that it
// becomes a failed attempt with a clear error instead of a completion that
// fails to commit (PostgreSQL refuses NUL and invalid UTF-8 in text; the
// charge refuses a negative amount).
func storable(r inkwell.ProviderResponse) error {
	switch {
	case !utf8.ValidString(r.Text) || strings.ContainsRune(r.Text, 0):
		return fmt.Errorf("answer text is not valid UTF-8 or holds NUL")
	case !utf8.ValidString(r.RequestID) || strings.ContainsRune(r.RequestID, 0) || len(r.RequestID) > maxRequestIDBytes:
		return fmt.Errorf("answer id is not a short UTF-8 string")
	case !utf8.Valid(r.Response) || len(r.FinishReason) > 64 || !utf8.ValidString(r.FinishReason):
		return fmt.Errorf("answer is not valid UTF-8")
	case r.Usage && (r.PromptTokens < 0 || r.CompletionTokens < 0):
		return fmt.Errorf("answer reports a negative usage")
	case r.AmountMicros < 0:
		return fmt.Errorf("answer bills a negative amount (%d micros)", r.AmountMicros)
	case r.AmountMicros > MaxAmountMicros:
		return fmt.Errorf("answer bills an impossible amount (%d micros, more than %d)", r.AmountMicros, int64(MaxAmountMicros))
	}
	return nil
}

// amount prefers what the provider says it billed, then its token count
// at the configured price, then our own word price.
func (p *OpenAI) amount(cr chatResponse, text string) int64 {
	switch {
	case cr.InkwellAmountMicros != nil:
		return *cr.InkwellAmountMicros
	case cr.Usage != nil && p.cfg.MicrosPerToken > 0:
		if t := cr.Usage.TotalTokens; t < 0 || t > MaxAmountMicros/p.cfg.MicrosPerToken {
			return MaxAmountMicros + 1 // impossible (the product could wrap): storable refuses it
		}
		return cr.Usage.TotalTokens * p.cfg.MicrosPerToken
	default:
		return Price(text)
	}
}

// tokensUsed is the answer's usage.total_tokens; 0 (unknown) when it has
// none or an impossible one.
func tokensUsed(cr chatResponse) int {
	if cr.Usage == nil || cr.Usage.TotalTokens <= 0 || cr.Usage.TotalTokens > math.MaxInt32 {
		return 0
	}
	return int(cr.Usage.TotalTokens)
}

// errorText is what a refusal said: the OpenAI {"error":{"message"}} when
// present, else the start of the body.
func (p *OpenAI) errorText(body []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && len(e.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		var str string
		switch {
		case json.Unmarshal(e.Error, &obj) == nil && obj.Message != "":
			body = []byte(obj.Message)
		case json.Unmarshal(e.Error, &str) == nil && str != "":
			body = []byte(str)
		}
	}
	return oneLine(p.scrub(string(body)))
}

// quotaSpent says an error answer is OpenAI's insufficient_quota: its
// error's code or type names it.
func quotaSpent(body []byte) bool {
	var e struct {
		Error struct {
			Code any    `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return false
	}
	code, _ := e.Error.Code.(string)
	return code == "insufficient_quota" || e.Error.Type == "insufficient_quota"
}

// scrub removes the API key from anything a server or the transport said,
// before it can reach an error, a log line or a database column.
func (p *OpenAI) scrub(s string) string {
	if p.cfg.APIKey == "" {
		return s
	}
	return strings.ReplaceAll(s, p.cfg.APIKey, "[redacted]")
}

// retryAfter reads a Retry-After header (RFC 9110 §10.2.3): a number of
// seconds, or an HTTP date, which is read against now. 0 when there is
// none, it cannot be read, or it is already past.
//
// A retry-after-ms header (milliseconds; Azure OpenAI sends it, and the
// official SDKs read it before Retry-After) wins when it can be read.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(strings.TrimSpace(h.Get("Retry-After-Ms")), 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
		return time.Duration(min(ms, float64(maxRetryAfterSecs)*1000) * float64(time.Millisecond))
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, maxRetryAfterSecs)) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil || !at.After(now) {
		return 0
	}
	return at.Sub(now)
}

// maxRetryAfterSecs keeps a huge Retry-After from overflowing a Duration;
// the limiter bounds a pause far below it.
const maxRetryAfterSecs = 1 << 32

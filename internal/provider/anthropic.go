package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
)

// Defaults of AnthropicConfig.
const (
	DefaultAnthropicVersion = "2023-06-01"
	DefaultAnthropicModel   = "claude-haiku-4-5"
	// defaultAnthropicMaxTokens is max_tokens when no bound is in force:
	// the Messages API requires one.
	defaultAnthropicMaxTokens = 4096
)

// AnthropicConfig configures an Anthropic provider.
type AnthropicConfig struct {
	// URL is the API's base URL, with or without a trailing /v1:
	// "https://api.anthropic.com" or a simulator's "http://127.0.0.1:9090".
	URL string
	// APIKey is sent as "x-api-key". It is never logged and never appears
	// in an error, even when a server echoes it back.
	APIKey string
	// Version is sent as "anthropic-version"; DefaultAnthropicVersion when empty.
	Version string
	// Model is sent when the request names none; DefaultAnthropicModel when empty.
	Model string
	// Timeout bounds one call, answer body included; DefaultTimeout when zero.
	Timeout time.Duration
	// Client sends the request, as OpenAIConfig.Client: its redirects are
	// never followed, and a resend by its transport is counted.
	Client *http.Client
	// Logger receives a warning for each resend (see OnResend);
	// slog.Default() when nil.
	Logger *slog.Logger
	// OnResend, when set, is called once for each connection the HTTP
	// transport obtains for one call after the first.
	OnResend func()
	// NowFunc is the clock of a Retry-After given as a date, and of the
	// mapped answer's "created"; time.Now when nil.
	NowFunc func() time.Time
}

// Anthropic is the provider that speaks Anthropic's Messages API
// (POST /v1/messages), mapping the chat form to it and its answer back to
// a chat.completion. Anthropic honours NO idempotency key: the job's key is
// sent as Idempotency-Key all the same (it is harmless, and the simulator
// records it), but a second call bills again. So an ambiguous call (a
// timeout, a reset after sending) must never be retried automatically; the
// config refuses honours_keys for anthropic. Each Generate makes at most
// one HTTP request (transport.go).
type Anthropic struct {
	cfg      AnthropicConfig
	client   *http.Client
	endpoint string
}

var _ inkwell.Provider = (*Anthropic)(nil)

// NewAnthropic checks cfg and fills in its defaults.
func NewAnthropic(cfg AnthropicConfig) (*Anthropic, error) {
	endpoint, err := endpointURL(cfg.URL, "/v1/messages")
	if err != nil {
		return nil, err
	}
	if cfg.Version == "" {
		cfg.Version = DefaultAnthropicVersion
	}
	if cfg.Model == "" {
		cfg.Model = DefaultAnthropicModel
	}
	fillCallDefaults(&cfg.Timeout, &cfg.Logger, &cfg.NowFunc)
	return &Anthropic{cfg: cfg, client: noRedirects(cfg.Client), endpoint: endpoint}, nil
}

// Endpoint is the messages URL each call is sent to.
func (p *Anthropic) Endpoint() string { return p.endpoint }

// Timeout bounds each call.
func (p *Anthropic) Timeout() time.Duration { return p.cfg.Timeout }

// Generate sends the request as one Messages API call and maps the answer
// to a chat.completion. Every failure is a *CallError: a 429's carries its
// retry-after, 529 (overloaded) is a server error, and a request that
// cannot be mapped is rejected before anything is sent.
func (p *Anthropic) Generate(ctx context.Context, req inkwell.ProviderRequest) (inkwell.ProviderResponse, error) {
	body, err := p.messagesBody(req.ChatOf())
	if err != nil {
		return inkwell.ProviderResponse{}, err
	}
	callCtx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	callCtx, trace := traceCall(callCtx, req.IdempotencyKey, resendSink{logger: p.cfg.Logger, onResend: p.cfg.OnResend, scrub: p.scrub})
	httpReq, err := p.newRequest(callCtx, req.IdempotencyKey, body)
	if err != nil {
		return inkwell.ProviderResponse{}, err
	}
	res, answer, err := send(ctx, p.client, httpReq, trace, p.scrub)
	if err != nil {
		return inkwell.ProviderResponse{}, err
	}
	if err := p.statusError(res, answer); err != nil {
		return inkwell.ProviderResponse{}, err
	}
	return p.parse(res.StatusCode, answer)
}

// messagesBody is the JSON sent: the chat request mapped to the Messages
// API (anthropic_request.go).
func (p *Anthropic) messagesBody(c inkwell.ChatRequest) ([]byte, error) {
	mr, err := toMessages(c)
	if err != nil {
		return nil, err
	}
	if mr.Model == "" {
		mr.Model = p.cfg.Model
	}
	body, err := json.Marshal(mr)
	if err != nil {
		return nil, fmt.Errorf("encode messages request: %w", err)
	}
	return body, nil
}

func (p *Anthropic) newRequest(ctx context.Context, key string, body []byte) (*http.Request, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, nil)
	if err != nil {
		return nil, fmt.Errorf("build messages request: %w", err)
	}
	sendOnce(r, body)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json")
	r.Header.Set("anthropic-version", p.cfg.Version)
	if p.cfg.APIKey != "" {
		r.Header.Set("x-api-key", p.cfg.APIKey)
	}
	if key != "" {
		r.Header.Set("Idempotency-Key", key) // not honoured upstream: see Anthropic
	}
	return r, nil
}

// statusError is the error of an answer that is not a 2xx, or one too
// large to read; nil otherwise.
func (p *Anthropic) statusError(res *http.Response, body []byte) *CallError {
	switch {
	case res.StatusCode >= 300 && res.StatusCode <= 399:
		return redirectError(res.StatusCode, p.scrub(res.Header.Get("Location")))
	case res.StatusCode < 200 || res.StatusCode > 299:
		return statusError(res.StatusCode, p.errorText(body), res.Header, p.cfg.NowFunc())
	case len(body) > maxAnswerBytes:
		return malformed(res.StatusCode, "answer larger than %d bytes", maxAnswerBytes)
	}
	return nil
}

// errorText is what a refusal said: Anthropic's
// {"type":"error","error":{"type","message"}} as "type: message" when
// present, else the start of the body.
func (p *Anthropic) errorText(body []byte) string {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		text := e.Error.Message
		if e.Error.Type != "" {
			text = e.Error.Type + ": " + text
		}
		body = []byte(text)
	}
	return oneLine(p.scrub(string(body)))
}

// scrub removes the API key from anything a server or the transport said,
// before it can reach an error, a log line or a database column.
func (p *Anthropic) scrub(s string) string {
	if p.cfg.APIKey == "" {
		return s
	}
	return strings.ReplaceAll(s, p.cfg.APIKey, "[redacted]")
}

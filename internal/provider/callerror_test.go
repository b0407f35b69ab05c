package provider_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
)

// TestOpenAI_FailureClasses produces every failure class for real: the
// simulator for timeouts and 5xx, a closed port for refusal, and small fake
// servers on loopback for what the simulator never says.
func TestOpenAI_FailureClasses(t *testing.T) {
	t.Parallel()
	type setup struct {
		url      string
		timeout  time.Duration
		ctx      context.Context
		requests *atomic.Int64 // how many requests the server got, when it counts
		sim      *simtest.Sim  // the simulator, when it is one: nothing may be billed
	}
	background := context.Background()
	canceled, cancel := context.WithCancel(background)
	cancel()
	simSetup := func(t *testing.T, cfg providersim.Config, timeout time.Duration) setup {
		sim := simtest.MustStart(t, cfg)
		return setup{url: sim.URL, timeout: timeout, ctx: background, sim: sim}
	}
	fakeSetup := func(status int, body string, header map[string]string) func(t *testing.T) setup {
		return func(t *testing.T) setup {
			url, n := fakeAnswer(t, status, body, header)
			return setup{url: url, timeout: 10 * time.Second, ctx: background, requests: n}
		}
	}
	tests := []struct {
		name       string
		setup      func(t *testing.T) setup
		wantClass  string
		wantStatus int
	}{
		{"TimeoutSlowSimulator", func(t *testing.T) setup {
			return simSetup(t, providersim.Config{Latency: time.Hour}, 100*time.Millisecond)
		}, provider.ClassTimeout, 0},
		{"TimeoutHungSimulator", func(t *testing.T) setup {
			return simSetup(t, providersim.Config{HangRate: 1}, 100*time.Millisecond)
		}, provider.ClassTimeout, 0},
		{"ConnectionRefused", func(t *testing.T) setup {
			return setup{url: "http://" + closedAddr(t), timeout: 10 * time.Second, ctx: background}
		}, provider.ClassConnRefused, 0},
		{"ServerErrorSimulator", func(t *testing.T) setup {
			return simSetup(t, providersim.Config{FailRate: 1}, 10*time.Second)
		}, provider.ClassServer, 500},
		{"ServerError503", fakeSetup(503, `{"error":{"message":"overloaded"}}`, nil), provider.ClassServer, 503},
		{"RateLimited", fakeSetup(429, `{"error":{"message":"slow down"}}`, map[string]string{"Retry-After": "7"}), provider.ClassRateLimited, 429},
		{"ClientErrorEchoesKey", fakeSetup(401, `{"error":{"message":"bad key AUTH"}}`, nil), provider.ClassClient, 401},
		{"ClientErrorPlainText", fakeSetup(400, "you sent AUTH and that is wrong", nil), provider.ClassClient, 400},
		{"MalformedNotJSON", fakeSetup(200, "<html>AUTH</html>", nil), provider.ClassMalformed, 200},
		{"MalformedNoChoices", fakeSetup(200, `{"id":"r","choices":[]}`, nil), provider.ClassMalformed, 200},
		{"MalformedNullContent", fakeSetup(200, `{"id":"r","choices":[{"message":{"content":null}}]}`, nil), provider.ClassMalformed, 200},
		{"MalformedEmptyContent", fakeSetup(200, `{"id":"r","choices":[{"message":{"content":"  "}}]}`, nil), provider.ClassMalformed, 200},
		// An answer without an id is kept (TestOpenAI_GeminiAnswerWithoutIDIsKept).
		{"ServerError524", fakeSetup(524, "<html>524: A timeout occurred</html>", nil), provider.ClassServer, 524},
		{"InsufficientQuotaIsARefusal", fakeSetup(429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, nil), provider.ClassClient, 429},
		// An amount past any real bill, that the books could not sum.
		{"MalformedImpossibleAmount", fakeSetup(200, `{"id":"r","choices":[{"message":{"content":"words"}}],"inkwell_amount_micros":5000000000000000000}`, nil), provider.ClassMalformed, 200},
		{"RedirectNotFollowed", fakeSetup(307, "", map[string]string{"Location": "/elsewhere"}), provider.ClassMalformed, 307},
		{"Canceled", func(t *testing.T) setup {
			s := simSetup(t, providersim.Config{}, 10*time.Second)
			s.ctx = canceled
			return s
		}, provider.ClassCanceled, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := tt.setup(t)
			p := mustOpenAI(t, s.url, s.timeout)

			_, err := p.Generate(s.ctx, inkwell.ProviderRequest{IdempotencyKey: "job-1", Prompt: "p", MaxWords: 5})

			ce, ok := provider.AsCallError(err)
			if !ok {
				t.Fatalf("Generate error = %v (%T), want a *CallError", err, err)
			}
			if ce.Class != tt.wantClass || ce.Status != tt.wantStatus {
				t.Errorf("class, status = %q, %d; want %q, %d (%v)", ce.Class, ce.Status, tt.wantClass, tt.wantStatus, err)
			}
			if !strings.Contains(err.Error(), tt.wantClass) {
				t.Errorf("error %q does not name its class %q", err, tt.wantClass)
			}
			if strings.Contains(err.Error(), apiKey) || strings.Contains(ce.Msg, apiKey) {
				t.Errorf("error %q contains the API key", err)
			}
			if s.requests != nil && s.requests.Load() != 1 {
				t.Errorf("server got %d requests, want exactly 1 (no retry inside a call)", s.requests.Load())
			}
			if s.sim != nil && s.sim.MustLedger(t).TotalBills != 0 {
				t.Errorf("ledger = %+v, want nothing billed for a failed call", s.sim.MustLedger(t))
			}
		})
	}
}

func TestOpenAI_RateLimitedRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name, header string
		want         time.Duration
	}{
		{"Seconds", "7", 7 * time.Second},
		{"HTTPDate", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"HTTPDatePast", now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"Zero", "0", 0},
		{"Negative", "-3", 0},
		{"Unreadable", "soon", 0},
		{"Absent", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			header := map[string]string{}
			if tt.header != "" {
				header["Retry-After"] = tt.header
			}
			url, _ := fakeAnswer(t, http.StatusTooManyRequests, `{"error":"slow"}`, header)
			p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: url, NowFunc: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Generate(context.Background(), inkwell.ProviderRequest{Prompt: "p"})
			ce, ok := provider.AsCallError(err)
			if !ok || ce.RetryAfter != tt.want || ce.Msg != "slow" {
				t.Fatalf("error = %#v, want RetryAfter %v and message %q", err, tt.want, "slow")
			}
			// The limiter reads it through errors.As, wrapped as the lane wraps it.
			var rl interface {
				RateLimited() (time.Duration, bool)
			}
			if !errors.As(fmt.Errorf("provider: %w", err), &rl) {
				t.Fatalf("%v has no RateLimited method", err)
			}
			if got, limited := rl.RateLimited(); !limited || got != tt.want {
				t.Errorf("RateLimited() = %v, %t; want %v, true", got, limited, tt.want)
			}
		})
	}
}

func TestCallError_RateLimitedOnlyFor429(t *testing.T) {
	t.Parallel()
	for _, class := range []string{provider.ClassServer, provider.ClassClient, provider.ClassTimeout, provider.ClassNetwork} {
		e := &provider.CallError{Class: class, Status: 503, RetryAfter: 5 * time.Second}
		if _, limited := e.RateLimited(); limited {
			t.Errorf("class %q: RateLimited() = true, want false", class)
		}
	}
}

// TestOpenAI_SimulatorRateLimit: the simulator's enforced limit reaches the
// caller as a 429 with its Retry-After, and bills nothing.
func TestOpenAI_SimulatorRateLimit(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{RPM: 30}) // one call every 2 s
	p := mustOpenAI(t, sim.URL, 10*time.Second)
	first := mustGenerate(t, p, inkwell.ProviderRequest{IdempotencyKey: "a", Prompt: "p", MaxWords: 3})
	_, err := p.Generate(context.Background(), inkwell.ProviderRequest{IdempotencyKey: "b", Prompt: "p", MaxWords: 3})
	ce, ok := provider.AsCallError(err)
	if !ok || ce.Class != provider.ClassRateLimited || ce.Status != 429 || ce.RetryAfter != 2*time.Second {
		t.Fatalf("second call: %v, want rate limited, HTTP 429, Retry-After 2s", err)
	}
	l := sim.MustLedger(t)
	if _, billed := l.Entry("b"); billed || l.TotalBills != 1 {
		t.Errorf("ledger = %+v, want only the first call billed", l)
	}
	if first.TokensUsed != (1+3)*provider.TokensPerWord {
		t.Errorf("TokensUsed = %d, want %d", first.TokensUsed, (1+3)*provider.TokensPerWord)
	}
}

func TestOpenAI_CanceledUnwraps(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{Latency: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	p := mustOpenAI(t, sim.URL, time.Hour)
	done := make(chan error, 1)
	go func() {
		_, err := p.Generate(ctx, inkwell.ProviderRequest{IdempotencyKey: "k", Prompt: "p"})
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Generate after cancel = %v, want it to wrap context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Generate did not return within 10s of cancel")
	}
}

// TestCallError_GatewayAnswersAreAmbiguous: a 502 or 504 is a gateway's
// word that the provider's answer did not reach it, not the provider's
// that it did nothing: classed timeout (retried only where keys are
// honoured), and its message says the outcome is unknown. A 500, 503 or
// 529 is the provider's own refusal: provider_error, retried.
func TestCallError_GatewayAnswersAreAmbiguous(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]inkwell.ErrorClass{
		502: inkwell.ClassTimeout, 504: inkwell.ClassTimeout,
		500: inkwell.ClassProviderError, 503: inkwell.ClassProviderError, 529: inkwell.ClassProviderError,
	} {
		url, _ := fakeAnswer(t, status, `{"error":{"message":"upstream"}}`, nil)
		_, err := mustOpenAI(t, url, 10*time.Second).Generate(context.Background(), inkwell.ProviderRequest{IdempotencyKey: "job-1", Prompt: "p", MaxWords: 5})
		ce, ok := provider.AsCallError(err)
		if !ok {
			t.Fatalf("HTTP %d: %v, want a *CallError", status, err)
		}
		if got := ce.ErrorClass(); got != want {
			t.Errorf("HTTP %d: class %q, want %q", status, got, want)
		}
		if unknown := strings.Contains(ce.Msg, "outcome unknown"); unknown != (want == inkwell.ClassTimeout) {
			t.Errorf("HTTP %d: message %q; says the outcome is unknown: %v, want %v", status, ce.Msg, unknown, want == inkwell.ClassTimeout)
		}
	}
}

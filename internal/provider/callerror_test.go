package provider_test

import (
	"context"
	"errors"
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
		{"MalformedNoID", fakeSetup(200, `{"choices":[{"message":{"content":"words"}}]}`, nil), provider.ClassMalformed, 200},
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
	url, _ := fakeAnswer(t, http.StatusTooManyRequests, `{"error":"slow"}`, map[string]string{"Retry-After": "7"})
	_, err := mustOpenAI(t, url, 10*time.Second).Generate(context.Background(), inkwell.ProviderRequest{Prompt: "p"})
	ce, ok := provider.AsCallError(err)
	if !ok || ce.RetryAfter != 7*time.Second || ce.Msg != "slow" {
		t.Errorf("error = %#v, want RetryAfter 7s and message %q", err, "slow")
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

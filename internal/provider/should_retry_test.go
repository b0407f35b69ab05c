package provider_test

import (
	"context"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

// TestShouldRetry_TheProvidersWordOverTheStatus: an answer's
// x-should-retry header is obeyed, as OpenAI's and Anthropic's SDKs obey
// it, wherever that cannot make a paid call's outcome less certain. A 4xx
// the provider says to retry is a provider error (retried by the policy);
// a 5xx it says not to retry is a refusal (not retried). A gateway's 502,
// 504, 520 or 524 stays ambiguous whatever it says, a 429 stays a rate
// limit, OpenAI's insufficient_quota stays a refusal, and a value that is
// neither true nor false says nothing. Both kinds, one real HTTP server
// each.
func TestShouldRetry_TheProvidersWordOverTheStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		status int
		should string // the header's value; "" sends none
		body   string
		want   inkwell.ErrorClass
		words  string // in the error, when the header changed the class
	}{
		{"409 told to retry", 409, "true", "", inkwell.ClassProviderError, "x-should-retry: true"},
		{"408 told to retry", 408, "TRUE ", "", inkwell.ClassProviderError, "x-should-retry: true"},
		{"409 alone", 409, "", "", inkwell.ClassRejected, ""},
		{"400 told not to", 400, "false", "", inkwell.ClassRejected, ""},
		{"500 told not to", 500, "false", "", inkwell.ClassRejected, "x-should-retry: false"},
		{"529 told not to", 529, "false", "", inkwell.ClassRejected, "x-should-retry: false"},
		{"503 told to retry", 503, "true", "", inkwell.ClassProviderError, ""},
		{"500 alone", 500, "", "", inkwell.ClassProviderError, ""},
		{"500 with a value it cannot read", 500, "no", "", inkwell.ClassProviderError, ""},
		{"504 told not to: still ambiguous", 504, "false", "", inkwell.ClassTimeout, "outcome unknown"},
		{"524 told not to: still ambiguous", 524, "false", "", inkwell.ClassTimeout, "outcome unknown"},
		{"429 told not to: still a rate limit", 429, "false", "", inkwell.ClassRateLimited, ""},
	}
	for _, kind := range []string{"openai", "anthropic"} {
		for _, c := range cases {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				header := map[string]string{"Content-Type": "application/json"}
				if c.should != "" {
					header["x-should-retry"] = c.should
				}
				body := `{"error":{"type":"api_error","message":"something happened"}}`
				url, calls := serveAnswer(t, c.status, header, []byte(body))
				_, err := providerOfKind(t, kind, url).Generate(context.Background(), sayHiRequest)
				ce, ok := provider.AsCallError(err)
				if !ok {
					t.Fatalf("Generate: %v; want a *CallError", err)
				}
				if got := ce.ErrorClass(); got != c.want {
					t.Errorf("HTTP %d, x-should-retry %q: class %s, want %s (%v)", c.status, c.should, got, c.want, err)
				}
				if c.words != "" && !strings.Contains(err.Error(), c.words) {
					t.Errorf("error %q does not say %q", err, c.words)
				}
				if calls.Load() != 1 {
					t.Errorf("%d requests sent, want 1", calls.Load())
				}
			})
		}
	}
	t.Run("openai/insufficient_quota told to retry: still a refusal", func(t *testing.T) {
		t.Parallel()
		url, _ := serveAnswer(t, 429, map[string]string{"Content-Type": "application/json", "x-should-retry": "true"}, []byte(openAIQuotaBody))
		_, err := providerOfKind(t, "openai", url).Generate(context.Background(), sayHiRequest)
		ce, ok := provider.AsCallError(err)
		if !ok || ce.ErrorClass() != inkwell.ClassRejected {
			t.Fatalf("insufficient_quota with x-should-retry: true: %v; want rejected (waiting does not pay the bill)", err)
		}
	})
}

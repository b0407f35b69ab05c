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

// serveHeaderLines answers every request with status, an API error body
// and the given header lines after Content-Type.
func serveHeaderLines(t *testing.T, status int, lines [][2]string) string {
	t.Helper()
	url, _ := serveAnswerLines(t, status, append([][2]string{{"Content-Type", "application/json"}}, lines...),
		[]byte(`{"error":{"type":"api_error","message":"something happened"}}`))
	return url
}

// Header forms that must be read: mixed-case names and values, padding.
func TestShouldRetry_OddButClearFormsAreRead(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"openai", "anthropic"} {
		for _, c := range []struct {
			status int
			lines  [][2]string
			want   inkwell.ErrorClass
		}{
			{409, [][2]string{{"X-SHOULD-RETRY", "  True\t"}}, inkwell.ClassProviderError},
			{503, [][2]string{{"x-Should-Retry", "FALSE"}}, inkwell.ClassRejected},
			{502, [][2]string{{"x-should-retry", "false"}}, inkwell.ClassTimeout},
			{520, [][2]string{{"x-should-retry", "false"}}, inkwell.ClassTimeout},
			{429, [][2]string{{"x-should-retry", "true"}}, inkwell.ClassRateLimited},
		} {
			url := serveHeaderLines(t, c.status, c.lines)
			_, err := providerOfKind(t, kind, url).Generate(context.Background(), sayHiRequest)
			ce, ok := provider.AsCallError(err)
			if !ok || ce.ErrorClass() != c.want {
				t.Errorf("%s: HTTP %d %v: %v; want %s", kind, c.status, c.lines, err, c.want)
			}
		}
	}
}

// Two x-should-retry lines that disagree are no clear word: the SDKs
// read them joined ("true, false"), which is neither true nor false, and
// fall back to the status. Inkwell read the first line only, so the
// order of two contradicting lines decided whether a 4xx was retried.
func TestShouldRetry_ContradictingLinesSayNothing(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"openai", "anthropic"} {
		for _, c := range []struct {
			status int
			lines  [][2]string
			want   inkwell.ErrorClass
		}{
			{409, [][2]string{{"x-should-retry", "true"}, {"x-should-retry", "false"}}, inkwell.ClassRejected},
			{500, [][2]string{{"x-should-retry", "false"}, {"x-should-retry", "true"}}, inkwell.ClassProviderError},
		} {
			url := serveHeaderLines(t, c.status, c.lines)
			_, err := providerOfKind(t, kind, url).Generate(context.Background(), sayHiRequest)
			ce, ok := provider.AsCallError(err)
			if !ok || ce.ErrorClass() != c.want {
				t.Errorf("%s: HTTP %d with lines %v: class %v (%v); want %s (contradicting lines say nothing)", kind, c.status, c.lines, ce.ErrorClass(), err, c.want)
			}
		}
	}
}

// The header moves a failure only between not-billed classes: never into
// or out of one that keeps the reservation, and never makes an ambiguous
// one retry-safe where keys are not honoured.
func TestShouldRetry_NeverMovesACallBetweenBilledAndNot(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"openai", "anthropic"} {
		for _, status := range []int{400, 401, 402, 403, 404, 408, 409, 413, 422, 429, 499, 500, 502, 503, 504, 520, 521, 522, 524, 529, 598, 599} {
			var base inkwell.ErrorClass
			for i, v := range []string{"", "true", "false"} {
				var lines [][2]string
				if v != "" {
					lines = [][2]string{{"x-should-retry", v}}
				}
				url := serveHeaderLines(t, status, lines)
				_, err := providerOfKind(t, kind, url).Generate(context.Background(), sayHiRequest)
				ce, _ := provider.AsCallError(err)
				c := ce.ErrorClass()
				if i == 0 {
					base = c
					continue
				}
				if c.NotBilled() != base.NotBilled() {
					t.Errorf("%s HTTP %d x-should-retry %s: %s, NotBilled %v; without the header %s, %v", kind, status, v, c, c.NotBilled(), base, base.NotBilled())
				}
				if c.RetrySafe(false) && !base.NotBilled() {
					t.Errorf("%s HTTP %d x-should-retry %s: retried without keys though maybe billed", kind, status, v)
				}
			}
		}
	}
}

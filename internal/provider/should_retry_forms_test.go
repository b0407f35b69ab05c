package provider_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

// serveHeaderLines answers every request with status and the given header
// lines (several lines of one name allowed).
func serveHeaderLines(t *testing.T, status int, lines [][2]string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		for _, kv := range lines {
			w.Header().Add(kv[0], kv[1])
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"type":"api_error","message":"something happened"}}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
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

package provider_test

// Answers an HTTP provider (or a proxy in front of it) could send that no
// well-behaved API does, and what each must become. The rules checked: a
// paid answer in hand is never thrown away for its usage alone; the usage
// read never makes the charge smaller than what the provider said was
// used; an ambiguous call is classed as one (never "not sent", never a
// server error that is retried); one call is one request.

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
)

// generateKind is one Generate of kind ("openai" or "anthropic") against
// a server at url.
func generateKind(t *testing.T, kind, url string, timeout time.Duration, req inkwell.ProviderRequest) (inkwell.ProviderResponse, error) {
	t.Helper()
	var p inkwell.Provider
	switch kind {
	case "openai":
		p = mustOpenAI(t, url, timeout)
	case "anthropic":
		p = mustAnthropic(t, url, timeout)
	default:
		t.Fatalf("kind %q", kind)
	}
	return p.Generate(context.Background(), req)
}

// plainReq is a small prompt request, the same for every hostile answer.
var plainReq = inkwell.ProviderRequest{IdempotencyKey: "job-hostile", Prompt: "p", MaxWords: 5}

// TestAnthropic_UsagePartsCannotLowerTheCharge: the prompt tokens of a
// Messages answer are the sum of three counts. A negative part (a
// cache_read_input_tokens of -1000 against 1000 input tokens) must not
// cancel the others out, nor may parts so large that their sum wraps
// around int64 come out as a small count: either is an answer whose usage
// cannot be told, refused as such, kept impossible (so the worker refuses
// to price it) or read as no usage (charged at its bound), never a charge
// of a few tokens.
func TestAnthropic_UsagePartsCannotLowerTheCharge(t *testing.T) {
	t.Parallel()
	answer := func(usage string) string {
		return `{"id":"msg_1","type":"message","content":[{"type":"text","text":"Fine."}],"stop_reason":"end_turn","usage":` + usage + `}`
	}
	maxI := strconv.FormatInt(math.MaxInt64, 10)
	tests := []struct {
		name    string
		usage   string
		atLeast int64 // the prompt tokens an answer let through must count at least these
	}{
		{"NegativeCacheRead", `{"input_tokens":1000,"cache_read_input_tokens":-1000,"output_tokens":5}`, 1000},
		{"NegativeCacheCreation", `{"input_tokens":1000,"cache_creation_input_tokens":-999,"output_tokens":5}`, 1000},
		{"SumWrapsToTwo", `{"input_tokens":` + maxI + `,"cache_creation_input_tokens":` + maxI + `,"cache_read_input_tokens":4,"output_tokens":5}`, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startCapture(t, http.StatusOK, answer(tt.usage), nil)
			got, err := generateKind(t, "anthropic", srv.URL, 10*time.Second, plainReq)
			if err != nil {
				ce, ok := provider.AsCallError(err)
				if !ok || ce.ErrorClass() != inkwell.ClassMalformed {
					t.Fatalf("Generate error = %v, want none or a malformed answer", err)
				}
				return
			}
			if got.Usage && got.PromptTokens < tt.atLeast {
				t.Errorf("usage %s read as %d prompt tokens, want at least %d: the answer would be charged less than it used",
					tt.usage, got.PromptTokens, tt.atLeast)
			}
		})
	}
}

// TestHTTPProviders_UsageWithoutCountsIsNoUsage: an answer whose usage
// object lacks its token counts (an empty object, total_tokens alone, a
// null count, one of the two missing) reports no usage: the worker then
// charges it at its bound. Read as zeros, a priced model's answer was
// charged nothing, or its input alone.
func TestHTTPProviders_UsageWithoutCountsIsNoUsage(t *testing.T) {
	t.Parallel()
	openai := func(usage string) string {
		return `{"id":"r1","choices":[{"message":{"content":"some words"},"finish_reason":"stop"}],"usage":` + usage + `}`
	}
	anthropic := func(usage string) string {
		return `{"id":"msg_1","type":"message","content":[{"type":"text","text":"Fine."}],"stop_reason":"end_turn","usage":` + usage + `}`
	}
	tests := []struct {
		name, kind, body string
		wantUsage        bool
	}{
		{"OpenAIEmpty", "openai", openai(`{}`), false},
		{"OpenAITotalOnly", "openai", openai(`{"total_tokens":50}`), false},
		{"OpenAINoCompletion", "openai", openai(`{"prompt_tokens":12,"total_tokens":50}`), false},
		{"OpenAINullCounts", "openai", openai(`{"prompt_tokens":null,"completion_tokens":null}`), false},
		{"OpenAIFull", "openai", openai(`{"prompt_tokens":12,"completion_tokens":0,"total_tokens":12}`), true},
		{"AnthropicEmpty", "anthropic", anthropic(`{}`), false},
		{"AnthropicNoOutput", "anthropic", anthropic(`{"input_tokens":12}`), false},
		{"AnthropicCacheOnly", "anthropic", anthropic(`{"cache_read_input_tokens":12,"output_tokens":3}`), false},
		{"AnthropicFull", "anthropic", anthropic(`{"input_tokens":12,"output_tokens":3}`), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, _ := fakeAnswer(t, http.StatusOK, tt.body, nil)
			got, err := generateKind(t, tt.kind, url, 10*time.Second, plainReq)
			if err != nil {
				t.Fatalf("Generate: %v (a paid answer with a text must be kept)", err)
			}
			if got.Usage != tt.wantUsage {
				t.Errorf("Usage = %t (prompt %d, completion %d), want %t", got.Usage, got.PromptTokens, got.CompletionTokens, tt.wantUsage)
			}
		})
	}
}

// hangingBody starts a server that reads the request, sends 200 with its
// headers and the first bytes of a JSON body, then sends nothing more
// until the client goes away (or the test ends). It counts requests.
func hangingBody(t *testing.T, first string) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, first)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv.URL, &n
}

// truncatedBody starts a server that answers 200 with a Content-Length
// larger than what it sends, then closes the connection: the answer was
// cut in transit, after the provider had written (and billed) it.
func truncatedBody(t *testing.T, sent string) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(sent)+500, sent)
		buf.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// TestHTTPProviders_AnswerCutOffIsAmbiguous: a 200 whose body never ends
// (the headers came, then nothing) is held to the call's timeout, and a
// 200 whose body is cut short by a closed connection fails; both came
// after the provider answered, so the call may have been billed: each is
// classed timeout (ambiguous: not retried on a provider that honours no
// key), never not_sent or a provider error, and each is one request.
func TestHTTPProviders_AnswerCutOffIsAmbiguous(t *testing.T) {
	t.Parallel()
	openaiStart := `{"id":"r1","choices":[{"message":{"content":"some`
	anthropicStart := `{"id":"msg_1","type":"message","content":[{"type":"text","text":"Fi`
	tests := []struct {
		name, kind string
		start      func(t *testing.T, first string) (string, *atomic.Int64)
		first      string
		timeout    time.Duration
	}{
		{"OpenAIBodyHangs", "openai", hangingBody, openaiStart, 200 * time.Millisecond},
		{"AnthropicBodyHangs", "anthropic", hangingBody, anthropicStart, 200 * time.Millisecond},
		{"OpenAIBodyCut", "openai", truncatedBody, openaiStart, 10 * time.Second},
		{"AnthropicBodyCut", "anthropic", truncatedBody, anthropicStart, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, n := tt.start(t, tt.first)
			_, err := generateKind(t, tt.kind, url, tt.timeout, plainReq)
			ce, ok := provider.AsCallError(err)
			if !ok {
				t.Fatalf("Generate error = %v (%T), want a *CallError", err, err)
			}
			if ce.ErrorClass() != inkwell.ClassTimeout || !ce.Reached {
				t.Errorf("error class %q (reached %t), want %q, reached: the answer was on its way (%v)", ce.ErrorClass(), ce.Reached, inkwell.ClassTimeout, err)
			}
			if got := n.Load(); got != 1 {
				t.Errorf("server got %d requests, want 1", got)
			}
		})
	}
}

// TestAnthropic_HostileAnswersClassedInOneRequest: a 200 that is not a
// usable Messages answer, and a redirect (never followed), is malformed
// (never retried); an unknown block beside a text, or an unknown stop
// reason, is kept; an error status keeps its class, with a short message
// however large its body. What is refused or passed through is one
// request.
func TestAnthropic_HostileAnswersClassedInOneRequest(t *testing.T) {
	t.Parallel()
	big := `{"id":"msg_1","content":[{"type":"text","text":"` + strings.Repeat("a", 4<<20) + `"}],"stop_reason":"end_turn"}`
	tests := []struct {
		name, body string
		status     int
		header     map[string]string
		wantClass  inkwell.ErrorClass // "" the answer is kept
		wantFinish string
	}{
		{"TruncatedJSON", `{"id":"msg_1","content":[{"type":"text","text":"Fi`, 200, nil, inkwell.ClassMalformed, ""},
		{"TooLarge", big, 200, nil, inkwell.ClassMalformed, ""},
		{"OnlyUnknownBlocks", `{"id":"msg_1","content":[{"type":"thinking","thinking":"hm"}],"stop_reason":"end_turn"}`, 200, nil, inkwell.ClassMalformed, ""},
		{"UnknownBlockBesideText", `{"id":"msg_1","content":[{"type":"mystery"},{"type":"text","text":"Fine."}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`, 200, nil, "", "stop"},
		{"UnknownStopReason", `{"id":"msg_1","content":[{"type":"text","text":"Fine."}],"stop_reason":"pause_turn_2030","usage":{"input_tokens":1,"output_tokens":1}}`, 200, nil, "", "stop"},
		{"NullBody", `null`, 200, nil, inkwell.ClassMalformed, ""},
		{"Redirect307", ``, 307, map[string]string{"Location": "https://elsewhere.example/v1/messages"}, inkwell.ClassMalformed, ""},
		{"Redirect308", ``, 308, map[string]string{"Location": "/v2/messages"}, inkwell.ClassMalformed, ""},
		{"Overloaded529", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 529, nil, inkwell.ClassProviderError, ""},
		{"HugeErrorBody", strings.Repeat("x", 5<<20), 500, nil, inkwell.ClassProviderError, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startCapture(t, tt.status, tt.body, tt.header)
			got, err := generateKind(t, "anthropic", srv.URL, 10*time.Second, plainReq)
			srv.mustOneRequest(t)
			if tt.wantClass == "" {
				if err != nil {
					t.Fatalf("Generate: %v, want the answer kept", err)
				}
				if got.FinishReason != tt.wantFinish {
					t.Errorf("finish reason %q, want %q", got.FinishReason, tt.wantFinish)
				}
				return
			}
			ce, ok := provider.AsCallError(err)
			if !ok {
				t.Fatalf("Generate error = %v (%T), want a *CallError", err, err)
			}
			if ce.ErrorClass() != tt.wantClass {
				t.Errorf("error class %q, want %q (%v)", ce.ErrorClass(), tt.wantClass, err)
			}
			if len(ce.Msg) > 400 {
				t.Errorf("error message is %d bytes, want it short", len(ce.Msg))
			}
		})
	}
}

// TestHTTPProviders_RetryAfterFormsReadSafely: a 429's retry-after, from
// both kinds, in each form a server may send it: seconds, an HTTP date
// (read against the provider's clock), one already past, a huge or
// overflowing number, a negative one, a fraction. None may panic,
// overflow to a negative pause or be read as anything but seconds or a
// date.
func TestHTTPProviders_RetryAfterFormsReadSafely(t *testing.T) {
	t.Parallel()
	date := anthropicNow.Add(90 * time.Second).Format(http.TimeFormat)
	past := anthropicNow.Add(-time.Hour).Format(http.TimeFormat)
	tests := []struct {
		name, value string
		want        time.Duration
	}{
		{"Seconds", "7", 7 * time.Second},
		{"HTTPDate", date, 90 * time.Second},
		{"DatePast", past, 0},
		{"Huge", "99999999999", (1 << 32) * time.Second},
		{"OverflowsInt64", "99999999999999999999999", 0},
		{"Negative", "-5", 0},
		{"Fraction", "1.5", 0},
	}
	for _, kind := range []string{"openai", "anthropic"} {
		for _, tt := range tests {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				url, n := fakeAnswer(t, http.StatusTooManyRequests, `{"error":{"message":"slow down"}}`, map[string]string{"Retry-After": tt.value})
				var p inkwell.Provider
				now := func() time.Time { return anthropicNow }
				if kind == "openai" {
					p, _ = provider.NewOpenAI(provider.OpenAIConfig{URL: url, APIKey: apiKey, NowFunc: now})
				} else {
					p, _ = provider.NewAnthropic(provider.AnthropicConfig{URL: url, APIKey: apiKey, NowFunc: now})
				}
				_, err := p.Generate(context.Background(), plainReq)
				ce, ok := provider.AsCallError(err)
				if !ok {
					t.Fatalf("Generate error = %v, want a *CallError", err)
				}
				retry, limited := ce.RateLimited()
				if !limited || retry != tt.want || ce.ErrorClass() != inkwell.ClassRateLimited {
					t.Errorf("RateLimited() = %v, %t, class %q; want %v, true, %q", retry, limited, ce.ErrorClass(), tt.want, inkwell.ClassRateLimited)
				}
				if n.Load() != 1 {
					t.Errorf("server got %d requests, want 1", n.Load())
				}
			})
		}
	}
}

// TestSim_CompletionTokensWithinMaxTokens: no answer of the simulators
// says it wrote more completion tokens than the max_tokens it was sent: a
// real provider stops there, and accept reserved no more. The sims write
// whole words of two tokens; max_tokens 1 used to get one word and
// completion_tokens 2, charged past the reservation on a priced model.
func TestSim_CompletionTokensWithinMaxTokens(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	for _, maxTokens := range []int{1, 2, 3, 7} {
		chat := mustChat(t, fmt.Sprintf(`{"max_tokens":%d,"messages":[{"role":"user","content":"tell me of the sea"}]}`, maxTokens))
		req := inkwell.ProviderRequest{IdempotencyKey: fmt.Sprintf("job-max-%d", maxTokens), Chat: chat,
			MaxWords: max(1, maxTokens/inkwell.TokensPerWord)}
		req.Chat.MaxOutputTokens = maxTokens
		for _, kind := range []string{"sim", "openai", "anthropic"} {
			var got inkwell.ProviderResponse
			var err error
			if kind == "sim" {
				got, err = provider.NewSim(0).Generate(context.Background(), req)
			} else {
				got, err = generateKind(t, kind, sim.URL, 10*time.Second, req)
			}
			if err != nil {
				t.Fatalf("%s, max_tokens %d: %v", kind, maxTokens, err)
			}
			if !got.Usage || got.CompletionTokens > int64(maxTokens) || got.CompletionTokens < 1 {
				t.Errorf("%s, max_tokens %d: usage %t, completion_tokens %d; want from 1 to %d", kind, maxTokens, got.Usage, got.CompletionTokens, maxTokens)
			}
			if !strings.Contains(string(got.Response), fmt.Sprintf(`"completion_tokens":%d`, got.CompletionTokens)) {
				t.Errorf("%s, max_tokens %d: stored response %s does not say completion_tokens %d", kind, maxTokens, got.Response, got.CompletionTokens)
			}
		}
	}
}

package provider_test

// Real-world provider answers, byte for byte as production users meet
// them, and what each must become. The rules: a paid answer in hand is
// never thrown away; a call that may have been billed is never classed as
// one a retry cannot bill twice; a refusal that no retry can cure is not a
// rate limit (which pauses the provider and is retried up to
// --max-rate-limited times).

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

// sayHiRequest is the request sent to the fixed answers of serveAnswer
// and serveChunkedWithoutEnd.
var sayHiRequest = inkwell.ProviderRequest{IdempotencyKey: "job-real-answer", Prompt: "Say hi", MaxWords: 5}

// serveAnswer answers every request with status, header and body, and
// counts the requests.
func serveAnswer(t *testing.T, status int, header map[string]string, body []byte) (string, *atomic.Int64) {
	t.Helper()
	lines := make([][2]string, 0, len(header))
	for k, v := range header {
		lines = append(lines, [2]string{k, v})
	}
	return serveAnswerLines(t, status, lines, body)
}

// serveAnswerLines is serveAnswer with the header as lines, in order
// (several lines of one name allowed).
func serveAnswerLines(t *testing.T, status int, lines [][2]string, body []byte) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		n.Add(1)
		for _, kv := range lines {
			w.Header().Add(kv[0], kv[1])
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// providerOfKind is the HTTP provider of kind ("openai" or "anthropic")
// pointed at url.
func providerOfKind(t *testing.T, kind, url string) inkwell.Provider {
	t.Helper()
	var (
		p   inkwell.Provider
		err error
	)
	switch kind {
	case "openai":
		p, err = provider.NewOpenAI(provider.OpenAIConfig{URL: url, APIKey: apiKey, Timeout: 10 * time.Second})
	case "anthropic":
		p, err = provider.NewAnthropic(provider.AnthropicConfig{URL: url, APIKey: apiKey, Timeout: 10 * time.Second})
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// openAIQuotaBody is what api.openai.com answers, 429 with no Retry-After,
// to an organisation whose prepaid credit is spent or whose monthly budget
// is reached. No retry can succeed until someone pays.
const openAIQuotaBody = `{
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
        "type": "insufficient_quota",
        "param": null,
        "code": "insufficient_quota"
    }
}
`

// TestOpenAI_InsufficientQuotaIsNotARateLimit: OpenAI's
// insufficient_quota 429 is a billing refusal, not a rate limit (OpenAI's
// error-code guide: "You have run out of credits or hit your maximum
// monthly spend"; its retry advice applies to rate_limit_exceeded only).
// Read as a rate limit, it pauses every call to the provider with
// exponential back-off, and each job is sent again up to
// --max-rate-limited (50) times before it fails, its error class telling
// the operator "rate_limited", as if waiting would help. It must be a
// failure automatic retry does not repeat (rejected, like Anthropic's
// billing_error), which does not pause the provider's limiter, and whose
// reservation is released (nothing was billed).
func TestOpenAI_InsufficientQuotaIsNotARateLimit(t *testing.T) {
	t.Parallel()
	url, n := serveAnswer(t, 429, map[string]string{"Content-Type": "application/json; charset=utf-8",
		"x-request-id": "req_8a1f0e2b3c4d", "openai-processing-ms": "12"}, []byte(openAIQuotaBody))
	_, err := providerOfKind(t, "openai", url).Generate(context.Background(), sayHiRequest)
	ce, ok := provider.AsCallError(err)
	if !ok {
		t.Fatalf("Generate error %v (%T), want a *CallError", err, err)
	}
	if n.Load() != 1 {
		t.Errorf("server got %d requests, want 1", n.Load())
	}
	c := ce.ErrorClass()
	_, pauses := ce.RateLimited()
	if c == inkwell.ClassRateLimited || c.RetrySafe(false) || pauses || !c.NotBilled() {
		t.Errorf("insufficient_quota 429: class %q (retried automatically: %t), pauses the provider's limiter: %t, not billed: %t; "+
			"want a class that is not rate_limited, never retried automatically, no pause, not billed (err: %v)",
			c, c.RetrySafe(false), pauses, c.NotBilled(), err)
	}
}

// cloudflare524 is the page Cloudflare, in front of api.openai.com and
// api.anthropic.com, answers when the origin accepted the request but did
// not answer within Cloudflare's 100 s: the origin goes on and may finish
// (and bill) the call.
const cloudflare524 = `<!DOCTYPE html>
<!--[if lt IE 7]> <html class="no-js ie6 oldie" lang="en-US"> <![endif]-->
<head>
<title>api.openai.com | 524: A timeout occurred</title>
<meta charset="UTF-8" />
</head>
<body>
<div id="cf-wrapper">
<h1><span class="cf-error-type">Error</span> <span class="cf-error-code">524</span></h1>
<h2 class="cf-subheadline">A timeout occurred</h2>
<p>The origin web server timed out responding to this request.</p>
<p>Cloudflare Ray ID: <strong>8f3c2a1b0d9e8f7a</strong></p>
</div>
</body>
</html>
`

// TestHTTPProviders_CloudflareOriginTimeoutIsAmbiguous: a 524 is a gateway that
// stopped waiting for an origin that had the request, exactly what a 504
// is (Cloudflare: "Cloudflare was able to make a TCP connection to the
// origin, but the origin did not reply with an HTTP response before the
// connection timed out"). It must be classed timeout, as 502 and 504 are:
// not retried where keys are not honoured (Anthropic honours none), and
// its reservation kept. Classed provider_error, it is retried at once and
// its reservation counted as never billed: the provider bills the first
// call (finished behind Cloudflare) and the second one.
func TestHTTPProviders_CloudflareOriginTimeoutIsAmbiguous(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"openai", "anthropic"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			url, n := serveAnswer(t, 524, map[string]string{"Content-Type": "text/html; charset=UTF-8", "Server": "cloudflare",
				"CF-RAY": "8f3c2a1b0d9e8f7a-AMS"}, []byte(cloudflare524))
			_, err := providerOfKind(t, kind, url).Generate(context.Background(), sayHiRequest)
			ce, ok := provider.AsCallError(err)
			if !ok {
				t.Fatalf("Generate error %v (%T), want a *CallError", err, err)
			}
			if n.Load() != 1 {
				t.Errorf("server got %d requests, want 1", n.Load())
			}
			if c := ce.ErrorClass(); c != inkwell.ClassTimeout || c.RetrySafe(false) || c.NotBilled() {
				t.Errorf("Cloudflare 524: class %q (retried where keys are not honoured: %t, reservation released as not billed: %t); "+
					"want %q, as a 504: the origin had the request and may have billed it (err: %v)",
					c, c.RetrySafe(false), c.NotBilled(), inkwell.ClassTimeout, err)
			}
		})
	}
}

// TestOpenAI_RetryAfterMilliseconds: Azure OpenAI answers its 429s with
// retry-after-ms (and OpenAI's own SDKs read retry-after-ms before
// retry-after: openai-python's _calculate_retry_timeout and
// openai-node's retryRequest read both). A 429 whose only
// hint is retry-after-ms: 20000 must pause the provider for 20 s; read as
// "no Retry-After", the lane comes back after a 1 s back-off and is
// refused again, and again.
func TestOpenAI_RetryAfterMilliseconds(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"openai"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			url, _ := serveAnswer(t, 429, map[string]string{"Content-Type": "application/json", "retry-after-ms": "20000",
				"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "20s"},
				[]byte(`{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded call rate limit of your current OpenAI S0 pricing tier. Please retry after 20 seconds."}}`))
			_, err := providerOfKind(t, kind, url).Generate(context.Background(), sayHiRequest)
			ce, ok := provider.AsCallError(err)
			if !ok {
				t.Fatalf("Generate error %v (%T), want a *CallError", err, err)
			}
			if wait, limited := ce.RateLimited(); !limited || wait != 20*time.Second {
				t.Errorf("RateLimited() = %v, %t; want 20s, true (retry-after-ms: 20000)", wait, limited)
			}
		})
	}
}

// TestOpenAI_MistralContentChunksAreAnAnswer: Mistral's chat completions
// (api.mistral.ai/v1, an OpenAI-compatible API) answer its reasoning
// models (magistral-*, and mistral-small/-medium with reasoning_effort)
// with message.content as an array of chunks, a "thinking" chunk then
// "text" chunks, and bill them. The answer is in hand and paid for: it
// must be kept (its text the text chunks), never failed as malformed,
// which throws it away, keeps its reservation open until an operator
// looks, and is never retried.
func TestOpenAI_MistralContentChunksAreAnAnswer(t *testing.T) {
	t.Parallel()
	body := `{"id":"cmpl-e5cc70bb28c444948073e77776eb30ef","object":"chat.completion","created":1759412345,"model":"magistral-medium-2509",` +
		`"choices":[{"index":0,"message":{"role":"assistant","tool_calls":null,"content":[` +
		`{"type":"thinking","thinking":[{"type":"text","text":"The user greets me; answer briefly."}]},` +
		`{"type":"text","text":"Hi! How can I help?"}]},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":12,"total_tokens":58,"completion_tokens":46}}`
	url, n := serveAnswer(t, 200, map[string]string{"Content-Type": "application/json"}, []byte(body))
	resp, err := providerOfKind(t, "openai", url).Generate(context.Background(), sayHiRequest)
	if n.Load() != 1 {
		t.Errorf("server got %d requests, want 1", n.Load())
	}
	if err != nil {
		ce, _ := provider.AsCallError(err)
		class := inkwell.ErrorClass("")
		if ce != nil {
			class = ce.ErrorClass()
		}
		t.Fatalf("a billed Mistral answer (46 completion tokens) failed as %q: %v; want it kept, text %q", class, err, "Hi! How can I help?")
	}
	if !strings.Contains(resp.Text, "Hi! How can I help?") || !resp.Usage || resp.PromptTokens != 12 || resp.CompletionTokens != 46 {
		t.Errorf("answer text %q, usage %t %d+%d; want the text chunk and usage 12+46", resp.Text, resp.Usage, resp.PromptTokens, resp.CompletionTokens)
	}
}

// TestHTTPProviders_AnswerBehindByteOrderMarkIsKept: a 200 whose JSON body starts with
// a UTF-8 byte order mark (as some gateways on .NET, and some proxies
// re-encoding the body, send) is a complete, billed answer: RFC 8259 §8.1
// allows a parser to ignore the BOM. It must be kept, not failed as
// malformed (lost, reservation left open).
func TestHTTPProviders_AnswerBehindByteOrderMarkIsKept(t *testing.T) {
	t.Parallel()
	answers := map[string]string{
		"openai":    `{"id":"chatcmpl-BOM1","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there.","refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`,
		"anthropic": `{"id":"msg_01BOM","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi there."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":3}}`,
	}
	for kind, body := range answers {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			url, _ := serveAnswer(t, 200, map[string]string{"Content-Type": "application/json; charset=utf-8"}, append([]byte("\xEF\xBB\xBF"), body...))
			resp, err := providerOfKind(t, kind, url).Generate(context.Background(), sayHiRequest)
			if err != nil {
				t.Fatalf("billed answer behind a BOM failed: %v; want it kept", err)
			}
			if resp.Text != "Hi there." || resp.PromptTokens != 9 || resp.CompletionTokens != 3 {
				t.Errorf("answer %q %d+%d, want %q 9+3", resp.Text, resp.PromptTokens, resp.CompletionTokens, "Hi there.")
			}
		})
	}
}

// serveChunkedWithoutEnd is a server that answers every request 200 with
// body as one HTTP/1.1 chunk and then closes the connection without the
// last (zero-length) chunk: a proxy that drops the connection once the
// origin's body was relayed. The JSON is whole.
func serveChunkedWithoutEnd(t *testing.T, body string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				r, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.ReadAll(r.Body)
				n.Add(1)
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(body), body)
			}(c)
		}
	}()
	return "http://" + ln.Addr().String(), &n
}

// TestHTTPProviders_WholeAnswerThenConnectionDroppedIsKept: the whole answer arrived
// (a complete JSON document with its id and usage) and only the chunked
// encoding's end is missing. The answer is in hand and billed: it must be
// kept. Were the read error to win, the call would be a timeout: the paid
// answer thrown away (and not retried on a provider that honours no key),
// its reservation held until an operator looks.
func TestHTTPProviders_WholeAnswerThenConnectionDroppedIsKept(t *testing.T) {
	t.Parallel()
	answers := map[string]string{
		"openai":    `{"id":"chatcmpl-Cut1","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"All of it."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`,
		"anthropic": `{"id":"msg_01Cut","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"All of it."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":4}}`,
	}
	for kind, body := range answers {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			url, n := serveChunkedWithoutEnd(t, body)
			resp, err := providerOfKind(t, kind, url).Generate(context.Background(), sayHiRequest)
			if n.Load() != 1 {
				t.Errorf("server got %d requests, want 1", n.Load())
			}
			if err != nil {
				t.Fatalf("a whole, billed answer whose connection closed before the chunked end was thrown away: %v; want it kept", err)
			}
			if resp.Text != "All of it." || resp.CompletionTokens != 4 {
				t.Errorf("answer %q %d completion tokens, want %q 4", resp.Text, resp.CompletionTokens, "All of it.")
			}
		})
	}
}

// TestHTTPProviders_RealAnswersAreRead guards real answers Inkwell reads
// right, byte for byte as the APIs send them: what each must
// become (kept with its text and finish reason, or failed with a class
// that does the right thing with money and retries).
func TestHTTPProviders_RealAnswersAreRead(t *testing.T) {
	t.Parallel()
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, _ = w.Write([]byte(s))
		_ = w.Close()
		return b.Bytes()
	}
	json := map[string]string{"Content-Type": "application/json"}
	tests := []struct {
		name, kind string
		status     int
		header     map[string]string
		body       []byte
		// kept answer
		text, finish string
		prompt, out  int64
		// or failure
		class  inkwell.ErrorClass
		pauses bool
	}{
		// OpenAI: odd 200s that are billed answers.
		{name: "OpenAIRefusalContentNull", kind: "openai", status: 200, header: json,
			body: []byte(`{"id":"chatcmpl-R1","object":"chat.completion","created":1767225600,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I'm sorry, I can't help with that.","annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":21,"completion_tokens":10,"total_tokens":31,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_07871e2ad8"}`),
			text: "I'm sorry, I can't help with that.", finish: "stop", prompt: 21, out: 10},
		{name: "OpenAIContentFilterNull", kind: "openai", status: 200, header: json,
			body: []byte(`{"id":"chatcmpl-CF1","object":"chat.completion","created":1767225600,"model":"gpt-4o","choices":[{"index":0,"finish_reason":"content_filter","message":{"role":"assistant","content":null},"content_filter_results":{"hate":{"filtered":true,"severity":"high"}}}],"usage":{"prompt_tokens":30,"completion_tokens":7,"total_tokens":37}}`),
			text: "", finish: "content_filter", prompt: 30, out: 7},
		{name: "OpenAIReasoningSpentLength", kind: "openai", status: 200, header: json,
			body: []byte(`{"id":"chatcmpl-L1","object":"chat.completion","created":1767225600,"model":"o4-mini-2025-04-16","choices":[{"index":0,"message":{"role":"assistant","content":"","refusal":null,"annotations":[]},"finish_reason":"length"}],"usage":{"prompt_tokens":14,"completion_tokens":64,"total_tokens":78,"completion_tokens_details":{"reasoning_tokens":64}}}`),
			text: "", finish: "length", prompt: 14, out: 64},
		{name: "OpenAIToolCallsContentNull", kind: "openai", status: 200, header: json,
			body: []byte(`{"id":"chatcmpl-T1","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}],"refusal":null},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":80,"completion_tokens":17,"total_tokens":97}}`),
			text: "", finish: "tool_calls", prompt: 80, out: 17},
		{name: "OpenAIGzip", kind: "openai", status: 200, header: map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"},
			body: gz(`{"id":"chatcmpl-G1","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Zipped."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`),
			text: "Zipped.", finish: "stop", prompt: 5, out: 2},
		// Anthropic: odd 200s that are billed answers.
		{name: "AnthropicRefusalEmpty", kind: "anthropic", status: 200, header: json,
			body: []byte(`{"id":"msg_01Ref","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}`),
			text: "", finish: "content_filter", prompt: 25, out: 1},
		{name: "AnthropicMaxTokensEmpty", kind: "anthropic", status: 200, header: json,
			body: []byte(`{"id":"msg_01Max","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}`),
			text: "", finish: "length", prompt: 12, out: 1},
		{name: "AnthropicThinkingOnly", kind: "anthropic", status: 200, header: json,
			body: []byte(`{"id":"msg_01Th","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"thinking","thinking":"Let me","signature":"EqQB"},{"type":"redacted_thinking","data":"EmwKAhgB"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":40,"output_tokens":16}}`),
			text: "", finish: "length", prompt: 40, out: 16},
		{name: "AnthropicCacheCounts", kind: "anthropic", status: 200, header: json,
			body: []byte(`{"id":"msg_01Cache","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Cached."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":1200,"cache_read_input_tokens":800,"cache_creation":{"ephemeral_5m_input_tokens":1200,"ephemeral_1h_input_tokens":0},"output_tokens":2,"service_tier":"standard"}}`),
			text: "Cached.", finish: "stop", prompt: 2003, out: 2},
		// Failures, each with the class that does the right thing.
		{name: "AnthropicOverloaded529", kind: "anthropic", status: 529, header: map[string]string{"Content-Type": "application/json", "x-should-retry": "true", "request-id": "req_011"},
			body: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011"}`), class: inkwell.ClassProviderError},
		{name: "AnthropicApiError500", kind: "anthropic", status: 500, header: json,
			body: []byte(`{"type":"error","error":{"type":"api_error","message":"Internal server error"},"request_id":"req_012"}`), class: inkwell.ClassProviderError},
		{name: "AnthropicCreditTooLow400", kind: "anthropic", status: 400, header: json,
			body: []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."},"request_id":"req_013"}`), class: inkwell.ClassRejected},
		{name: "AnthropicBilling402", kind: "anthropic", status: 402, header: json,
			body: []byte(`{"type":"error","error":{"type":"billing_error","message":"There is an issue with your billing."}}`), class: inkwell.ClassRejected},
		{name: "AnthropicTooLarge413", kind: "anthropic", status: 413, header: json,
			body: []byte(`{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`), class: inkwell.ClassRejected},
		{name: "AnthropicPromptTooLong400", kind: "anthropic", status: 400, header: json,
			body: []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 212345 tokens > 200000 maximum"}}`), class: inkwell.ClassRejected},
		{name: "AnthropicAuth401", kind: "anthropic", status: 401, header: json,
			body: []byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`), class: inkwell.ClassRejected},
		{name: "AnthropicPermission403", kind: "anthropic", status: 403, header: json,
			body: []byte(`{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`), class: inkwell.ClassRejected},
		{name: "AnthropicModel404", kind: "anthropic", status: 404, header: json,
			body: []byte(`{"type":"error","error":{"type":"not_found_error","message":"model: claude-3-opus-latest"}}`), class: inkwell.ClassRejected},
		{name: "AnthropicRateLimit429", kind: "anthropic", status: 429, header: map[string]string{"Content-Type": "application/json", "retry-after": "17",
			"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": "2026-03-01T12:00:17Z"},
			body: []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 requests per minute."}}`), class: inkwell.ClassRateLimited, pauses: true},
		{name: "OpenAIRateLimit429", kind: "openai", status: 429, header: map[string]string{"Content-Type": "application/json", "retry-after": "2",
			"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "120ms"},
			body: []byte(`{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-x on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`), class: inkwell.ClassRateLimited, pauses: true},
		{name: "OpenAIGatewayHTML200", kind: "openai", status: 200, header: map[string]string{"Content-Type": "text/html"},
			body: []byte("<html><head><title>Access denied</title></head><body>Corporate proxy</body></html>"), class: inkwell.ClassMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, n := serveAnswer(t, tt.status, tt.header, tt.body)
			resp, err := providerOfKind(t, tt.kind, url).Generate(context.Background(), sayHiRequest)
			if n.Load() != 1 {
				t.Errorf("server got %d requests, want 1", n.Load())
			}
			if tt.class == "" {
				if err != nil {
					t.Fatalf("billed answer failed: %v; want it kept", err)
				}
				if resp.Text != tt.text || resp.FinishReason != tt.finish || !resp.Usage || resp.PromptTokens != tt.prompt || resp.CompletionTokens != tt.out {
					t.Errorf("answer %q finish %q usage %t %d+%d; want %q %q %d+%d",
						resp.Text, resp.FinishReason, resp.Usage, resp.PromptTokens, resp.CompletionTokens, tt.text, tt.finish, tt.prompt, tt.out)
				}
				return
			}
			ce, ok := provider.AsCallError(err)
			if !ok {
				t.Fatalf("Generate error %v (%T), want a *CallError", err, err)
			}
			_, pauses := ce.RateLimited()
			if ce.ErrorClass() != tt.class || pauses != tt.pauses {
				t.Errorf("class %q pauses %t, want %q pauses %t (%v)", ce.ErrorClass(), pauses, tt.class, tt.pauses, err)
			}
		})
	}
}

// TestOpenAI_GeminiAnswerWithoutIDIsKept: Google's OpenAI-compatible
// endpoint (generativelanguage.googleapis.com/v1beta/openai) answered
// chat completions without a top-level "id" for months (SDKs made id
// optional for it: async-openai #337, BAML #1187, openai-api-rs #146).
// Such an answer is billed (usage says so) and in hand: it must be kept,
// not failed as malformed "answer has no id" (the text lost, the job never
// retried, its reservation left open until an operator looks).
func TestOpenAI_GeminiAnswerWithoutIDIsKept(t *testing.T) {
	t.Parallel()
	body := `{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"OK. I can book a flight from London to Tokyo for Jane Doe, age 34. Shall I proceed?","role":"assistant"}}],` +
		`"created":1747469284,"model":"models/gemini-2.5-flash-preview-04-17","object":"chat.completion",` +
		`"usage":{"completion_tokens":24,"prompt_tokens":138,"total_tokens":448}}`
	url, n := serveAnswer(t, 200, map[string]string{"Content-Type": "application/json"}, []byte(body))
	resp, err := providerOfKind(t, "openai", url).Generate(context.Background(), sayHiRequest)
	if n.Load() != 1 {
		t.Errorf("server got %d requests, want 1", n.Load())
	}
	if err != nil {
		t.Fatalf("a billed Gemini answer was thrown away: %v; want it kept", err)
	}
	if !strings.HasPrefix(resp.Text, "OK. I can book a flight") || !resp.Usage {
		t.Errorf("answer %q usage %t, want the text and its usage", resp.Text, resp.Usage)
	}
}

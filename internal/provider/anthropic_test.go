package provider_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
)

// anthropicNow is the clock of the mapped answers' "created".
var anthropicNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func mustAnthropic(t *testing.T, url string, timeout time.Duration) *provider.Anthropic {
	t.Helper()
	p, err := provider.NewAnthropic(provider.AnthropicConfig{URL: url, APIKey: apiKey, Timeout: timeout,
		NowFunc: func() time.Time { return anthropicNow }})
	if err != nil {
		t.Fatalf("NewAnthropic(%q): %v", url, err)
	}
	return p
}

// mustChat parses a chat-form body as POST /v1/jobs does.
func mustChat(t *testing.T, body string) inkwell.ChatRequest {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &fields); err != nil {
		t.Fatalf("chat body: %v", err)
	}
	c, err := inkwell.ParseChat(fields)
	if err != nil {
		t.Fatalf("ParseChat: %v", err)
	}
	return c
}

// mustJSONValue decodes JSON for a comparison that ignores spacing and order.
func mustJSONValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func TestAnthropic_Simulator(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	p := mustAnthropic(t, sim.URL, 10*time.Second)
	tests := []struct {
		name   string
		req    inkwell.ProviderRequest
		prompt string
		words  int
		model  string
	}{
		{"ShortForm", inkwell.ProviderRequest{IdempotencyKey: "job-short", Prompt: "write about rivers", MaxWords: 7},
			"write about rivers", 7, provider.DefaultAnthropicModel},
		{"ChatForm", inkwell.ProviderRequest{IdempotencyKey: "job-chat", Chat: mustChat(t, `{"model":"claude-x",
			"max_tokens":40,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"tell me of the sea"}]}`)},
			"tell me of the sea", 20, "claude-x"},
	}
	for _, tt := range tests {
		got, err := p.Generate(context.Background(), tt.req)
		if err != nil {
			t.Fatalf("%s: Generate: %v", tt.name, err)
		}
		text := provider.Generate(tt.prompt, tt.words)
		u := provider.UsageOf(tt.prompt, text)
		want := inkwell.ProviderResponse{Text: text, RequestID: got.RequestID, AmountMicros: provider.Price(text),
			TokensUsed: u.TotalTokens(), Usage: true, PromptTokens: int64(u.PromptTokens), CompletionTokens: int64(u.CompletionTokens),
			FinishReason: "stop", Response: got.Response}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: response (-want +got):\n%s", tt.name, diff)
		}
		wantCompletion := map[string]any{"id": got.RequestID, "object": "chat.completion", "created": float64(anthropicNow.Unix()), "model": tt.model,
			"choices": []any{map[string]any{"index": float64(0), "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": float64(u.PromptTokens), "completion_tokens": float64(u.CompletionTokens), "total_tokens": float64(u.TotalTokens())}}
		if diff := cmp.Diff(wantCompletion, mustJSONValue(t, got.Response)); diff != "" {
			t.Errorf("%s: chat.completion (-want +got):\n%s", tt.name, diff)
		}
		e, ok := sim.MustLedger(t).Request(got.RequestID)
		if !ok || e.SentKey != tt.req.IdempotencyKey || e.AmountMicros != got.AmountMicros {
			t.Errorf("%s: ledger entry %+v, %t; want the call billed %d under sent key %q", tt.name, e, ok, got.AmountMicros, tt.req.IdempotencyKey)
		}
	}
}

// TestAnthropic_EveryCallIsBilled: the key is sent, and not honoured; this
// is why an ambiguous Anthropic call is never retried automatically.
func TestAnthropic_EveryCallIsBilled(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	p := mustAnthropic(t, sim.URL, 10*time.Second)
	req := inkwell.ProviderRequest{IdempotencyKey: inkwell.ProviderKey(1, "inst"), Prompt: "p", MaxWords: 3}
	for range 2 {
		if _, err := p.Generate(context.Background(), req); err != nil {
			t.Fatalf("Generate: %v", err)
		}
	}
	if got := sim.MustLedger(t).Billed(req.IdempotencyKey); got != 2 {
		t.Errorf("Billed(%q) = %d, want 2", req.IdempotencyKey, got)
	}
}

// capturedRequest is what a captureServer received.
type capturedRequest struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// captureServer is a fake Anthropic on loopback: it records each request
// and answers status and body, with AUTH in the body replaced by the
// request's x-api-key, as a careless server might echo it.
type captureServer struct {
	URL  string
	mu   sync.Mutex
	reqs []capturedRequest
}

func startCapture(t *testing.T, status int, body string, header map[string]string) *captureServer {
	t.Helper()
	c := &captureServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.reqs = append(c.reqs, capturedRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: b})
		c.mu.Unlock()
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		io.WriteString(w, strings.ReplaceAll(body, "AUTH", r.Header.Get("x-api-key")))
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

func (c *captureServer) requests() []capturedRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]capturedRequest(nil), c.reqs...)
}

// mustOneRequest is the one request the server got.
func (c *captureServer) mustOneRequest(t *testing.T) capturedRequest {
	t.Helper()
	reqs := c.requests()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want exactly 1", len(reqs))
	}
	return reqs[0]
}

const okMessage = `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Fine."}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`

// fullChat uses every part of the chat form the Messages API can carry.
const fullChat = `{
	"model": "claude-x-20250101", "max_completion_tokens": 300, "temperature": 0.5, "top_p": 0.9, "stop": ["END"],
	"messages": [
		{"role": "system", "content": "You are terse."},
		{"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
		{"role": "user", "content": [{"type": "text", "text": "What is in these?"},
			{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
			{"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg", "detail": "low"}}]},
		{"role": "user", "content": "And the weather?"},
		{"role": "assistant", "content": "Let me look.", "tool_calls": [
			{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
			{"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": ""}}]},
		{"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"},
		{"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "12:00"}]},
		{"role": "user", "content": "Thanks"}
	],
	"tools": [
		{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
			"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
		{"type": "function", "function": {"name": "get_time"}}
	],
	"tool_choice": {"type": "function", "function": {"name": "get_weather"}}
}`

// wantMessages is fullChat as the Messages API takes it.
const wantMessages = `{
	"model": "claude-x-20250101", "max_tokens": 300, "temperature": 0.5, "top_p": 0.9, "stop_sequences": ["END"],
	"system": "You are terse.\n\nAnswer in French.",
	"messages": [
		{"role": "user", "content": [{"type": "text", "text": "What is in these?"},
			{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
			{"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
			{"type": "text", "text": "And the weather?"}]},
		{"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
			{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
			{"type": "tool_use", "id": "call_2", "name": "get_time", "input": {}}]},
		{"role": "user", "content": [
			{"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "18C, sunny"}]},
			{"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "12:00"}]},
			{"type": "text", "text": "Thanks"}]}
	],
	"tools": [
		{"name": "get_weather", "description": "Weather of a city",
			"input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
		{"name": "get_time", "input_schema": {"type": "object", "properties": {}}}
	],
	"tool_choice": {"type": "tool", "name": "get_weather"}
}`

func TestAnthropic_SendsMessagesRequest(t *testing.T) {
	t.Parallel()
	srv := startCapture(t, http.StatusOK, okMessage, nil)
	p := mustAnthropic(t, srv.URL+"/v1/", 10*time.Second)

	_, err := p.Generate(context.Background(), inkwell.ProviderRequest{IdempotencyKey: "job-7", Chat: mustChat(t, fullChat)})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}

	got := srv.mustOneRequest(t)
	if got.Method != http.MethodPost || got.Path != "/v1/messages" {
		t.Errorf("request = %s %s, want POST /v1/messages", got.Method, got.Path)
	}
	for name, want := range map[string]string{"x-api-key": apiKey, "anthropic-version": "2023-06-01",
		"content-type": "application/json", "idempotency-key": "job-7", "authorization": ""} {
		if v := got.Header.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
	gotBody := mustJSONValue(t, got.Body).(map[string]any)
	wantBody := mustJSONValue(t, []byte(wantMessages)).(map[string]any)
	for field := range merged(gotBody, wantBody) {
		if diff := cmp.Diff(wantBody[field], gotBody[field]); diff != "" {
			t.Errorf("field %q (-want +got):\n%s", field, diff)
		}
	}
}

func merged(a, b map[string]any) map[string]bool {
	out := make(map[string]bool)
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// TestAnthropic_SendsChoicesAndBounds: tool_choice in each form, and
// max_tokens when no bound is in force.
func TestAnthropic_SendsChoicesAndBounds(t *testing.T) {
	t.Parallel()
	const tools = `"tools":[{"type":"function","function":{"name":"f"}}]`
	tests := []struct {
		name, chat, field, want string
	}{
		{"Auto", `"tool_choice":"auto",` + tools, "tool_choice", `{"type":"auto"}`},
		{"Required", `"tool_choice":"required",` + tools, "tool_choice", `{"type":"any"}`},
		{"None", `"tool_choice":"none",` + tools, "tool_choice", `{"type":"none"}`},
		{"Named", `"tool_choice":{"type":"function","function":{"name":"f"}},` + tools, "tool_choice", `{"type":"tool","name":"f"}`},
		{"MaxTokensDefault", `"model":"m"`, "max_tokens", `4096`},
		{"StopString", `"stop":"END"`, "stop_sequences", `["END"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startCapture(t, http.StatusOK, okMessage, nil)
			p := mustAnthropic(t, srv.URL, 10*time.Second)
			chat := mustChat(t, `{"messages":[{"role":"user","content":"hi"}],`+tt.chat+`}`)
			if _, err := p.Generate(context.Background(), inkwell.ProviderRequest{Chat: chat}); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			body := mustJSONValue(t, srv.mustOneRequest(t).Body).(map[string]any)
			if diff := cmp.Diff(mustJSONValue(t, []byte(tt.want)), body[tt.field]); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tt.field, diff)
			}
		})
	}
}

func TestAnthropic_MapsAnswer(t *testing.T) {
	t.Parallel()
	const answer = `{"id":"msg_01abc","type":"message","role":"assistant","model":"claude-x-20250101",
		"content":[{"type":"text","text":"Il fait "},{"type":"text","text":"beau."},
			{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city": "Lyon"}}],
		"stop_reason":"tool_use","stop_sequence":null,
		"usage":{"input_tokens":100,"cache_creation_input_tokens":20,"cache_read_input_tokens":5,"output_tokens":30}}`
	srv := startCapture(t, http.StatusOK, answer, nil)
	p := mustAnthropic(t, srv.URL, 10*time.Second)

	got, err := p.Generate(context.Background(), inkwell.ProviderRequest{Prompt: "weather?"})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}

	want := inkwell.ProviderResponse{Text: "Il fait beau.", RequestID: "msg_01abc", AmountMicros: provider.Price("Il fait beau."),
		TokensUsed: 155, Usage: true, PromptTokens: 125, CompletionTokens: 30, FinishReason: "tool_calls", Response: got.Response}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	wantCompletion := `{"id":"msg_01abc","object":"chat.completion","created":` + jsonInt(anthropicNow.Unix()) + `,"model":"claude-x-20250101",
		"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Il fait beau.",
			"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lyon\"}"}}]}}],
		"usage":{"prompt_tokens":125,"completion_tokens":30,"total_tokens":155}}`
	if diff := cmp.Diff(mustJSONValue(t, []byte(wantCompletion)), mustJSONValue(t, got.Response)); diff != "" {
		t.Errorf("chat.completion (-want +got):\n%s", diff)
	}
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestAnthropic_StopReasons: each stop_reason's finish_reason, and the
// answers that have no text.
func TestAnthropic_StopReasons(t *testing.T) {
	t.Parallel()
	answer := func(content, stop string) string {
		return `{"id":"msg_1","model":"m","content":[` + content + `],"stop_reason":"` + stop + `","usage":{"input_tokens":1,"output_tokens":2}}`
	}
	const text, tool = `{"type":"text","text":"Some words."}`, `{"type":"tool_use","id":"t1","name":"f","input":{}}`
	tests := []struct {
		name, answer, wantFinish, wantText string
		wantContent                        any // the chat.completion message's content
	}{
		{"EndTurn", answer(text, "end_turn"), "stop", "Some words.", "Some words."},
		{"StopSequence", answer(text, "stop_sequence"), "stop", "Some words.", "Some words."},
		{"MaxTokens", answer(text, "max_tokens"), "length", "Some words.", "Some words."},
		{"ToolUseOnly", answer(tool, "tool_use"), "tool_calls", "", nil},
		{"RefusalEmpty", answer("", "refusal"), "content_filter", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startCapture(t, http.StatusOK, tt.answer, nil)
			got, err := mustAnthropic(t, srv.URL, 10*time.Second).Generate(context.Background(), inkwell.ProviderRequest{Prompt: "p"})
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if got.FinishReason != tt.wantFinish || got.Text != tt.wantText {
				t.Errorf("finish_reason, text = %q, %q; want %q, %q", got.FinishReason, got.Text, tt.wantFinish, tt.wantText)
			}
			c := mustJSONValue(t, got.Response).(map[string]any)
			choice := c["choices"].([]any)[0].(map[string]any)
			if content := choice["message"].(map[string]any)["content"]; content != tt.wantContent || choice["finish_reason"] != tt.wantFinish {
				t.Errorf("choice = %v, want content %v and finish_reason %q", choice, tt.wantContent, tt.wantFinish)
			}
		})
	}
}

func TestAnthropic_FailureClasses(t *testing.T) {
	t.Parallel()
	type setup struct {
		url     string
		timeout time.Duration
		sim     *simtest.Sim // when it is one: nothing may be billed
		reqs    func() int   // requests the server read, when it counts
	}
	simSetup := func(cfg providersim.Config, timeout time.Duration) func(t *testing.T) setup {
		return func(t *testing.T) setup {
			sim := simtest.MustStart(t, cfg)
			return setup{url: sim.URL, timeout: timeout, sim: sim}
		}
	}
	fakeSetup := func(status int, body string, header map[string]string) func(t *testing.T) setup {
		return func(t *testing.T) setup {
			srv := startCapture(t, status, body, header)
			return setup{url: srv.URL, timeout: 10 * time.Second, reqs: func() int { return len(srv.requests()) }}
		}
	}
	tests := []struct {
		name       string
		setup      func(t *testing.T) setup
		chat       string // a chat-form body; the short form when empty
		wantClass  string
		wantStatus int
		wantError  inkwell.ErrorClass
		wantRetry  time.Duration
		wantMsg    string
	}{
		{"RateLimited", fakeSetup(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, map[string]string{"retry-after": "7"}),
			"", provider.ClassRateLimited, 429, inkwell.ClassRateLimited, 7 * time.Second, "rate_limit_error: slow down"},
		{"Overloaded", simSetup(providersim.Config{FailRate: 1}, 10*time.Second),
			"", provider.ClassServer, 529, inkwell.ClassProviderError, 0, "overloaded_error: Overloaded"},
		{"ServerError", fakeSetup(500, `{"type":"error","error":{"type":"api_error","message":"oops"}}`, nil),
			"", provider.ClassServer, 500, inkwell.ClassProviderError, 0, "api_error: oops"},
		{"BadRequestEchoesKey", fakeSetup(400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too many for key AUTH"}}`, nil),
			"", provider.ClassClient, 400, inkwell.ClassRejected, 0, "invalid_request_error: max_tokens: too many for key [redacted]"},
		{"Unauthorized", fakeSetup(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, nil),
			"", provider.ClassClient, 401, inkwell.ClassRejected, 0, "authentication_error: invalid x-api-key"},
		{"Hang", simSetup(providersim.Config{HangRate: 1}, 100*time.Millisecond),
			"", provider.ClassTimeout, 0, inkwell.ClassTimeout, 0, ""},
		{"ResetAfterRequestWritten", func(t *testing.T) setup {
			url, reqs := simtest.ResetAfterRead(t)
			return setup{url: url, timeout: 10 * time.Second, reqs: reqs}
		}, "", provider.ClassNetwork, 0, inkwell.ClassTimeout, 0, "may have reached the provider"},
		{"ConnectionRefused", func(t *testing.T) setup { return setup{url: "http://" + closedAddr(t), timeout: 10 * time.Second} },
			"", provider.ClassConnRefused, 0, inkwell.ClassNotSent, 0, ""},
		{"MalformedNotJSON", fakeSetup(200, `<html>AUTH</html>`, nil), "", provider.ClassMalformed, 200, inkwell.ClassMalformed, 0, ""},
		{"MalformedNoID", fakeSetup(200, `{"content":[{"type":"text","text":"w"}],"stop_reason":"end_turn"}`, nil),
			"", provider.ClassMalformed, 200, inkwell.ClassMalformed, 0, "no id"},
		{"MalformedNoText", fakeSetup(200, `{"id":"msg_1","content":[],"stop_reason":"end_turn"}`, nil),
			"", provider.ClassMalformed, 200, inkwell.ClassMalformed, 0, "no text"},
		{"UnmappableImage", fakeSetup(200, okMessage, nil),
			`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://host/cat.png"}}]}]}`,
			provider.ClassClient, 0, inkwell.ClassRejected, 0, "image_url.url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := tt.setup(t)
			req := inkwell.ProviderRequest{IdempotencyKey: "job-1", Prompt: "p", MaxWords: 5}
			if tt.chat != "" {
				req.Chat = mustChat(t, tt.chat)
			}

			_, err := mustAnthropic(t, s.url, s.timeout).Generate(context.Background(), req)

			ce, ok := provider.AsCallError(err)
			if !ok {
				t.Fatalf("Generate error = %v (%T), want a *CallError", err, err)
			}
			if ce.Class != tt.wantClass || ce.Status != tt.wantStatus || ce.ErrorClass() != tt.wantError {
				t.Errorf("class, status, error class = %q, %d, %q; want %q, %d, %q (%v)",
					ce.Class, ce.Status, ce.ErrorClass(), tt.wantClass, tt.wantStatus, tt.wantError, err)
			}
			if retry, limited := ce.RateLimited(); retry != tt.wantRetry || limited != (tt.wantClass == provider.ClassRateLimited) {
				t.Errorf("RateLimited() = %v, %t; want %v", retry, limited, tt.wantRetry)
			}
			if !strings.Contains(ce.Msg, tt.wantMsg) {
				t.Errorf("message %q does not contain %q", ce.Msg, tt.wantMsg)
			}
			if strings.Contains(err.Error(), apiKey) {
				t.Errorf("error %q contains the API key", err)
			}
			wantReqs := 1
			if tt.wantClass == provider.ClassClient && tt.wantStatus == 0 {
				wantReqs = 0 // refused before sending
			}
			if s.reqs != nil && s.reqs() != wantReqs {
				t.Errorf("server read %d requests, want %d (never a retry inside a call)", s.reqs(), wantReqs)
			}
			if s.sim != nil && s.sim.MustLedger(t).TotalBills != 0 {
				t.Errorf("ledger = %+v, want nothing billed for a failed call", s.sim.MustLedger(t))
			}
		})
	}
}

// TestAnthropic_SimulatorRateLimit: the simulator's limit reaches the
// caller as a 429 with its retry-after, and bills nothing.
func TestAnthropic_SimulatorRateLimit(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{RPM: 30}) // one call every 2 s
	p := mustAnthropic(t, sim.URL, 10*time.Second)
	if _, err := p.Generate(context.Background(), inkwell.ProviderRequest{IdempotencyKey: "a", Prompt: "p", MaxWords: 3}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	_, err := p.Generate(context.Background(), inkwell.ProviderRequest{IdempotencyKey: "b", Prompt: "p", MaxWords: 3})
	ce, ok := provider.AsCallError(err)
	if !ok || ce.Class != provider.ClassRateLimited || ce.Status != 429 || ce.RetryAfter != 2*time.Second {
		t.Fatalf("second call: %v, want rate limited, HTTP 429, retry-after 2s", err)
	}
	if got := sim.MustLedger(t).Billed("b"); got != 0 {
		t.Errorf("Billed(b) = %d, want 0", got)
	}
}

func TestNewAnthropic_URL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://api.anthropic.com":      "https://api.anthropic.com/v1/messages",
		"https://api.anthropic.com/v1/":  "https://api.anthropic.com/v1/messages",
		"http://127.0.0.1:9090/proxy/v1": "http://127.0.0.1:9090/proxy/v1/messages",
	} {
		p, err := provider.NewAnthropic(provider.AnthropicConfig{URL: in})
		if err != nil || p.Endpoint() != want {
			t.Errorf("NewAnthropic(%q) endpoint = %v, %v; want %q", in, p, err, want)
		}
	}
	for _, bad := range []string{"", "api.anthropic.com", "ftp://host"} {
		if _, err := provider.NewAnthropic(provider.AnthropicConfig{URL: bad}); inkwell.ErrorCode(err) != inkwell.EINVALID {
			t.Errorf("NewAnthropic(%q) = %v, want EINVALID", bad, err)
		}
	}
}

package provider_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
)

// apiKey must never show up in an error, whatever the server says.
const apiKey = "sk-test-7f3a9c-never-print-me"

func mustOpenAI(t *testing.T, url string, timeout time.Duration) *provider.OpenAI {
	t.Helper()
	p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: url, APIKey: apiKey, Timeout: timeout})
	if err != nil {
		t.Fatalf("NewOpenAI(%q): %v", url, err)
	}
	return p
}

func mustGenerate(t *testing.T, p *provider.OpenAI, req inkwell.ProviderRequest) inkwell.ProviderResponse {
	t.Helper()
	res, err := p.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("Generate(key %q): %v", req.IdempotencyKey, err)
	}
	return res
}

func TestOpenAI_SameKeyBillsOnce(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	p := mustOpenAI(t, sim.URL, 10*time.Second)
	req := inkwell.ProviderRequest{IdempotencyKey: inkwell.ProviderKey(1, "client-key"), Prompt: "a note on rivers", MaxWords: 17}

	first := mustGenerate(t, p, req)
	second := mustGenerate(t, p, req)

	if !reflect.DeepEqual(second, first) {
		t.Errorf("repeated key answered %+v, want the first answer %+v", second, first)
	}
	// MaxWords reached the simulator through max_tokens, and both providers
	// write the same text for the same request.
	if want := provider.Generate(req.Prompt, req.MaxWords); first.Text != want {
		t.Errorf("Text = %q, want %q", first.Text, want)
	}
	if want := int64(17 * provider.MicrosPerWord); first.AmountMicros != want {
		t.Errorf("AmountMicros = %d, want %d", first.AmountMicros, want)
	}
	l := sim.MustLedger(t)
	e, ok := l.Entry(req.IdempotencyKey)
	if !ok || len(l.Entries) != 1 {
		t.Fatalf("ledger = %+v, want one entry for key %q", l, req.IdempotencyKey)
	}
	if e.Bills != 1 || e.Calls != 2 || l.TotalBills != 1 {
		t.Errorf("bills, calls, total bills = %d, %d, %d; want 1, 2, 1", e.Bills, e.Calls, l.TotalBills)
	}
	if e.RequestID != first.RequestID || e.AmountMicros != first.AmountMicros || e.Text != first.Text {
		t.Errorf("ledger entry %+v does not match the answer %+v", e, first)
	}
}

func TestOpenAI_NoKeyBillsEachCall(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	p := mustOpenAI(t, sim.URL, 10*time.Second)
	req := inkwell.ProviderRequest{Prompt: "a note on rivers", MaxWords: 5}

	first := mustGenerate(t, p, req)
	second := mustGenerate(t, p, req)

	if first.RequestID == second.RequestID {
		t.Errorf("two keyless calls share request id %q, want one request each", first.RequestID)
	}
	l := sim.MustLedger(t)
	if got, want := l.TotalBills, int64(2); got != want {
		t.Errorf("total bills = %d, want %d", got, want)
	}
	if got, want := l.TotalAmountMicros, first.AmountMicros+second.AmountMicros; got != want {
		t.Errorf("total amount = %d, want %d", got, want)
	}
}

func TestOpenAI_ConcurrentSameKeyBillsOnce(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	p := mustOpenAI(t, sim.URL, 10*time.Second)
	req := inkwell.ProviderRequest{IdempotencyKey: "job-concurrent", Prompt: "race", MaxWords: 9}

	const n = 12
	answers := make([]inkwell.ProviderResponse, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i], errs[i] = p.Generate(context.Background(), req)
		})
	}
	close(start)
	wg.Wait()

	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if !reflect.DeepEqual(answers[i], answers[0]) {
			t.Errorf("call %d answered %+v, want %+v", i, answers[i], answers[0])
		}
	}
	l := sim.MustLedger(t)
	if e, _ := l.Entry(req.IdempotencyKey); l.TotalBills != 1 || e.Calls != n {
		t.Errorf("total bills = %d, calls = %d; want 1, %d", l.TotalBills, e.Calls, n)
	}
}

func TestOpenAI_URLForms(t *testing.T) {
	t.Parallel()
	sim := simtest.MustStart(t, providersim.Config{})
	for _, url := range []string{sim.URL, sim.URL + "/", sim.URL + "/v1", sim.URL + "/v1/"} {
		p := mustOpenAI(t, url, 10*time.Second)
		mustGenerate(t, p, inkwell.ProviderRequest{IdempotencyKey: "url " + url, Prompt: "p", MaxWords: 3})
	}
	if got, want := sim.MustLedger(t).TotalBills, int64(4); got != want {
		t.Errorf("total bills = %d, want %d", got, want)
	}
}

func TestNewOpenAI_BadURL(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"", "127.0.0.1:8080", "ftp://host", "http://", "://x"} {
		if _, err := provider.NewOpenAI(provider.OpenAIConfig{URL: url, APIKey: apiKey}); err == nil {
			t.Errorf("NewOpenAI(%q) = nil error, want a refusal", url)
		} else if strings.Contains(err.Error(), apiKey) {
			t.Errorf("NewOpenAI(%q) error %q contains the API key", url, err)
		}
	}
}

// TestOpenAI_SendsRequest checks the wire format against a fake of the
// outside world that records what arrived.
func TestOpenAI_SendsRequest(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path, auth, key, contentType string
		body                                 map[string]any
	}
	got := make(chan seen, 2)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"), nil}
		json.NewDecoder(r.Body).Decode(&s.body)
		got <- s
		io.WriteString(w, `{"id":"req-1","choices":[{"message":{"content":"fine words"}}]}`)
	}))
	t.Cleanup(fake.Close)
	p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: fake.URL, APIKey: apiKey, Model: "m-1"})
	if err != nil {
		t.Fatal(err)
	}

	mustGenerate(t, p, inkwell.ProviderRequest{IdempotencyKey: "job-7", Prompt: "hello", MaxWords: 40})
	s := <-got
	if s.method != "POST" || s.path != "/v1/chat/completions" || s.contentType != "application/json" {
		t.Errorf("request = %s %s (%s), want POST /v1/chat/completions (application/json)", s.method, s.path, s.contentType)
	}
	if s.auth != "Bearer "+apiKey || s.key != "job-7" {
		t.Errorf("Authorization, Idempotency-Key = %q, %q; want the bearer key and %q", s.auth, s.key, "job-7")
	}
	body, _ := json.Marshal(s.body)
	if want := `{"max_tokens":80,"messages":[{"content":"hello","role":"user"}],"model":"m-1"}`; string(body) != want {
		t.Errorf("body = %s, want %s", body, want)
	}

	mustGenerate(t, p, inkwell.ProviderRequest{Prompt: "hello"})
	if s := <-got; s.key != "" {
		t.Errorf("keyless call sent Idempotency-Key %q, want none", s.key)
	}
}

func TestOpenAI_Amount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		answer         string
		microsPerToken int64
		want           int64
	}{
		{"SimulatorSaysWhatItBilled", `"usage":{"total_tokens":10},"inkwell_amount_micros":777`, 5, 777},
		{"TokensAtConfiguredPrice", `"usage":{"total_tokens":10}`, 5, 50},
		{"OwnWordPriceWithoutTokenPrice", `"usage":{"total_tokens":10}`, 0, 3 * provider.MicrosPerWord},
		{"OwnWordPriceWithoutUsage", `"x":1`, 5, 3 * provider.MicrosPerWord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"id":"r","choices":[{"message":{"content":"three little words"}}],`+tt.answer+`}`)
			}))
			t.Cleanup(fake.Close)
			p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: fake.URL, MicrosPerToken: tt.microsPerToken})
			if err != nil {
				t.Fatal(err)
			}
			if got := mustGenerate(t, p, inkwell.ProviderRequest{Prompt: "p"}).AmountMicros; got != tt.want {
				t.Errorf("AmountMicros = %d, want %d", got, tt.want)
			}
		})
	}
}

// closedAddr is a loopback address nothing listens on any more.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// fakeAnswer starts a fake provider that always answers status and body,
// echoing the request's Authorization header where the body says AUTH, as
// a careless server might. It counts the requests it got.
func fakeAnswer(t *testing.T, status int, body string, header map[string]string) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		io.WriteString(w, strings.ReplaceAll(body, "AUTH", r.Header.Get("Authorization")))
	}))
	t.Cleanup(fake.Close)
	return fake.URL, &n
}

func TestOpenAI_TokensUsed(t *testing.T) {
	t.Parallel()
	answer := func(usage string) string {
		return `{"id":"r1","choices":[{"message":{"content":"some words"}}]` + usage + `}`
	}
	tests := []struct {
		name, body string
		want       int
	}{
		{"FromTotalTokens", answer(`,"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}`), 42},
		{"NoUsage", answer(""), 0},
		{"NegativeUsage", answer(`,"usage":{"total_tokens":-5}`), 0},
		{"ImpossibleUsage", answer(`,"usage":{"total_tokens":99999999999999}`), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, _ := fakeAnswer(t, http.StatusOK, tt.body, nil)
			got := mustGenerate(t, mustOpenAI(t, url, 10*time.Second), inkwell.ProviderRequest{Prompt: "p"})
			if got.TokensUsed != tt.want {
				t.Errorf("TokensUsed = %d, want %d", got.TokensUsed, tt.want)
			}
		})
	}
}

// TestOpenAI_EmptyAnswerWithUsageIsAnAnswer: an answer with no text that
// reports its usage was billed, so it is an answer (text "", its finish
// reason and usage kept for the charge), not a malformed one that would
// fail the job uncharged: a reasoning model that spends
// max_completion_tokens thinking answers content "" with finish_reason
// "length". Without a usage nothing says what was billed: still malformed
// (callerror_test.go, MalformedEmptyContent and MalformedNullContent).
func TestOpenAI_EmptyAnswerWithUsageIsAnAnswer(t *testing.T) {
	t.Parallel()
	const usage = `"usage":{"prompt_tokens":40,"completion_tokens":256,"total_tokens":296}`
	for _, tc := range []struct{ name, message, text string }{
		{"EmptyString", `{"role":"assistant","content":""}`, ""},
		{"WhiteSpace", `{"role":"assistant","content":"\n"}`, "\n"},
		{"Null", `{"role":"assistant","content":null}`, ""},
		{"NoContent", `{"role":"assistant"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := `{"id":"chatcmpl-empty","object":"chat.completion","choices":[{"index":0,"message":` + tc.message + `,"finish_reason":"length"}],` + usage + `}`
			url, _ := fakeAnswer(t, http.StatusOK, body, nil)
			got := mustGenerate(t, mustOpenAI(t, url, 10*time.Second), inkwell.ProviderRequest{Prompt: "p"})
			if got.Text != tc.text || got.FinishReason != "length" || got.RequestID != "chatcmpl-empty" ||
				!got.Usage || got.PromptTokens != 40 || got.CompletionTokens != 256 {
				t.Errorf("answer %+v; want text %q, finish length, id chatcmpl-empty, usage 40+256", got, tc.text)
			}
		})
	}
}

package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// The output bound of the chat form (docs/api.md, docs/providers.md): what
// a call may cost is bounded by the output limit Inkwell checked and
// reserved. A null limit names none: the bound is sent (it went out
// unbounded until openai.go chatBody dropped the null).

// TestChatForm_NullOutputLimitIsSentAsTheModelsBound:
// "max_completion_tokens": null is accepted as naming no limit: accept
// reserves the model's bound (1000 tokens on gpt-mini). The OpenAI
// provider used to add the bound only when neither member was present, so
// the call went out with "max_completion_tokens": null and no bound at
// all: the provider wrote as much as it liked, and the charge could pass
// the reservation.
//
// docs/providers.md: "when the request names no output limit,
// `max_completion_tokens` is added at the model's `max_output_tokens`, so
// what a call may cost is bounded"; docs/api.md: "absent, that bound is
// sent". A null limit names no limit: the bound must be sent (or a null
// refused at accept, 400). The fix is in internal/provider/openai.go
// chatBody: a null member is read as absent.
// The request is built as the worker's providerRequest builds it
// (internal/worker/route.go): the payload accept stored, read back, with
// the model's OutputBound.
func TestChatForm_NullOutputLimitIsSentAsTheModelsBound(t *testing.T) {
	t.Parallel()
	e := catalogEnv(t)
	for _, member := range []string{"max_completion_tokens", "max_tokens"} {
		r := e.post("null-"+member, `{"model":"gpt-mini","messages":[{"role":"user","content":"x"}],"`+member+`":null}`)
		if r.status == http.StatusBadRequest {
			continue // refused at accept: nothing unbounded can be sent
		}
		if r.status != http.StatusCreated {
			t.Fatalf("%s null: %d %s", member, r.status, r.body)
		}
		job := e.storedJob(r.detail(t).Job.ID)
		w, err := inkwell.ReadPayload(job.Payload)
		if err != nil {
			t.Fatal(err)
		}
		chat := w.Chat
		chat.Model = gptMini.Upstream
		chat.MaxOutputTokens = gptMini.OutputBound(w.Chat) // as worker.providerRequest does

		var mu sync.Mutex
		var sent map[string]json.RawMessage
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			_ = json.Unmarshal(b, &sent)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, completion)
		}))
		t.Cleanup(upstream.Close)
		p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: upstream.URL, Timeout: 10 * time.Second, Client: upstream.Client(), Logger: storetest.TestLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Generate(t.Context(), inkwell.ProviderRequest{IdempotencyKey: "k", Chat: chat}); err != nil {
			t.Fatalf("Generate: %v", err)
		}
		mu.Lock()
		bound := func(name string) (int, bool) {
			var n int
			raw, ok := sent[name]
			return n, ok && json.Unmarshal(raw, &n) == nil && n > 0
		}
		n1, ok1 := bound("max_completion_tokens")
		n2, ok2 := bound("max_tokens")
		mu.Unlock()
		if !ok1 && !ok2 {
			t.Errorf("%s null, reserved at gpt-mini's bound (%d tokens): the call went out with max_completion_tokens %s, max_tokens %s: no bound; want max_completion_tokens %d",
				member, gptMini.MaxOutputTokens, sent["max_completion_tokens"], sent["max_tokens"], gptMini.MaxOutputTokens)
		} else if (ok1 && n1 > gptMini.MaxOutputTokens) || (ok2 && n2 > gptMini.MaxOutputTokens) {
			t.Errorf("%s null: sent bounds %d / %d, over the model's %d", member, n1, n2, gptMini.MaxOutputTokens)
		}
	}
}

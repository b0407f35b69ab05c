package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// TestChatCompletions_ResendOfPrunedJobSaysPruned: a chat job done, then
// pruned by retention (its prompt, text and whole answer removed), then
// its client re-sends POST /v1/chat/completions with the same key and
// body (an SDK retry, or "send the same request with the same key to wait
// on it again"). Answered 200 with a chat.completion whose content is ""
// and whose usage is the original's, the re-send would pass an empty
// answer off as the model's, nothing saying it was pruned
// (docs/retention.md promises "200 with the pruned job" for POST
// /v1/jobs, where pruned_at shows it; the chat form has no such field).
// The pruned job is answered 410 with the code "pruned" and
// X-Should-Retry: false (docs/retention.md), never an empty completion as
// if it were the answer.
func TestChatCompletions_ResendOfPrunedJobSaysPruned(t *testing.T) {
	t.Parallel()
	e := catalogEnv(t)
	const body = `{"model":"gpt-mini","messages":[{"role":"user","content":"secret question"}]}`
	h := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "pruned-chat"}
	if r := e.post("pruned-chat", body); r.status != http.StatusCreated {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	l, err := e.st.LockLane(t.Context(), "local")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	cs, err := e.st.ClaimUpTo(t.Context(), l, 1)
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %v %v", cs, err)
	}
	const answer = `{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"secret answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":21,"completion_tokens":17,"total_tokens":38}}`
	if err := e.st.CompleteIfRunning(t.Context(), store.CompleteParams{JobID: cs[0].Job.ID, AttemptID: cs[0].Attempt.ID, Text: "secret answer",
		Account: inkwell.DefaultAccount, AmountMicros: 14, ProviderRequestID: "chatcmpl-1", Model: "gpt-4o-mini", Response: []byte(answer),
		FinishReason: "stop", PromptTokens: 21, CompletionTokens: 17, Usage: true}); err != nil {
		t.Fatal(err)
	}
	if r := e.do(http.MethodPost, "/v1/chat/completions", h, []byte(body)); r.status != http.StatusOK || !strings.Contains(string(r.body), "secret answer") {
		t.Fatalf("re-send before prune: %d %s; want the answer", r.status, r.body)
	}
	if _, err := e.st.Prune(t.Context(), time.Now().Add(time.Hour), store.PruneOptions{}); err != nil {
		t.Fatal(err)
	}
	r := e.do(http.MethodPost, "/v1/chat/completions", h, []byte(body))
	if r.status != http.StatusGone || !strings.Contains(string(r.body), `"code": "pruned"`) || strings.Contains(string(r.body), "chat.completion") {
		t.Errorf("re-send of a pruned chat job: %d %s\nwant 410 with code pruned, never a completion passed off as the answer", r.status, r.body)
	}
	if got := r.header.Get("X-Should-Retry"); got != "false" {
		t.Errorf("re-send of a pruned chat job: X-Should-Retry %q, want false (a re-send answers the same pruned job)", got)
	}
}

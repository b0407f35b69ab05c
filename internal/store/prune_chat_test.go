package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Prune of chat-form jobs (docs/design.md §9, §12): the payload loses its
// "messages" (the prompt), the result its text and its whole answer
// (results.response, NULL afterwards); everything else about the job, its
// usage, model, finish_reason and its charge stays. On both dialects.

// chatAcceptParams is a chat-form job as the API stores it (ChatPayload).
func chatAcceptParams(t *testing.T, key, body string) store.AcceptParams {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &fields); err != nil {
		t.Fatal(err)
	}
	c, err := inkwell.ParseChat(fields)
	if err != nil {
		t.Fatalf("ParseChat(%s): %v", body, err)
	}
	payload := inkwell.ChatPayload(c, "acme", json.RawMessage(`{"ticket":"T-1"}`))
	return store.AcceptParams{Account: "acme", IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload}
}

const chatJobBody = `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"secret system prompt"},{"role":"user","content":"secret question"}],"temperature":0.7,"max_completion_tokens":200}`

const chatAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"secret answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":21,"completion_tokens":17,"total_tokens":38}}`

// finishedChat accepts a chat job and runs it to done (with the whole
// answer and its usage) or failed, at the clock's time.
func (f *pruneFixture) finishedChat(key string, done bool) inkwell.Job {
	f.t.Helper()
	mustAccept(f.t, f.s, chatAcceptParams(f.t, key, chatJobBody))
	c := claimOne(f.t, f.s, f.lane)
	if done {
		if err := f.s.CompleteIfRunning(f.t.Context(), store.CompleteParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Text: "secret answer",
			Account: "acme", AmountMicros: 14, ProviderRequestID: "chatcmpl-1", Model: "gpt-4o-mini", Response: []byte(chatAnswer),
			FinishReason: "stop", PromptTokens: 21, CompletionTokens: 17, Usage: true}); err != nil {
			f.t.Fatalf("complete %s: %v", key, err)
		}
	} else {
		mustFailClass(f.t, f.s, c, "provider: provider call: client error: 400 no", inkwell.ClassRejected)
	}
	return mustShow(f.t, f.s, c.Job.ID).Job
}

func TestStore_PruneChatJob(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		oldDone := f.finishedChat("old-done", true)
		oldFailed := f.finishedChat("old-failed", false)
		f.clock.Advance(48 * time.Hour)
		newDone := f.finishedChat("new-done", true)
		cutoff := f.clock.Now().Add(-24 * time.Hour)

		details := map[int64]inkwell.JobDetail{}
		for _, id := range []int64{oldDone.ID, oldFailed.ID, newDone.ID} {
			details[id] = mustShow(t, s, id)
		}
		if d := details[oldDone.ID]; d.Result == nil || string(d.Result.Response) != chatAnswer || d.Result.Text != "secret answer" {
			t.Fatalf("before prune: result %+v, want the text and the answer kept", d.Result)
		}
		f.clock.Advance(time.Minute)
		rep := mustPrune(t, s, cutoff, store.PruneOptions{})
		if rep.Pruned != 2 || rep.PrunedDone != 1 || rep.PrunedFailed != 1 {
			t.Errorf("report %+v, want 2 pruned (1 done, 1 failed)", rep)
		}
		assertIntact(t, s)

		prunedAt := f.clock.Now()
		const wantPayload = `{"account":"acme","max_completion_tokens":200,"metadata":{"ticket":"T-1"},"model":"gpt-4o-mini","temperature":0.7}`
		for _, id := range []int64{oldDone.ID, oldFailed.ID} {
			want := details[id]
			want.Job.Payload = []byte(wantPayload)
			want.Job.PrunedAt = &prunedAt
			if want.Result != nil {
				// The text and the whole answer go; the model, the usage
				// and why it stopped stay, as the charge does.
				want.Result.Text = ""
				want.Result.Response = nil
			}
			if diff := cmp.Diff(want, mustShow(t, s, id)); diff != "" {
				t.Errorf("pruned job %d (-want +got):\n%s", id, diff)
			}
		}
		if n := count(t, s, `SELECT COUNT(*) FROM results WHERE job_id = $1 AND response IS NULL AND text = ''`, oldDone.ID); n != 1 {
			t.Errorf("results row of job %d: %d rows with response NULL and text '', want 1", oldDone.ID, n)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE pruned_at IS NOT NULL AND payload LIKE '%secret%'`); n != 0 {
			t.Errorf("%d pruned jobs still hold the prompt", n)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.pruned_at IS NOT NULL AND (r.text LIKE '%secret%' OR r.response LIKE '%secret%')`); n != 0 {
			t.Errorf("%d pruned results still hold the answer", n)
		}
		if c := mustShow(t, s, oldDone.ID).Charge; c == nil || c.AmountMicros != 14 || c.Model != "gpt-4o-mini" || c.PromptTokens == nil || *c.PromptTokens != 21 ||
			c.CompletionTokens == nil || *c.CompletionTokens != 17 {
			t.Errorf("charge after prune %+v, want it kept: 14 micros, gpt-4o-mini, 21 and 17 tokens", c)
		}
		if diff := cmp.Diff(details[newDone.ID], mustShow(t, s, newDone.ID)); diff != "" {
			t.Errorf("the newer chat job, not to be pruned, changed (-before +after):\n%s", diff)
		}

		// A re-send of the pruned key is answered with the pruned job.
		got, created, err := s.Accept(t.Context(), chatAcceptParams(t, "old-done", chatJobBody))
		if err != nil || created || got.ID != oldDone.ID || got.PrunedAt == nil || got.Status != inkwell.StatusDone {
			t.Errorf("re-send of pruned old-done: job %+v created %t err %v; want the pruned job, not created", got, created, err)
		}
	})
}

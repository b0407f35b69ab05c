package worker_test

// Real-world provider answers through a lane (a real store, the real
// provider clients, httptest servers sending the APIs' own bytes): how
// many calls each makes, what the job and its reservation become.

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// gpt4oMini is a priced OpenAI model (gpt-4o-mini's prices).
var gpt4oMini = inkwell.Model{Name: "gpt-4o-mini", Provider: "openai", Upstream: "gpt-4o-mini", InputMicrosPerMTok: 150_000,
	OutputMicrosPerMTok: 600_000, MaxOutputTokens: 256}

// TestLane_InsufficientQuotaFailsAfterOneCall: OpenAI answers every call
// 429 insufficient_quota (the account's credit is spent; no Retry-After).
// No retry can succeed until someone pays, so the job must fail after one
// call, with a class that is not rate_limited (the operator must not be
// told to wait), and its reservation released (a 429 bills nothing).
// It used to be a rate limit: the job was sent again and again, up to
// --max-rate-limited (here 20; default 50) calls, each pausing the whole
// provider, and ended "rate_limited".
func TestLane_InsufficientQuotaFailsAfterOneCall(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	srv := startWire(t, func(int, map[string]json.RawMessage) (int, string) {
		return 429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	})
	router := singleRoute(t, gpt4oMini, srv, false, 10*time.Second)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Summarise the attached minutes."}]}`
	worst := router.WorstCase(inkwell.Work{Chat: parseChat(t, body)}, gpt4oMini)
	if _, err := st.CreateAccount(t.Context(), store.Account{Name: "acme", BudgetMicros: &worst}); err != nil {
		t.Fatal(err)
	}
	job := acceptChat(t, st, "quota-1", "acme", body, nil, worst)
	startLane(t, st, worker.Config{Router: router, Poll: 20 * time.Millisecond,
		Retry: worker.RetryPolicy{MaxAttempts: 5, MaxRateLimited: 20, Base: 5 * time.Millisecond, Cap: 10 * time.Millisecond}}).lane.Wake()
	d := waitJob(t, st, job.ID, "failed", isStatus(inkwell.StatusFailed))
	r, err := st.Reservation(t.Context(), job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(srv.received()); n != 1 || d.Job.ErrorClass == inkwell.ClassRateLimited || r.State != store.ReservationReleased {
		t.Errorf("insufficient_quota: OpenAI got %d calls, the job failed %q after %d attempts (%s), reservation %s; "+
			"want 1 call, a class other than rate_limited (waiting cannot help: the account must be paid), the reservation released",
			n, d.Job.ErrorClass, len(d.Attempts), d.Job.Error, r.State)
	}
}

// TestLane_Cloudflare524IsNotSentTwiceToAnthropic: Anthropic's API sits
// behind Cloudflare, which answers 524 when the origin took the request
// but did not answer within 100 s; the origin finishes it, and bills it.
// Anthropic honours no idempotency key, so the call must not be sent
// again automatically: one call, the job failed timeout, its reservation
// kept open (it may have been billed). 524 used to be a provider_error:
// the lane sent it again at once and Anthropic billed a second message;
// the user was charged once, the operator paid twice.
func TestLane_Cloudflare524IsNotSentTwiceToAnthropic(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	srv := startAnthropicWire(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Content-Type", "text/html; charset=UTF-8")
			w.Header().Set("Server", "cloudflare")
			w.WriteHeader(524)
			io.WriteString(w, "<!DOCTYPE html><html><head><title>api.anthropic.com | 524: A timeout occurred</title></head>"+
				"<body><h1>Error 524</h1><h2>A timeout occurred</h2><p>The origin web server timed out responding to this request.</p></body></html>")
			return
		}
		writeAnthropic(w, 200, `{"id":"msg_01Second","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Here is the report."}],
			"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3000,"output_tokens":900}}`)
	})
	router := anthropicRoute(t, srv.url, 10*time.Second)
	job, _ := budgetedAccept(t, st, router, `{"model":"claude","max_tokens":1000,"messages":[{"role":"user","content":"Write the quarterly report."}]}`)
	startLane(t, st, worker.Config{Router: router, Poll: 20 * time.Millisecond,
		Retry: worker.RetryPolicy{MaxAttempts: 3, Base: 5 * time.Millisecond, Cap: 10 * time.Millisecond}}).lane.Wake()
	d := waitJob(t, st, job.ID, "ended", func(d inkwell.JobDetail) bool {
		return d.Job.Status == inkwell.StatusDone || d.Job.Status == inkwell.StatusFailed
	})
	r, err := st.Reservation(t.Context(), job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.calls.Load(); n != 1 || d.Job.Status != inkwell.StatusFailed || d.Job.ErrorClass != inkwell.ClassTimeout || r.State != store.ReservationOpen {
		t.Errorf("Cloudflare 524 from Anthropic: %d calls to Anthropic, job %s class %q, reservation %s; "+
			"want 1 call (the first may have been billed behind Cloudflare, and Anthropic bills every call), the job failed %q, its reservation open",
			n, d.Job.Status, d.Job.ErrorClass, r.State, inkwell.ClassTimeout)
	}
}

// gemini25Flash is a priced Gemini model on Google's OpenAI-compatible
// endpoint (gemini-2.5-flash's prices: 0.30 in, 2.50 out a million tokens;
// thinking tokens are billed as output).
var gemini25Flash = inkwell.Model{Name: "gemini-2.5-flash", Provider: "google", Upstream: "gemini-2.5-flash", InputMicrosPerMTok: 300_000,
	OutputMicrosPerMTok: 2_500_000, MaxOutputTokens: 8192}

// TestLane_ChargesThinkingTokensCountedOnlyInTotal: a Gemini 2.5 answer on
// the OpenAI-compatible endpoint counts its thinking tokens in
// total_tokens but not in completion_tokens (prompt 138, completion 24,
// total 448: 286 thinking tokens), and Google bills them at the output
// price. The charge must cover what was billed, at least 138 prompt and
// 310 output tokens; charged 138 + 24 tokens, the operator pays Google
// for 286 output tokens nobody is charged (here over 90% of the call's
// cost), on every call of a thinking model.
func TestLane_ChargesThinkingTokensCountedOnlyInTotal(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	srv := startWire(t, func(int, map[string]json.RawMessage) (int, string) {
		return 200, `{"id":"Yh4oaJ6cFr2Wz7IPx8","choices":[{"finish_reason":"stop","index":0,"message":{"content":"OK. I can book a flight from London to Tokyo for Jane Doe, age 34. Shall I proceed?","role":"assistant"}}],` +
			`"created":1747469284,"model":"gemini-2.5-flash","object":"chat.completion","usage":{"completion_tokens":24,"prompt_tokens":138,"total_tokens":448}}`
	})
	router := singleRoute(t, gemini25Flash, srv, false, 10*time.Second)
	body := `{"model":"gemini-2.5-flash","max_tokens":1024,"messages":[{"role":"user","content":"Book a flight from London to Tokyo for Jane Doe, age 34."}]}`
	worst := router.WorstCase(inkwell.Work{Chat: parseChat(t, body)}, gemini25Flash)
	job := acceptChat(t, st, "gemini-1", "acme", body, nil, worst)
	startLane(t, st, worker.Config{Router: router, Poll: 20 * time.Millisecond}).lane.Wake()
	d := waitJob(t, st, job.ID, "done", isStatus(inkwell.StatusDone))
	billed := gemini25Flash.Cost(138, 448-138)
	if d.Charge == nil || d.Charge.AmountMicros < billed {
		t.Errorf("charge %+v; Google billed 138 prompt + 310 output tokens (24 answer + 286 thinking: total_tokens 448) = %d micros; "+
			"want a charge of at least that (the worst case reserved is %d)", d.Charge, billed, worst)
	}
}

package worker_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// TestLane_429sCountApartFromMaxAttempts: a lane against a real HTTP
// provider, with --max-attempts 2 and --max-rate-limited 4. A job met by
// three 429s before its answer ends done (held to --max-attempts, it
// would have given up after two); a job answered 429 for ever gives up
// after its 4th; a job whose other failures reach --max-attempts gives up
// then, its 429s between them aside; a retry by hand starts the counts
// again. Each job keeps every attempt.
func TestLane_429sCountApartFromMaxAttempts(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		st := storetest.MustOpen(t, b.DSN, store.Options{})
		flaky := startFlakyProvider(t, func(w http.ResponseWriter, prompt string, n int) bool {
			fail := func(code int) bool { http.Error(w, http.StatusText(code), code); return true }
			switch {
			case strings.HasPrefix(prompt, "storm-then-answer") && n <= 3:
				return fail(http.StatusTooManyRequests)
			case strings.HasPrefix(prompt, "storm-for-ever"):
				return fail(http.StatusTooManyRequests)
			case strings.HasPrefix(prompt, "mixed") && (n == 1 || n == 4):
				return fail(http.StatusServiceUnavailable)
			case strings.HasPrefix(prompt, "mixed") && n <= 3:
				return fail(http.StatusTooManyRequests)
			}
			return false
		})
		prov, err := provider.NewOpenAI(provider.OpenAIConfig{URL: flaky.url, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		policy := worker.RetryPolicy{MaxAttempts: 2, MaxRateLimited: 4, Base: 10 * time.Millisecond, Cap: 30 * time.Millisecond}
		startLane(t, st, worker.Config{Provider: prov, Concurrency: 3, Poll: 50 * time.Millisecond, Retry: policy})

		answered := accept(t, st, "k-answered", "storm-then-answer", 3)
		forever := accept(t, st, "k-forever", "storm-for-ever", 3)
		mixed := accept(t, st, "k-mixed", "mixed", 3)
		rl, pe := inkwell.ClassRateLimited, inkwell.ClassProviderError

		d := waitJob(t, st, answered.ID, "the job met by three 429s done", isStatus(inkwell.StatusDone))
		wantClasses(t, "three 429s, then an answer", d, rl, rl, rl, "")
		if d.Result == nil || d.Charge == nil || d.Job.GaveUpAfter != 0 {
			t.Errorf("three 429s, then an answer: result %v charge %v gave up %d; want one result and one charge", d.Result, d.Charge, d.Job.GaveUpAfter)
		}

		d = waitJob(t, st, forever.ID, "the job answered 429 for ever failed", isStatus(inkwell.StatusFailed))
		wantClasses(t, "429 for ever", d, rl, rl, rl, rl)
		if d.Job.GaveUpAfter != 4 || d.Job.ErrorClass != rl || !strings.Contains(d.Job.Error, "gave up after 4 attempts") {
			t.Errorf("429 for ever: job %+v; want it to say it gave up after 4 attempts, rate limited", d.Job)
		}
		if n := flaky.callsOf("storm-for-ever"); n != 4 {
			t.Errorf("429 for ever: %d calls, want 4 (one per attempt, none after giving up)", n)
		}
		// A retry by hand gives the job its automatic retries again: four
		// more 429s, not one, before it gives up once more (gave_up_after
		// still counts every attempt).
		if _, err := st.RetryIfFailed(t.Context(), forever.ID, "cli"); err != nil {
			t.Fatalf("retry by hand: %v", err)
		}
		d = waitJob(t, st, forever.ID, "the job retried by hand failed again", func(d inkwell.JobDetail) bool {
			return d.Job.Status == inkwell.StatusFailed && len(d.Attempts) > 4
		})
		wantClasses(t, "429 for ever, retried by hand", d, rl, rl, rl, rl, rl, rl, rl, rl)
		if d.Job.GaveUpAfter != 8 {
			t.Errorf("429 for ever, retried by hand: gave up after %d, want 8", d.Job.GaveUpAfter)
		}

		d = waitJob(t, st, mixed.ID, "the mixed job failed", isStatus(inkwell.StatusFailed))
		wantClasses(t, "503, two 429s, 503", d, pe, rl, rl, pe)
		if d.Job.GaveUpAfter != 4 || d.Job.ErrorClass != pe {
			t.Errorf("503, two 429s, 503: job %+v; want it to give up after 4 attempts, at its second provider error", d.Job)
		}
	})
}

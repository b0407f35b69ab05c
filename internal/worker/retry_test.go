package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/limiter"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// Automatic retry (docs/design.md §9): the policy's decisions, the classes of
// real provider failures, and lanes that reschedule against a real HTTP
// provider on loopback.

func TestRetryPolicy_Decide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	half := func() float64 { return 0.5 }
	p := worker.RetryPolicy{MaxAttempts: 5, MaxRateLimited: 8, Base: time.Second, Cap: 10 * time.Second, Jitter: half}
	for _, tc := range []struct {
		class      inkwell.ErrorClass
		n, limited int // limited: of the n attempts, those answered 429 (-1: not known)
		since      int // attempts since the job's last retry by hand (0: all n)
		honours    bool
		retryAfter time.Duration
		wait       time.Duration // 0: no reschedule
		gaveUp     int
	}{
		{class: inkwell.ClassProviderError, n: 1, wait: 750 * time.Millisecond}, // 1s step: 0.5s + 0.5·0.5s
		{class: inkwell.ClassProviderError, n: 2, wait: 1500 * time.Millisecond},
		{class: inkwell.ClassNotSent, n: 3, wait: 3 * time.Second},
		{class: inkwell.ClassNotSent, n: 4, wait: 6 * time.Second},
		{class: inkwell.ClassProviderError, n: 5, gaveUp: 5}, // the last attempt: gave up
		{class: inkwell.ClassRateLimited, n: 1, limited: 1, retryAfter: 42 * time.Second, wait: 42 * time.Second},
		// A Retry-After past the cap is honoured up to the lane's longest
		// pause (limiter.MaxPause, 15 minutes), not for decades.
		{class: inkwell.ClassRateLimited, n: 1, limited: 1, retryAfter: 14 * time.Minute, wait: 14 * time.Minute},
		{class: inkwell.ClassRateLimited, n: 1, limited: 1, retryAfter: 73 * 365 * 24 * time.Hour, wait: limiter.MaxPause},
		{class: inkwell.ClassRateLimited, n: 2, limited: 2, wait: 1500 * time.Millisecond},
		// 429s count toward MaxRateLimited (8), not MaxAttempts (5), and
		// the other failures toward MaxAttempts only; each count is its
		// own back-off step.
		{class: inkwell.ClassRateLimited, n: 7, limited: 7, wait: 7500 * time.Millisecond}, // step capped at 10s
		{class: inkwell.ClassRateLimited, n: 8, limited: 5, retryAfter: 3 * time.Second, wait: 3 * time.Second},
		{class: inkwell.ClassRateLimited, n: 9, limited: 8, gaveUp: 9},
		{class: inkwell.ClassRateLimited, n: 12, limited: 8, retryAfter: time.Second, gaveUp: 12},
		{class: inkwell.ClassProviderError, n: 9, limited: 5, wait: 6 * time.Second}, // the 4th non-429: 8s step
		{class: inkwell.ClassProviderError, n: 10, limited: 5, gaveUp: 10},
		{class: inkwell.ClassNotSent, n: 2, limited: 1, wait: 750 * time.Millisecond},
		// Not known (the count could not be read): every attempt counts
		// toward MaxAttempts, as before 429s were counted apart.
		{class: inkwell.ClassProviderError, n: 5, limited: -1, gaveUp: 5},
		{class: inkwell.ClassRateLimited, n: 5, limited: -1, gaveUp: 5},
		{class: inkwell.ClassRateLimited, n: 4, limited: -1, wait: 6 * time.Second},
		// A retry by hand starts both counts again: attempts before it do
		// not count, and gave_up_after still counts every attempt.
		{class: inkwell.ClassRateLimited, n: 51, since: 1, limited: 1, wait: 750 * time.Millisecond},
		{class: inkwell.ClassProviderError, n: 6, since: 1, wait: 750 * time.Millisecond},
		{class: inkwell.ClassProviderError, n: 12, since: 9, limited: 4, gaveUp: 12},
		{class: inkwell.ClassRateLimited, n: 60, since: 10, limited: 8, gaveUp: 60},
		{class: inkwell.ClassTimeout, n: 1},  // keys not honoured: a retry may bill twice
		{class: inkwell.ClassShutdown, n: 1}, // the same
		{class: inkwell.ClassTimeout, n: 1, honours: true, wait: 750 * time.Millisecond},
		{class: inkwell.ClassShutdown, n: 5, honours: true, gaveUp: 5},
		{class: inkwell.ClassTimeout, n: 9, gaveUp: 0}, // never retried: nothing to give up
		{class: inkwell.ClassRejected, n: 1, honours: true},
		{class: inkwell.ClassMalformed, n: 1, honours: true},
		{class: inkwell.ClassUnstorable, n: 1, honours: true},
		{class: inkwell.ClassCancelled, n: 1, honours: true},
		{class: inkwell.ClassWorkerRestarted, n: 1, honours: true},
		{class: inkwell.ClassLegacy, n: 1, honours: true},
	} {
		q := p
		q.ProviderHonoursKeys = tc.honours
		at, gaveUp := worker.Decide(q, tc.class, tc.n, tc.since, tc.limited, tc.retryAfter, now)
		var wait time.Duration
		if at != nil {
			wait = at.Sub(now)
		}
		if wait != tc.wait || gaveUp != tc.gaveUp {
			t.Errorf("%s attempt %d, %d of them 429s (honours keys %t, retry-after %s): wait %s gave up %d; want wait %s gave up %d",
				tc.class, tc.n, tc.limited, tc.honours, tc.retryAfter, wait, gaveUp, tc.wait, tc.gaveUp)
		}
	}
	// The cap, and jitter's bounds: always within [step/2, step).
	for n := 1; n <= 20; n++ {
		for _, j := range []float64{0, 0.999} {
			q := p
			q.Jitter = func() float64 { return j }
			q.MaxAttempts = 100
			at, _ := worker.Decide(q, inkwell.ClassNotSent, n, 0, 0, 0, now)
			step := min(time.Second<<(n-1), 10*time.Second)
			if w := at.Sub(now); w < step/2 || w >= step {
				t.Errorf("attempt %d jitter %v: wait %s, want in [%s, %s)", n, j, w, step/2, step)
			}
		}
	}
	// Without MaxRateLimited, 429s are held to MaxAttempts, still apart.
	q := p
	q.MaxRateLimited = 0
	if _, gaveUp := worker.Decide(q, inkwell.ClassRateLimited, 7, 0, 5, 0, now); gaveUp != 7 {
		t.Errorf("no MaxRateLimited, a 5th 429: gave up %d, want 7 (held to MaxAttempts 5)", gaveUp)
	}
	if at, _ := worker.Decide(q, inkwell.ClassRateLimited, 7, 0, 4, 0, now); at == nil {
		t.Errorf("no MaxRateLimited, a 4th 429 after 3 other failures: gave up, want a reschedule")
	}
	// The zero policy (and max attempts 1) retries nothing, and gives up nothing.
	for _, q := range []worker.RetryPolicy{{}, {MaxAttempts: 1}} {
		if at, gaveUp := worker.Decide(q, inkwell.ClassNotSent, 1, 0, 0, 0, now); at != nil || gaveUp != 0 {
			t.Errorf("policy %+v: %v %d; want no reschedule and no verdict", q, at, gaveUp)
		}
	}
}

// TestRetry_ClassOfRealFailures calls a real HTTP provider that fails each
// way, and checks the class the lane would store.
func TestRetry_ClassOfRealFailures(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Idempotency-Key") {
		case "429":
			w.Header().Set("Retry-After", "7")
			http.Error(w, `{"error":{"message":"slow down"}}`, http.StatusTooManyRequests)
		case "503":
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		case "502":
			http.Error(w, "bad gateway", http.StatusBadGateway)
		case "400":
			http.Error(w, `{"error":{"message":"bad model"}}`, http.StatusBadRequest)
		case "junk":
			w.Write([]byte("not json"))
		case "hang":
			// Read the body first: only then does the server watch the
			// connection and end r's context when the client goes away.
			io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-done:
			}
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // runs before srv.Close
	closed := closedURL(t)
	for _, tc := range []struct {
		key, url   string
		want       inkwell.ErrorClass
		retryAfter time.Duration
	}{
		{"429", srv.URL, inkwell.ClassRateLimited, 7 * time.Second},
		{"503", srv.URL, inkwell.ClassProviderError, 0},
		{"502", srv.URL, inkwell.ClassTimeout, 0}, // a gateway's word: the provider may have billed behind it
		{"400", srv.URL, inkwell.ClassRejected, 0},
		{"junk", srv.URL, inkwell.ClassMalformed, 0},
		{"hang", srv.URL, inkwell.ClassTimeout, 0}, // connected, then no answer: it may have arrived
		{"refused", closed, inkwell.ClassNotSent, 0},
	} {
		p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: tc.url, Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Generate(t.Context(), inkwell.ProviderRequest{IdempotencyKey: tc.key, Prompt: "p", MaxWords: 3})
		class, ra := worker.Classify(t.Context(), err)
		if class != tc.want || ra != tc.retryAfter {
			t.Errorf("%s: class %s retry-after %s (err %v); want %s, %s", tc.key, class, ra, err, tc.want, tc.retryAfter)
		}
	}
	// A stop: a call cut short after it was sent is a shutdown; a limiter
	// wait cut short sent nothing.
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	if c, _ := worker.Classify(stopped, fmt.Errorf("call: %w", context.Canceled)); c != inkwell.ClassShutdown {
		t.Errorf("call cut by a stop: %s, want shutdown", c)
	}
	if c, _ := worker.Classify(stopped, fmt.Errorf("%w: %w", worker.ErrNotCalled, context.Canceled)); c != inkwell.ClassNotSent {
		t.Errorf("limiter wait cut by a stop: %s, want not_sent", c)
	}
	if c, _ := worker.Classify(t.Context(), errors.New("a provider that says nothing")); c != inkwell.ClassTimeout {
		t.Errorf("unclassified error: %s, want timeout (no evidence nothing was sent)", c)
	}
}

// flakyProvider is an OpenAI-compatible server on loopback that answers
// each prompt's first calls with a failure, then with text.
type flakyProvider struct {
	url   string
	mu    sync.Mutex
	calls map[string]int
}

func startFlakyProvider(t *testing.T, fail func(w http.ResponseWriter, prompt string, call int) bool) *flakyProvider {
	t.Helper()
	f := &flakyProvider{calls: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prompt := promptOf(r)
		f.mu.Lock()
		f.calls[prompt]++
		n := f.calls[prompt]
		f.mu.Unlock()
		if fail(w, prompt, n) {
			return
		}
		fmt.Fprint(w, chatAnswer(fmt.Sprintf("req-%s-%d", prompt, n), "text for "+prompt, 1000))
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *flakyProvider) callsOf(prompt string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[prompt]
}

// TestLane_ReschedulesSafeFailures: a lane against a provider that fails
// each job's first calls in one way. Safe failures go back to the queue
// and the job ends done with one result and one charge; a rejected call
// fails at once; a provider never reached gives up after --max-attempts.
func TestLane_ReschedulesSafeFailures(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		st := storetest.MustOpen(t, b.DSN, store.Options{})
		flaky := startFlakyProvider(t, func(w http.ResponseWriter, prompt string, n int) bool {
			switch {
			case strings.HasPrefix(prompt, "five-oh-three") && n <= 2:
				http.Error(w, "unavailable", http.StatusServiceUnavailable)
			case strings.HasPrefix(prompt, "four-two-nine") && n == 1:
				w.Header().Set("Retry-After", "1")
				http.Error(w, "slow down", http.StatusTooManyRequests)
			case strings.HasPrefix(prompt, "four-hundred"):
				http.Error(w, "bad request", http.StatusBadRequest)
			default:
				return false
			}
			return true
		})
		prov, err := provider.NewOpenAI(provider.OpenAIConfig{URL: flaky.url, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		policy := worker.RetryPolicy{MaxAttempts: 4, Base: 20 * time.Millisecond, Cap: 50 * time.Millisecond}
		var endsMu sync.Mutex
		var ends []int64 // OnEnded: long-polls are woken for ends, never for a reschedule
		onEnded := func(id int64) { endsMu.Lock(); ends = append(ends, id); endsMu.Unlock() }
		var requeues []int64 // OnRequeued: each reschedule, after its commit
		onRequeued := func(id int64) { endsMu.Lock(); requeues = append(requeues, id); endsMu.Unlock() }
		startLane(t, st, worker.Config{Provider: prov, Concurrency: 4, Poll: 50 * time.Millisecond, Retry: policy, OnEnded: onEnded, OnRequeued: onRequeued})

		j503 := accept(t, st, "k503", "five-oh-three", 3)
		j429 := accept(t, st, "k429", "four-two-nine", 3)
		j400 := accept(t, st, "k400", "four-hundred", 3)

		d := waitJob(t, st, j503.ID, "the 503 job done", isStatus(inkwell.StatusDone))
		wantClasses(t, "503 job", d, inkwell.ClassProviderError, inkwell.ClassProviderError, "")
		if d.Charge == nil || d.Result == nil || flaky.callsOf("five-oh-three") != 3 {
			t.Errorf("503 job: charge %v result %v calls %d; want one of each after 3 calls", d.Charge, d.Result, flaky.callsOf("five-oh-three"))
		}

		d = waitJob(t, st, j429.ID, "the 429 job done", isStatus(inkwell.StatusDone))
		wantClasses(t, "429 job", d, inkwell.ClassRateLimited, "")
		// not_before is the moment the lane read the 429 plus its
		// Retry-After: after attempt 1 started, before its failure
		// committed (finished_at, which a busy group commit may delay). So
		// attempt 2 starts at least 1 s after attempt 1 started; a back-off
		// of its own would be 20–50 ms.
		if gap := d.Attempts[1].StartedAt.Sub(*d.Attempts[0].StartedAt); gap < time.Second {
			t.Errorf("429 job: attempt 2 started %s after attempt 1 started; the Retry-After asked for 1s", gap)
		}

		d = waitJob(t, st, j400.ID, "the 400 job failed", isStatus(inkwell.StatusFailed))
		wantClasses(t, "400 job", d, inkwell.ClassRejected)
		if d.Job.ErrorClass != inkwell.ClassRejected || d.Job.GaveUpAfter != 0 {
			t.Errorf("400 job: %+v; want failed rejected at once, no verdict of giving up", d.Job)
		}

		storetest.WaitFor(t, 10*time.Second, "three ends told", func() bool { endsMu.Lock(); defer endsMu.Unlock(); return len(ends) >= 3 })
		endsMu.Lock()
		defer endsMu.Unlock()
		slices.Sort(ends)
		if want := []int64{j503.ID, j429.ID, j400.ID}; !slices.Equal(ends, want) {
			t.Errorf("OnEnded told %v, want each job once %v (a reschedule is not an end)", ends, want)
		}
		slices.Sort(requeues)
		want := []int64{j503.ID, j503.ID, j429.ID}
		slices.Sort(want)
		if !slices.Equal(requeues, want) {
			t.Errorf("OnRequeued told %v, want %v: the 503 job twice, the 429 job once, the 400 job never", requeues, want)
		}
	})
}

// TestLane_GivesUpAfterMaxAttempts: a provider nobody listens at is
// not_sent every time: rescheduled until the last attempt, then failed
// with the verdict.
func TestLane_GivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	prov, err := provider.NewOpenAI(provider.OpenAIConfig{URL: closedURL(t), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	policy := worker.RetryPolicy{MaxAttempts: 3, Base: 10 * time.Millisecond, Cap: 20 * time.Millisecond}
	startLane(t, st, worker.Config{Provider: prov, Poll: 20 * time.Millisecond, Retry: policy})
	job := accept(t, st, "k", "nobody listens", 3)
	d := waitJob(t, st, job.ID, "the job failed", isStatus(inkwell.StatusFailed))
	wantClasses(t, "refused job", d, inkwell.ClassNotSent, inkwell.ClassNotSent, inkwell.ClassNotSent)
	if d.Job.GaveUpAfter != 3 || !strings.HasPrefix(d.Job.Error, "gave up after 3 attempts: ") || d.Job.ErrorClass != inkwell.ClassNotSent {
		t.Errorf("job %+v; want failed, gave up after 3 attempts, not_sent", d.Job)
	}
}

// TestLane_TimeoutRetriedOnlyWhenKeysAreHonoured: a call that reached the
// provider and got no answer may have been billed; it is retried
// automatically only when the provider honours idempotency keys.
func TestLane_TimeoutRetriedOnlyWhenKeysAreHonoured(t *testing.T) {
	t.Parallel()
	for _, honours := range []bool{false, true} {
		t.Run(fmt.Sprintf("honours=%t", honours), func(t *testing.T) {
			t.Parallel()
			st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
			// The first call is never answered (its handler waits until the
			// test ends), so it times out however slow the machine; the
			// second is answered at once, well inside the 2 s timeout (a
			// 300 ms one could be overrun by a loaded machine, making a
			// third attempt).
			hang := make(chan struct{})
			flaky := startFlakyProvider(t, func(w http.ResponseWriter, prompt string, n int) bool {
				if n == 1 {
					<-hang
				}
				return false
			})
			t.Cleanup(func() { close(hang) }) // before the server closes: cleanups run last first
			prov, err := provider.NewOpenAI(provider.OpenAIConfig{URL: flaky.url, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			policy := worker.RetryPolicy{MaxAttempts: 3, Base: 10 * time.Millisecond, Cap: 20 * time.Millisecond, ProviderHonoursKeys: honours}
			startLane(t, st, worker.Config{Provider: prov, Poll: 20 * time.Millisecond, Retry: policy})
			job := accept(t, st, "k", "slow first", 3)
			if !honours {
				d := waitJob(t, st, job.ID, "the job failed", isStatus(inkwell.StatusFailed))
				wantClasses(t, "timeout", d, inkwell.ClassTimeout)
				return
			}
			d := waitJob(t, st, job.ID, "the job done", isStatus(inkwell.StatusDone))
			wantClasses(t, "timeout", d, inkwell.ClassTimeout, "")
		})
	}
}

// wantClasses checks a job's attempts, in order: each failed one with its
// class, "" for the one done.
func wantClasses(t *testing.T, what string, d inkwell.JobDetail, classes ...inkwell.ErrorClass) {
	t.Helper()
	if len(d.Attempts) != len(classes) {
		t.Errorf("%s: %d attempts %+v, want %d", what, len(d.Attempts), d.Attempts, len(classes))
		return
	}
	for i, want := range classes {
		a := d.Attempts[i]
		status := inkwell.StatusFailed
		if want == "" {
			status = inkwell.StatusDone
		}
		if a.ErrorClass != want || a.Status != status {
			t.Errorf("%s: attempt %d %s class %q (%s); want %s class %q", what, a.AttemptNumber, a.Status, a.ErrorClass, a.Error, status, want)
		}
	}
}

// closedURL is the URL of a loopback port nothing listens at.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// promptOf is the user message of a chat-completion request.
func promptOf(r *http.Request) string {
	var req struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		return ""
	}
	return req.Messages[0].Content
}

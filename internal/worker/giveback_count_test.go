package worker_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/limiter"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// TestLane_GiveBackIsNotA429: on a lane with two providers, a job of
// provider pa is given back once, unsent, because pa's own rpm line would
// hold it (the provider never saw it). Its first real call is then
// answered 429 once, its second 200. With --max-rate-limited 2 the job
// met one 429 answer and must be retried and end done. The give-back's
// attempt was counted as a 429 answer (class rate_limited) and the job
// failed "gave up", though the provider refused it once; it is now marked
// held_back, which AutoRetryCounts leaves out.
func TestLane_GiveBackIsNotA429(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	srvA := startWire(t, func(n int, body map[string]json.RawMessage) (int, string) {
		if n == 1 {
			return 429, `{"error":{"message":"rate limited","type":"rate_limit_error"}}`
		}
		return 200, answerWith(body, 5, 5)
	})
	srvB := startWire(t, func(_ int, body map[string]json.RawMessage) (int, string) { return 200, answerWith(body, 5, 5) })
	limA := limiter.New(limiter.Config{RPM: 30}) // one call every 2 s
	limB := limiter.New(limiter.Config{})
	// pa's one call of its bucket is spent: the next waits about 2 s, more
	// than the lane's 1 s hold, so the job is given back once.
	if err := limA.Wait(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	limA.Done(0, 0, nil)
	router := twoProviderRouter(t, srvA, srvB, limA, limB)
	job := acceptChat(t, st, "victim", "acme", `{"model":"alpha","messages":[{"role":"user","content":"victim"}]}`, nil, 0)
	policy := worker.RetryPolicy{MaxAttempts: 3, MaxRateLimited: 2, Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond}
	startLane(t, st, worker.Config{Name: "mixed", Router: router, Concurrency: 2, Poll: 50 * time.Millisecond, Retry: policy})

	d := waitJob(t, st, job.ID, "ended", func(d inkwell.JobDetail) bool {
		return d.Job.Status == inkwell.StatusDone || d.Job.Status == inkwell.StatusFailed
	})
	givenBack, real429 := 0, 0
	for _, a := range d.Attempts {
		if a.ErrorClass == inkwell.ClassRateLimited {
			if strings.HasPrefix(a.Error, "not sent:") {
				givenBack++
			} else {
				real429++
			}
		}
	}
	t.Logf("pa received %d calls; attempts: %d given back unsent, %d answered 429", len(srvA.received()), givenBack, real429)
	if givenBack == 0 {
		t.Skip("the job was never given back (timing); nothing shown")
	}
	if d.Job.Status != inkwell.StatusDone {
		t.Errorf("job %s (%q, gave up after %d): the provider answered it 429 %d time(s), --max-rate-limited 2; want it retried and done: "+
			"%d give-back(s) of a call never sent were counted as 429 answers", d.Job.Status, d.Job.Error, d.Job.GaveUpAfter, real429, givenBack)
	}
}

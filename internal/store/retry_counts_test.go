package store_test

import (
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_AutoRetryCountsSinceTheLastRetryByHand: the counts automatic
// retry keeps are of the attempts that finished after the job's last retry
// by hand, 429s apart; an attempt claimed after the retry but stamped
// before it (a claim reads its clock before it waits for the write lock)
// still counts, as it finished after.
func TestStore_AutoRetryCountsSinceTheLastRetryByHand(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		var clock storetest.WallClock
		clock.At(0)
		s := storetest.MustOpen(t, b.DSN, store.Options{NowFunc: clock.Now})
		l := mustLockLane(t, s, "local")
		job := mustAccept(t, s, acceptParams("k", "p"))
		failNow := func(class inkwell.ErrorClass) {
			t.Helper()
			c := claimOne(t, s, l)
			if err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "failed", Class: class}); err != nil {
				t.Fatal(err)
			}
		}
		counts := func(want store.RetryCounts) {
			t.Helper()
			if got, err := s.AutoRetryCounts(t.Context(), job.ID); err != nil || got != want {
				t.Fatalf("AutoRetryCounts = %+v, %v; want %+v", got, err, want)
			}
		}
		counts(store.RetryCounts{})
		clock.At(time.Second)
		failNow(inkwell.ClassRateLimited)
		counts(store.RetryCounts{Attempts: 1, RateLimited: 1})
		clock.At(20 * time.Second)
		mustRetry(t, s, job.ID)
		counts(store.RetryCounts{})

		// Claimed at 15 s (before the retry's 20 s), failed at 25 s.
		clock.At(15 * time.Second)
		c := claimOne(t, s, l)
		clock.At(25 * time.Second)
		if err := s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "failed", Class: inkwell.ClassProviderError}); err != nil {
			t.Fatal(err)
		}
		counts(store.RetryCounts{Attempts: 1})
		clock.At(30 * time.Second)
		mustRetry(t, s, job.ID)
		clock.At(31 * time.Second)
		failNow(inkwell.ClassRateLimited)
		clock.At(32 * time.Second)
		mustRetry(t, s, job.ID)
		clock.At(33 * time.Second)
		failNow(inkwell.ClassNotSent)
		counts(store.RetryCounts{Attempts: 1})
	})
}

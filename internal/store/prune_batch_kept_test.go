package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Retention keeps a batch's jobs until the whole batch has ended before
// the cut-off (batchVerdicts, dropKept, the NOT IN list of kept batches),
// on both dialects.

// TestPrune_BatchReopenedMidRunKeepsAnswers: a batch ended before
// the cut-off with one line done and one failed. A long prune run judges
// it "ended" once, when it counts (countPrunable), and keeps that verdict
// for the whole run. Meanwhile, between two of the run's transactions, the
// client retries the failed line (POST /v1/jobs/{id}/retry, or `inkwell
// retry`): the batch is running again, its output is still to be read
// (docs/batches.md: read it once the batch has ended), and by retention's
// rule for batches ("a batch's jobs are pruned only once the whole batch
// ended before the cut-off") its done line must keep its paid answer.
//
// Right behaviour: the verdict is taken (or checked again) in the
// transaction that prunes the batch's rows, so a batch re-opened since
// the count is kept. dropKept judges each batch again in the pruning
// transaction (a verdict cached from the count once pruned the done line).
func TestPrune_BatchReopenedMidRunKeepsAnswers(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		// Ten standalone jobs that finished first: the run's first
		// transaction (MaxBatch 10) takes them, the second the batch's.
		for i := range 10 {
			f.finished(fmt.Sprintf("solo-%d", i), true)
			f.clock.Advance(time.Second)
		}
		b := mustAcceptBatch(t, s, batchParams("reopen", "first", "second"))
		c1 := claimOne(t, s, f.lane)
		if err := s.CompleteIfRunning(t.Context(), completeParams(c1)); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Second)
		c2 := claimOne(t, s, f.lane)
		mustFailClass(t, s, c2, "provider: provider call: server error: HTTP 500", inkwell.ClassProviderError)
		f.clock.Advance(48 * time.Hour)

		var once sync.Once
		var retryErr error
		rep, err := s.Prune(t.Context(), f.clock.Now(), store.PruneOptions{
			MaxBatch: 10, Pause: -1, ProgressEvery: time.Nanosecond,
			Progress: func(store.PruneProgress) {
				// Between the run's first and second transaction: the
				// client retries the batch's failed line.
				once.Do(func() { _, retryErr = s.RetryIfFailed(t.Context(), c2.Job.ID, store.ActorCLI) })
			},
		})
		if err != nil {
			t.Fatalf("prune: %v", err)
		}
		if retryErr != nil {
			t.Skipf("the retry between the run's transactions was refused (%v): the race did not happen", retryErr)
		}
		st, err := s.BatchStatusOf(t.Context(), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Unended() == 0 {
			t.Fatalf("batch status %+v: want the retried line unended", st)
		}
		d := mustShow(t, s, c1.Job.ID)
		if d.Job.PrunedAt != nil || d.Result == nil || d.Result.Text == "" {
			t.Errorf("prune (report %+v) pruned the done line of batch %d while the batch had a line queued again "+
				"(%d unended): pruned_at %v, result %+v; want it kept until the whole batch has ended before the cut-off "+
				"(the verdict judged at the count was stale by the time the line was pruned)",
				rep, b.ID, st.Unended(), d.Job.PrunedAt, d.Result)
		}
	})
}

// TestPrune_ManyKeptBatchesTerminate: many batches, each
// with a done line before the cut-off and a line still queued, beside
// standalone jobs: every run ends (no livelock on the NOT IN list or on
// dropKept's yields), prunes exactly the standalone jobs, counts every
// kept line in HeldByBatch, and once the batches end a later run takes
// them all.
func TestPrune_ManyKeptBatchesTerminate(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		const nb = 40
		var doneLines []int64
		for i := range nb {
			mustAcceptBatch(t, s, batchParams(fmt.Sprintf("many-%d", i), "a", "b"))
			c := claimOne(t, s, f.lane)
			if err := s.CompleteIfRunning(t.Context(), completeParams(c)); err != nil {
				t.Fatal(err)
			}
			doneLines = append(doneLines, c.Job.ID)
			f.finished(fmt.Sprintf("solo-%d", i), true)
			f.clock.Advance(time.Second)
		}
		// Note: finished() claims the next queued job, which may be a
		// batch's second line rather than the solo job just accepted;
		// count what is really unended.
		f.clock.Advance(time.Hour)
		unendedBatches := count(t, s, `SELECT COUNT(DISTINCT batch_id) FROM jobs WHERE batch_id IS NOT NULL AND status = 'queued'`)
		heldWant := count(t, s, `SELECT COUNT(*) FROM jobs j WHERE j.status IN ('done','failed') AND j.batch_id IS NOT NULL
			AND EXISTS (SELECT 1 FROM jobs q WHERE q.batch_id = j.batch_id AND q.status = 'queued')`)
		prunableWant := count(t, s, `SELECT COUNT(*) FROM jobs j WHERE j.status IN ('done','failed') AND NOT (j.batch_id IS NOT NULL
			AND EXISTS (SELECT 1 FROM jobs q WHERE q.batch_id = j.batch_id AND q.status = 'queued'))`)
		if unendedBatches == 0 {
			t.Fatalf("no batch left unended: the fixture did not build what it means to")
		}
		done := make(chan struct{})
		var rep store.PruneReport
		var err error
		go func() {
			defer close(done)
			rep, err = s.Prune(t.Context(), f.clock.Now(), store.PruneOptions{MaxBatch: 10, Pause: -1})
		}()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("prune did not end in 60s: livelock")
		}
		if err != nil {
			t.Fatal(err)
		}
		if int(rep.Pruned) != prunableWant || int(rep.HeldByBatch) != heldWant || rep.Matched != rep.Pruned {
			t.Errorf("report %+v; want pruned = matched = %d, held by batch %d", rep, prunableWant, heldWant)
		}
		// The batches end; a later run takes their lines.
		for {
			cs, err := s.ClaimUpTo(t.Context(), f.lane, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) == 0 {
				break
			}
			for _, c := range cs {
				if err := s.CompleteIfRunning(t.Context(), completeParams(c)); err != nil {
					t.Fatal(err)
				}
			}
		}
		f.clock.Advance(time.Hour)
		rep2 := mustPrune(t, s, f.clock.Now(), store.PruneOptions{MaxBatch: 10, Pause: -1})
		if rep2.HeldByBatch != 0 || count(t, s, `SELECT COUNT(*) FROM jobs WHERE pruned_at IS NULL`) != 0 {
			t.Errorf("second run %+v: want every job pruned once every batch ended", rep2)
		}
		assertIntact(t, s)
	})
}

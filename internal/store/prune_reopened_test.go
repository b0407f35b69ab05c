package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// batchReopened reads batches.reopened (migration 0021).
func batchReopened(t *testing.T, s *store.Store, id int64) int64 {
	t.Helper()
	var n int64
	if err := s.DB().QueryRowContext(t.Context(), s.Rebind(`SELECT reopened FROM batches WHERE id = $1`), id).Scan(&n); err != nil {
		t.Fatalf("read batch %d's reopened: %v", id, err)
	}
	return n
}

// batches.reopened counts each time a line of the batch goes from done or
// failed back to queued or running, and nothing else: its claims,
// completions, failures and automatic retries (running back to queued)
// leave it, and so does a job of no batch. Retention trusts it to say
// whether a batch judged ended may have been re-opened (dropKept).
func TestBatchReopened_CountsPutBacksOnly(t *testing.T) {
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		b := mustAcceptBatch(t, s, batchParams("reopen-count", "first", "second"))
		c1 := claimOne(t, s, f.lane)
		if err := s.CompleteIfRunning(t.Context(), completeParams(c1)); err != nil {
			t.Fatal(err)
		}
		c2 := claimOne(t, s, f.lane)
		mustFailClass(t, s, c2, "provider: provider call: server error: HTTP 500", inkwell.ClassProviderError)
		f.finished("solo", false)
		if n := batchReopened(t, s, b.ID); n != 0 {
			t.Fatalf("after claims, a completion and failures: reopened %d, want 0", n)
		}
		if _, err := s.RetryIfFailed(t.Context(), c2.Job.ID, store.ActorCLI); err != nil {
			t.Fatal(err)
		}
		if n := batchReopened(t, s, b.ID); n != 1 {
			t.Fatalf("after a retry of a failed line: reopened %d, want 1", n)
		}
		c3 := claimOne(t, s, f.lane)
		mustFailClass(t, s, c3, "provider: provider call: server error: HTTP 500", inkwell.ClassProviderError)
		if _, err := s.RetryIfFailed(t.Context(), c3.Job.ID, store.ActorCLI); err != nil {
			t.Fatal(err)
		}
		if n := batchReopened(t, s, b.ID); n != 2 {
			t.Errorf("after a second retry: reopened %d, want 2", n)
		}
	})
}

// TestPruneReopened_RetriedAndDoneAgainMidRunKeepsAnswers: as
// TestPrune_BatchReopenedMidRunKeepsAnswers, but the retried line
// also runs and finishes again between the run's two transactions, so
// that when the second one looks, no line of the batch is queued or
// running: only the count of re-openings (or the line's new finish time)
// says the batch ended after the cut-off, and its done line's answer must
// stay until its output can be read.
func TestPruneReopened_RetriedAndDoneAgainMidRunKeepsAnswers(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		for i := range 10 {
			f.finished(fmt.Sprintf("solo-%d", i), true)
			f.clock.Advance(time.Second)
		}
		b := mustAcceptBatch(t, s, batchParams("reopen-done", "first", "second"))
		c1 := claimOne(t, s, f.lane)
		if err := s.CompleteIfRunning(t.Context(), completeParams(c1)); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Second)
		c2 := claimOne(t, s, f.lane)
		mustFailClass(t, s, c2, "provider: provider call: server error: HTTP 500", inkwell.ClassProviderError)
		f.clock.Advance(48 * time.Hour)

		var once sync.Once
		var midErr error
		rep, err := s.Prune(t.Context(), f.clock.Now(), store.PruneOptions{
			MaxBatch: 10, Pause: -1, ProgressEvery: time.Nanosecond,
			Progress: func(store.PruneProgress) {
				once.Do(func() {
					if _, midErr = s.RetryIfFailed(t.Context(), c2.Job.ID, store.ActorCLI); midErr != nil {
						return
					}
					c := claimOne(t, s, f.lane)
					midErr = s.CompleteIfRunning(t.Context(), completeParams(c))
				})
			},
		})
		if err != nil {
			t.Fatalf("prune: %v", err)
		}
		if midErr != nil {
			t.Skipf("the retry and run between the run's transactions failed (%v): the race did not happen", midErr)
		}
		if st, err := s.BatchStatusOf(t.Context(), b.ID); err != nil || st.Unended() != 0 {
			t.Fatalf("batch status %+v (%v): want every line ended again", st, err)
		}
		if d := mustShow(t, s, c1.Job.ID); d.Job.PrunedAt != nil || d.Result == nil || d.Result.Text == "" {
			t.Errorf("prune (report %+v) pruned the done line of batch %d, whose other line was retried and done again "+
				"after the cut-off: pruned_at %v, result %+v; want it kept", rep, b.ID, d.Job.PrunedAt, d.Result)
		}
	})
}

// A prune transaction reads a batch's lines again only when its reopened
// count moved since the batch was judged ended: its steady cost is one
// row, whatever the batch's size (a 50,000-line batch read whole in every
// transaction took 485 s to prune: BenchmarkPruneBatch50k). The test
// moves a line's finish time past the cut-off behind the count's back (a
// change no transition makes: only a put-back re-opens an ended batch) and
// checks that the run, which judged the batch ended when it counted, does
// not read the lines again and prunes them. Were every transaction to read
// the lines, it would keep the batch.
func TestPruneReopened_TransactionTrustsTheCount(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		for i := range 10 {
			f.finished(fmt.Sprintf("solo-%d", i), true)
			f.clock.Advance(time.Second)
		}
		mustAcceptBatch(t, s, batchParams("trust", "first", "second"))
		var lines []int64
		for range 2 {
			c := claimOne(t, s, f.lane)
			if err := s.CompleteIfRunning(t.Context(), completeParams(c)); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, c.Job.ID)
		}
		f.clock.Advance(48 * time.Hour)
		cutoff := f.clock.Now()

		var once sync.Once
		var midErr error
		rep, err := s.Prune(t.Context(), cutoff, store.PruneOptions{
			MaxBatch: 10, Pause: -1, ProgressEvery: time.Nanosecond,
			Progress: func(store.PruneProgress) {
				once.Do(func() {
					_, midErr = s.DB().ExecContext(t.Context(), s.Rebind(`UPDATE jobs SET finished_at = $1 WHERE id = $2`),
						s.Timestamp(cutoff.Add(time.Hour)), lines[1])
				})
			},
		})
		if err != nil || midErr != nil {
			t.Fatalf("prune: %v; the change between transactions: %v", err, midErr)
		}
		// The moved line no longer matches the cut-off; its sibling is
		// pruned on the run's verdict. Read again, the batch would be kept.
		if d := mustShow(t, s, lines[0]); rep.Pruned != 11 || d.Job.PrunedAt == nil {
			t.Errorf("prune %+v, batch line %d pruned_at %v: want 11 jobs pruned, the batch's first line among them "+
				"(its batch judged ended when the run counted, its count unchanged since)", rep, lines[0], d.Job.PrunedAt)
		}
	})
}

// TestPruneReopened_RetriesRacingPruneOfAnEndedBatch: a prune takes an
// ended batch's failed lines a few at a time while another goroutine
// retries its lines (newest first). No transaction of either may fail for
// any reason but "already pruned" (a PostgreSQL deadlock between the
// prune's row locks plus FOR SHARE on the batch and the retry's trigger
// would show here), and once a retry has committed, the batch is
// re-opened: no further line of it may be pruned.
func TestPruneReopened_RetriesRacingPruneOfAnEndedBatch(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		const n = 60
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("line-%02d", i)
		}
		b := mustAcceptBatch(t, s, batchParams("retry-race", ids...))
		var lines []int64
		for range n {
			c := claimOne(t, s, f.lane)
			mustFailClass(t, s, c, "provider: provider call: server error: HTTP 500", inkwell.ClassProviderError)
			lines = append(lines, c.Job.ID)
			f.clock.Advance(time.Millisecond)
		}
		f.clock.Advance(48 * time.Hour)
		cutoff := f.clock.Now()

		prunedOf := func() int {
			var k int
			if err := s.DB().QueryRowContext(t.Context(), s.Rebind(`SELECT COUNT(*) FROM jobs WHERE batch_id = $1 AND pruned_at IS NOT NULL`), b.ID).Scan(&k); err != nil {
				t.Errorf("count pruned: %v", err)
			}
			return k
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var retryErr error
		afterFirst := -1
		wg.Go(func() {
			<-start
			for i := len(lines) - 1; i >= 0; i-- {
				_, err := s.RetryIfFailed(t.Context(), lines[i], store.ActorCLI)
				switch {
				case inkwell.ErrorCode(err) == inkwell.ECONFLICT:
					continue // pruned first
				case err != nil:
					retryErr = err
					return
				}
				afterFirst = prunedOf()
				return
			}
		})
		var rep store.PruneReport
		var pruneErr error
		wg.Go(func() {
			close(start)
			rep, pruneErr = s.Prune(t.Context(), cutoff, store.PruneOptions{MaxBatch: 10, Pause: -1})
		})
		wg.Wait()
		if pruneErr != nil {
			t.Fatalf("prune racing a retry failed: %v (report %+v)", pruneErr, rep)
		}
		if retryErr != nil {
			t.Fatalf("retry racing a prune failed: %v", retryErr)
		}
		if afterFirst < 0 {
			t.Skip("every line was pruned before a retry got in")
		}
		if final := prunedOf(); final != afterFirst {
			t.Errorf("%d lines of batch %d were pruned when its first retry committed, %d at the end: the prune took lines of a re-opened batch",
				afterFirst, b.ID, final)
		}
	})
}

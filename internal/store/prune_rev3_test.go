package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// TestRev3_PruneRacingRetriesOfAnEndedBatch: a prune takes an ended
// batch's failed lines a few at a time while another goroutine retries
// its lines (newest first). No transaction of either may fail for any
// reason but "already pruned" (a PostgreSQL deadlock between the prune's
// row locks plus FOR SHARE on the batch and the retry's trigger would
// show here), and once a retry has committed, the batch is re-opened:
// no further line of it may be pruned.
func TestRev3_PruneRacingRetriesOfAnEndedBatch(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		const n = 60
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("line-%02d", i)
		}
		b := mustAcceptBatch(t, s, batchParams("rev3-race", ids...))
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

package store_test

import (
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// The prepared-statement cache (SQLite only): a transition's first run
// misses, runs its text unprepared inside the transaction and prepares it
// after; every later run reuses that one statement. What must hold: the
// answers are the same either way, the cache holds one statement per
// query text however many calls are made, and a statement survives what
// can happen under it (a schema change, a new connection, a reopen).

// claimSQL picks the claim's statement out of the cache by its text.
const claimSQL = "UPDATE jobs SET status = 'running'"

func TestStore_StatementCache(t *testing.T) {
	t.Parallel()
	t.Run("MissThenReuse", func(t *testing.T) {
		t.Parallel()
		s := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
		if got := cachedLike(s, claimSQL); len(got) != 0 {
			t.Fatalf("before any claim the cache holds %d claim statements, want 0", len(got))
		}
		if c, err := claimAs(t, s, "local"); err != nil || c != nil { // the miss: nothing queued
			t.Fatalf("Claim of an empty queue = %+v, %v; want nil, nil", c, err)
		}
		first := cachedLike(s, claimSQL)
		if len(first) != 1 {
			t.Fatalf("after the first claim the cache holds %d claim statements, want 1 (prepared after its miss)", len(first))
		}
		runCycles(t, s, 0, 1)
		size := len(store.PreparedStmts(s))
		runCycles(t, s, 1, 40)
		if got := cachedLike(s, claimSQL); len(got) != 1 || got[0] != first[0] {
			t.Errorf("after 40 more cycles the claim statement was replaced or duplicated: %p -> %v", first[0], got)
		}
		if got := store.PreparedStmts(s); len(got) != size {
			t.Errorf("cache grew from %d to %d statements over 40 identical cycles, want one per query text:\n%s",
				size, len(got), strings.Join(slices.Sorted(maps.Keys(got)), "\n"))
		}
	})
	t.Run("SurvivesASchemaChange", func(t *testing.T) {
		t.Parallel()
		s := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
		runCycles(t, s, 0, 3)
		// SQLite re-prepares a statement whose schema changed; the cache
		// never has to drop one.
		if _, err := s.WriteDB().ExecContext(t.Context(), `ALTER TABLE jobs ADD COLUMN test_note TEXT DEFAULT 'x'`); err != nil {
			t.Fatal(err)
		}
		runCycles(t, s, 3, 6)
	})
	t.Run("SurvivesANewConnection", func(t *testing.T) {
		t.Parallel()
		s := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
		runCycles(t, s, 0, 3)
		// No idle connection is kept: every transaction gets a new one, on
		// which each cached statement must be prepared again.
		s.WriteDB().SetMaxIdleConns(0)
		runCycles(t, s, 3, 10)
		if n := s.WriteDB().Stats().MaxIdleClosed; n == 0 {
			t.Errorf("no write connection was closed and replaced; the test proved nothing")
		}
	})
	t.Run("StartsEmptyAfterAReopen", func(t *testing.T) {
		t.Parallel()
		path := storetest.SQLitePath(t)
		s, err := store.Open(t.Context(), path, store.Options{Logger: storetest.TestLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		runCycles(t, s, 0, 3)
		if err := s.Close(); err != nil {
			t.Fatalf("Close with a warm cache: %v", err)
		}
		s = storetest.MustOpen(t, path, store.Options{})
		if got := cachedLike(s, claimSQL); len(got) != 0 {
			t.Errorf("a reopened store's cache holds %d claim statements, want none yet", len(got))
		}
		runCycles(t, s, 3, 6)
	})
	t.Run("PostgresCachesNothing", func(t *testing.T) {
		t.Parallel()
		// pgx prepares and caches per connection, and drops a statement
		// whose plan a migration changed; a second cache of ours would not.
		s := storetest.MustOpen(t, storetest.PostgresDSN(t), store.Options{})
		runCycles(t, s, 0, 3)
		if got := store.PreparedStmts(s); len(got) != 0 {
			t.Errorf("PostgreSQL store cached %d statements, want none:\n%s", len(got), strings.Join(slices.Sorted(maps.Keys(got)), "\n"))
		}
	})
}

// cachedLike returns the cached statements whose text contains sub.
func cachedLike(s *store.Store, sub string) []*sql.Stmt {
	var out []*sql.Stmt
	for q, st := range store.PreparedStmts(s) {
		if strings.Contains(q, sub) {
			out = append(out, st)
		}
	}
	return out
}

// runCycles runs jobs from..to-1 through every transition: accepted,
// claimed, failed, retried, claimed again and completed, and checks each
// answer, so the same statements run on every cycle.
func runCycles(t *testing.T, s *store.Store, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		p := acceptParams(fmt.Sprintf("cycle-%d", i), fmt.Sprintf("poem %d", i))
		job, created, err := s.Accept(t.Context(), p)
		if err != nil || !created {
			t.Fatalf("cycle %d: Accept = created %t, %v", i, created, err)
		}
		if again, created, err := s.Accept(t.Context(), p); err != nil || created || again.ID != job.ID {
			t.Fatalf("cycle %d: re-send = job %d, created %t, %v; want job %d", i, again.ID, created, err, job.ID)
		}
		c := mustClaim(t, s, "local")
		if c.Job.ID != job.ID || c.Attempt.AttemptNumber != 1 {
			t.Fatalf("cycle %d: claimed job %d attempt %d, want job %d attempt 1", i, c.Job.ID, c.Attempt.AttemptNumber, job.ID)
		}
		mustFail(t, s, c, fmt.Sprintf("failure %d", i))
		mustRetry(t, s, job.ID)
		c = mustClaim(t, s, "local")
		if c.Job.ID != job.ID || c.Attempt.AttemptNumber != 2 {
			t.Fatalf("cycle %d: claimed job %d attempt %d, want job %d attempt 2", i, c.Job.ID, c.Attempt.AttemptNumber, job.ID)
		}
		if err := s.CompleteIfRunning(t.Context(), completeParams(c)); err != nil {
			t.Fatalf("cycle %d: CompleteIfRunning: %v", i, err)
		}
		d := mustShow(t, s, job.ID)
		want := completeParams(c)
		if d.Job.Status != inkwell.StatusDone || len(d.Attempts) != 2 || d.Attempts[0].Error != fmt.Sprintf("failure %d", i) ||
			d.Result == nil || d.Result.Text != want.Text || d.Charge == nil || d.Charge.AmountMicros != want.AmountMicros {
			t.Fatalf("cycle %d: job %+v, attempts %+v, result %+v, charge %+v; want done after one failure, with its text and charge",
				i, d.Job, d.Attempts, d.Result, d.Charge)
		}
	}
}

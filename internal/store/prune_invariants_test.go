package store_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// What retention (prune) must keep true at the store, on both dialects:
// the answers of a batch not yet ended, a clear word on an older schema,
// exact job_counts under load, no pruned job queued again, webhook
// deliveries untouched.

// TestPrune_UnendedBatchKeepsAnswers: a batch whose first line is done
// and whose second is still queued has not ended; its output file is made
// from its jobs when it is read, and docs/batches.md tells the client to
// read it "once the batch is completed". A prune that runs meanwhile (serve
// --retention on a batch that takes longer than the retention, or
// `inkwell prune --older-than 0s`) must not empty the done line's text:
// the answer was paid for and the client has had no chance to read it.
// Right behaviour: prune skips the jobs of a batch that has not ended (a
// later run takes them once the batch is over).
//
// pruneMatch once took every finished job, whatever its batch; a batch's
// jobs now wait for the whole batch (batchVerdicts).
func TestPrune_UnendedBatchKeepsAnswers(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		b := mustAcceptBatch(t, s, batchParams("unended-batch", "first", "second"))
		c := claimOne(t, s, f.lane)
		if err := s.CompleteIfRunning(t.Context(), completeParams(c)); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(48 * time.Hour)
		st, err := s.BatchStatusOf(t.Context(), b.ID)
		if err != nil || st.Unended() != 1 {
			t.Fatalf("batch status %+v, %v; want one line still queued", st, err)
		}
		rep := mustPrune(t, s, f.clock.Now(), store.PruneOptions{})
		// The batch now ends: its second line runs.
		c2 := claimOne(t, s, f.lane)
		if err := s.CompleteIfRunning(t.Context(), completeParams(c2)); err != nil {
			t.Fatal(err)
		}
		var got []string
		if err := s.BatchEnded(t.Context(), b.ID, inkwell.StatusDone, func(bj store.BatchJob) error {
			got = append(got, fmt.Sprintf("%s text=%q pruned=%v", bj.CustomID, bj.Result.Text, bj.Job.PrunedAt != nil))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want := []string{
			fmt.Sprintf("first text=%q pruned=false", completeParams(c).Text),
			fmt.Sprintf("second text=%q pruned=false", completeParams(c2).Text),
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("prune (report %+v) ran while the batch had a line queued; the batch's output once it ended:\n got %q\nwant %q\n"+
				"(a paid answer of a batch not yet ended was thrown away before the client could read the output)", rep, got, want)
		}
	})
}

// TestPrune_OlderSchemaWorksOrIsRefusedClearly: Prune says it needs migration 0005
// (needPruneSchema: "retention needs migration 0005"), so a database at
// version 5 (or 12, before results.response existed) must either be pruned
// correctly or be refused with a clear EINVALID word that says to migrate,
// writing nothing. It must not fail with a raw SQL error (no such table
// audit_log, column response does not exist) after promising version 5
// suffices.
//
// needPruneSchema once checked v >= 5 only, while a batch writes
// audit_log (0008), batch_id (0011) and results.response (0016); it now
// wants this Inkwell's own schema.
func TestPrune_OlderSchemaWorksOrIsRefusedClearly(t *testing.T) {
	t.Parallel()
	for _, v := range []int{5, 12} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			t.Parallel()
			storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
				_, old := openAtVersion(t, b, v)
				const at = `'2026-01-01T00:00:00.000000Z'`
				mustExecAll(t, old.DB(),
					`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, lane, created_at, started_at, finished_at)
					 VALUES (1, 'k1', 'h', '{"prompt":"secret prompt","max_words":5}', 'done', 'local', `+at+`, `+at+`, `+at+`)`,
					`INSERT INTO job_attempts (id, job_id, attempt_number, status, lane, started_at, finished_at)
					 VALUES (1, 1, 1, 'done', 'local', `+at+`, `+at+`)`,
					`INSERT INTO results (id, job_id, attempt_id, text, created_at) VALUES (1, 1, 1, 'paid text', `+at+`)`,
					`INSERT INTO charges (id, job_id, attempt_id, account, amount_micros, provider_request_id, created_at)
					 VALUES (1, 1, 1, 'default', 10, 'req-1', `+at+`)`)
				before := dumpOf(t, old.DB(), "jobs", "job_attempts", "results", "charges")
				rep, err := old.Prune(t.Context(), time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), store.PruneOptions{})
				switch {
				case err == nil:
					if rep.Pruned != 1 {
						t.Errorf("prune at schema %d: %+v; want the job pruned", v, rep)
					}
				case inkwell.ErrorCode(err) == inkwell.EINVALID && strings.Contains(err.Error(), "migrat"):
					assertSameDump(t, before, dumpOf(t, old.DB(), "jobs", "job_attempts", "results", "charges"))
				default:
					t.Errorf("prune at schema version %d (needPruneSchema lets it through): %v\nwant it to work, or an EINVALID that says to migrate", v, err)
					assertSameDump(t, before, dumpOf(t, old.DB(), "jobs", "job_attempts", "results", "charges"))
				}
			})
		})
	}
}

// TestPrune_JobCountsExactUnderLoad: prune runs again and again while
// accepts, claims, completions and failures go on beside it; afterwards
// job_counts (kept by triggers, which see the SQLite rewrite's delete and
// insert) must equal COUNT(*) of the rows, foreign keys must hold, every
// done job has one result and one charge, and accounts.reserved_micros
// equals the sum of the open reservations. A guard of the SQLite rewrite.
func TestPrune_JobCountsExactUnderLoad(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var workErr error
		var mu sync.Mutex
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := s.Accept(t.Context(), acceptParams(fmt.Sprintf("load-%d", i), "p")); err != nil {
					mu.Lock()
					workErr = fmt.Errorf("accept: %w", err)
					mu.Unlock()
					return
				}
				cs, err := s.ClaimUpTo(t.Context(), f.lane, 2)
				if err != nil {
					mu.Lock()
					workErr = fmt.Errorf("claim: %w", err)
					mu.Unlock()
					return
				}
				for k, c := range cs {
					if (i+k)%3 == 0 {
						err = s.FailIfRunning(t.Context(), store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Error: "provider: provider call: client error: 400", Class: inkwell.ClassRejected})
					} else {
						err = s.CompleteIfRunning(t.Context(), completeParams(c))
					}
					if err != nil {
						mu.Lock()
						workErr = fmt.Errorf("outcome: %w", err)
						mu.Unlock()
						return
					}
				}
			}
		}()
		deadline := time.Now().Add(3 * time.Second)
		total := int64(0)
		for time.Now().Before(deadline) {
			f.clock.Advance(time.Second)
			rep, err := s.Prune(t.Context(), f.clock.Now(), store.PruneOptions{MaxBatch: 30, Pause: -1})
			if err != nil {
				t.Errorf("prune: %v", err)
				break
			}
			total += rep.Pruned
		}
		close(stop)
		wg.Wait()
		if workErr != nil {
			t.Fatalf("work beside prune: %v", workErr)
		}
		if total == 0 {
			t.Fatalf("prune pruned nothing under load")
		}
		kinds := map[string]string{
			"queued":      `SELECT COUNT(*) FROM jobs WHERE status = 'queued'`,
			"running":     `SELECT COUNT(*) FROM jobs WHERE status = 'running'`,
			"done":        `SELECT COUNT(*) FROM jobs WHERE status = 'done' AND pruned_at IS NULL`,
			"done_pruned": `SELECT COUNT(*) FROM jobs WHERE status = 'done' AND pruned_at IS NOT NULL`,
			"results":     `SELECT COUNT(*) FROM results`,
			"charges":     `SELECT COUNT(*) FROM charges`,
		}
		for kind, q := range kinds {
			kept := count(t, s, `SELECT COALESCE(SUM(n), 0) FROM job_counts WHERE kind = $1`, kind)
			real := count(t, s, q)
			if kept != real {
				t.Errorf("job_counts[%s] = %d, rows say %d", kind, kept, real)
			}
		}
		keptFailed := count(t, s, `SELECT COALESCE(SUM(n), 0) FROM job_counts WHERE kind LIKE 'failed%'`)
		if real := count(t, s, `SELECT COUNT(*) FROM jobs WHERE status = 'failed'`); keptFailed != real {
			t.Errorf("job_counts failed_* = %d, rows say %d", keptFailed, real)
		}
		keptFP := count(t, s, `SELECT COALESCE(SUM(n), 0) FROM job_counts WHERE kind = 'failed_pruned'`)
		if real := count(t, s, `SELECT COUNT(*) FROM jobs WHERE status = 'failed' AND pruned_at IS NOT NULL`); keptFP != real {
			t.Errorf("job_counts failed_pruned = %d, rows say %d", keptFP, real)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM jobs j WHERE j.status = 'done' AND ((SELECT COUNT(*) FROM results r WHERE r.job_id = j.id) <> 1 OR (SELECT COUNT(*) FROM charges c WHERE c.job_id = j.id) <> 1)`); n != 0 {
			t.Errorf("%d done jobs without exactly one result and one charge", n)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM audit_log WHERE action = 'prune'`); int64(n) != total {
			t.Errorf("audit_log has %d prune rows, prune reported %d", n, total)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM accounts a WHERE a.reserved_micros <> (SELECT COALESCE(SUM(j.reservation_micros), 0) FROM jobs j WHERE j.reservation_state = 'open' AND j.reservation_account = a.name)`); n != 0 {
			t.Errorf("%d accounts whose reserved_micros differs from their open reservations", n)
		}
		assertIntact(t, s)
	})
}

// TestPrune_RetryRacingPruneNeverQueuesAPrunedJob: retries of failed jobs
// run beside a prune that takes every finished job. A job is either pruned
// (and then never queued again: retry refuses it) or retried (and then
// queued with its prompt, not pruned). No queued job may carry pruned_at
// or have lost its prompt. Guards retryJob's "pruned_at IS NULL",
// re-checked by PostgreSQL after the row lock prune holds.
func TestPrune_RetryRacingPruneNeverQueuesAPrunedJob(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		const n = 120
		var ids []int64
		for i := range n {
			ids = append(ids, f.finished(fmt.Sprintf("f-%d", i), false).ID)
		}
		f.clock.Advance(time.Hour)
		var wg sync.WaitGroup
		wg.Add(1)
		retried := 0
		go func() {
			defer wg.Done()
			for i := len(ids) - 1; i >= 0; i-- {
				if _, err := s.RetryIfFailed(t.Context(), ids[i], store.ActorCLI); err == nil {
					retried++
				}
			}
		}()
		rep, err := s.Prune(t.Context(), f.clock.Now(), store.PruneOptions{MaxBatch: 10, Pause: -1})
		wg.Wait()
		if err != nil {
			t.Fatalf("prune: %v", err)
		}
		t.Logf("pruned %d, retried %d", rep.Pruned, retried)
		if bad := count(t, s, `SELECT COUNT(*) FROM jobs WHERE status = 'queued' AND (pruned_at IS NOT NULL OR payload NOT LIKE '%prompt%')`); bad != 0 {
			t.Errorf("%d queued jobs are pruned or lost their prompt: a pruned job was queued to run again", bad)
		}
		if got := count(t, s, `SELECT COUNT(*) FROM jobs WHERE pruned_at IS NOT NULL`) + count(t, s, `SELECT COUNT(*) FROM jobs WHERE status = 'queued'`); got != n {
			t.Errorf("pruned + queued = %d, want %d (each job either pruned or retried)", got, n)
		}
		assertIntact(t, s)
	})
}

// TestPrune_WebhookDeliveriesUntouched: jobs of an account with a
// webhook end (one delivery each, pending); a prune of them writes no
// delivery and changes none (the SQLite rewrite deletes and inserts the
// job rows the deliveries point to), and foreign keys hold.
func TestPrune_WebhookDeliveriesUntouched(t *testing.T) {
	t.Parallel()
	runPrune(t, func(f *pruneFixture) {
		t, s := f.t, f.s
		mustAccept(t, s, acceptParams("first", "p"))
		if count(t, s, `SELECT COUNT(*) FROM accounts WHERE name = 'default'`) != 1 {
			t.Skip("no default account row")
		}
		mustExec(t, s, `UPDATE accounts SET webhook_url = 'https://example.com/hook', webhook_secret = 'whsec_AAAA', webhook_since = $1 WHERE name = 'default'`, tsArg(s, f.clock.Now().Add(-time.Hour)))
		c := claimOne(t, s, f.lane)
		if err := s.CompleteIfRunning(t.Context(), completeParams(c)); err != nil {
			t.Fatal(err)
		}
		f.finished("second", false)
		f.clock.Advance(time.Hour)
		before := dumpOf(t, s.DB(), "webhook_deliveries")
		if len(before["webhook_deliveries"]) != 2 {
			t.Fatalf("deliveries before prune: %v; want 2", before)
		}
		if rep := mustPrune(t, s, f.clock.Now(), store.PruneOptions{}); rep.Pruned != 2 {
			t.Fatalf("pruned %+v", rep)
		}
		assertSameDump(t, before, dumpOf(t, s.DB(), "webhook_deliveries"))
		assertIntact(t, s)
	})
}

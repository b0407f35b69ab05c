package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_ViewsSafeToRetryOnlyIfNoAttemptMayHaveBilled (fixed by
// migration 0020): a job whose attempt 1 timed out (the call reached the
// provider, which may have billed it), retried by hand, whose attempt 2
// then failed provider_error with automatic retry off, was shown by
// job_board (and the overview's failed row) as "safe to retry: … a retry
// cannot bill twice". That is false: attempt 1 may have been billed, so a
// retry that succeeds with a provider that ignores keys bills a second
// time. The store itself knows it: the job keeps its budget reservation
// (NotBilled is asked of every attempt), and failed_job_action's own
// cancelled branch looks at every attempt. Right behaviour: "safe to
// retry … cannot bill twice" only when every attempt of the job failed
// with a class that bills nothing (not_sent, rate_limited, provider_error,
// rejected); otherwise the may-have-billed words (as for timeout).
func TestStore_ViewsSafeToRetryOnlyIfNoAttemptMayHaveBilled(t *testing.T) {
	t.Parallel()
	runOverview(t, func(f *ovFixture) {
		f.lane("local")
		j := f.accept("billed-then-5xx")
		c := f.claim("local")
		f.fail(c, inkwell.ClassTimeout, "provider: provider call: timeout: context deadline exceeded")
		mustRetry(f.t, f.s, j.ID)
		c = f.claim("local")
		f.fail(c, inkwell.ClassProviderError, "provider: provider call: server error: HTTP 500: oops")

		b := f.board()[j.ID]
		if strings.Contains(b.NextAction, "cannot bill twice") || strings.HasPrefix(b.NextAction, "safe to retry") {
			f.t.Errorf("job_board says of job %d, whose attempt 1 timed out (may have been billed):\n  %q\nwant the may-have-billed advice (check the provider's usage first), not 'a retry cannot bill twice'",
				j.ID, b.NextAction)
		}
		o := f.overview()["failed"]
		if strings.HasPrefix(o.NextAction, "safe to retry") {
			f.t.Errorf("job_overview failed row leads with %q for a job whose earlier attempt may have been billed", o.NextAction)
		}
	})
}

// TestStore_ViewsLegacyGatewayErrorsClassedTimeout (fixed in migration
// 0005's classes): a database from before failure classes (schema 4)
// holding a job failed by a gateway's 502 ("provider call: server error:
// HTTP 502") was classified by migration 0005 as provider_error, so the
// views said "safe to retry: … a retry cannot bill twice". Inkwell's own
// classifier (internal/provider/callerror.go gatewayGaveUp) classes a
// 502/504 as timeout: the provider may have answered, and billed, behind
// the gateway. Right behaviour: the migration classifies a stored 502/504
// as timeout too (or a later migration reclassifies it), so the views say
// "check the provider's usage first".
func TestStore_ViewsLegacyGatewayErrorsClassedTimeout(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		dsn, old := openAtVersion(t, b, 4)
		const at = `'2026-11-30T00:00:00.000000Z'`
		for i, text := range []string{
			"provider: provider call: server error: HTTP 502: bad gateway",
			"provider: provider call: server error: HTTP 504: gateway timeout",
		} {
			id := i + 1
			mustExecAll(t, old.DB(),
				fmt.Sprintf(`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, error, lane, created_at, started_at, finished_at)
					VALUES (%d, 'k%d', 'h', '{"prompt":"p"}', 'failed', %s, 'local', %s, %s, %s)`, id, id, quote(text), at, at, at),
				fmt.Sprintf(`INSERT INTO job_attempts (job_id, attempt_number, status, error, lane, started_at, finished_at)
					VALUES (%d, 1, 'failed', %s, 'local', %s, %s)`, id, quote(text), at, at))
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		st := storetest.MustOpen(t, dsn, store.Options{})
		f := &ovFixture{t: t, ctx: t.Context(), s: st}
		board := f.board()
		for id := int64(1); id <= 2; id++ {
			d := mustShow(t, st, id)
			if d.Job.ErrorClass != inkwell.ClassTimeout {
				t.Errorf("job %d (%q) classed %q by the migration; Inkwell classes a gateway 502/504 %q (the provider may have billed behind it)",
					id, d.Job.Error, d.Job.ErrorClass, inkwell.ClassTimeout)
			}
			if a := board[id].NextAction; strings.Contains(a, "cannot bill twice") {
				t.Errorf("job_board says of job %d (%q): %q; a gateway 502/504 may have been billed", id, d.Job.Error, a)
			}
		}
	})
}

// TestStore_ViewsDeadLaneWithAnswersWaitingMayBeRestarted (PostgreSQL;
// fixed by migration 0020): a lane whose last heartbeat reported a
// provider answer it could not store, and whose process then died (its
// advisory lock is free: lane_lock_held is false, and the same view says
// "lane east is dead (its lock is free): restart it"), was still told "do
// not restart lane east, a restart loses those answers". The answers died
// with the process; the only way forward is a restart (or a live lane's
// rescue). The view contradicted itself and its first words forbade the
// one safe action. Right behaviour: the answers-waiting words only for a
// lane whose holder may still hold them: not stopped and, on PostgreSQL,
// lane_lock_held(lane) (on SQLite, which cannot see the flock, at least
// not once `inkwell status` has found the process gone).
func TestStore_ViewsDeadLaneWithAnswersWaitingMayBeRestarted(t *testing.T) {
	t.Parallel()
	runOverview(t, func(f *ovFixture) {
		if f.s.Dialect() != "postgres" {
			f.t.Skip("SQLite's views cannot see a flock: they cannot tell a dead lane from a stopped one")
		}
		l := f.lane("east")
		f.accept("dead-lane-answers")
		c := f.claim("east")
		f.setAnswersWaiting("east", 1)
		if _, err := f.s.WriteDB().ExecContext(f.ctx, `UPDATE lanes SET heartbeat_at = `+f.dbTime(-time.Hour)); err != nil {
			f.t.Fatal(err)
		}
		if err := l.Release(); err != nil { // the process is gone: its lock session ended
			f.t.Fatal(err)
		}
		run := f.overview()["running"].NextAction
		board := f.board()[c.Job.ID].NextAction
		for what, got := range map[string]string{"job_overview running": run, "job_board": board} {
			if !strings.Contains(got, "is dead (its lock is free)") {
				f.t.Fatalf("%s = %q; the test expects the lane to be seen dead", what, got)
			}
			if strings.Contains(got, "do not restart lane east") {
				f.t.Errorf("%s tells the operator not to restart a lane whose lock is free (its process is gone, and its answers with it):\n  %q", what, got)
			}
		}
	})
}

// TestStore_ViewsPoisonJobSeenPastAHeldBackAttempt (fixed by migration
// 0020): a job twice killed the worker that ran it (attempts 1 and 3 ended
// worker_restarted), and between the two deaths its lane gave one claim
// back unsent (attempt 2, held_back: the provider's limiter would have held
// the call; no call was made, and automatic retry counts it as no attempt
// at all). job_board and job_overview looked only at the last two attempt
// numbers, saw held-back + worker_restarted, and said "inspect the error,
// then inkwell retry", not "possible poison job". Right behaviour: a
// held-back attempt (never sent) is skipped when the views look for the
// last two attempts, as AutoRetryCounts skips it.
func TestStore_ViewsPoisonJobSeenPastAHeldBackAttempt(t *testing.T) {
	t.Parallel()
	runOverview(t, func(f *ovFixture) {
		f.lane("local")
		j := f.accept("poison")
		die := func() {
			f.t.Helper()
			if c := storetest.ClaimAs(f.t, f.s, "doomed"); c == nil || c.Job.ID != j.ID {
				f.t.Fatalf("claim on lane doomed: %+v", c)
			}
			l, err := f.s.LockLane(f.ctx, "doomed")
			if err != nil {
				f.t.Fatal(err)
			}
			defer l.Release()
			if _, err := f.s.Recover(f.ctx, l, false); err != nil {
				f.t.Fatal(err)
			}
		}
		die()
		mustRetry(f.t, f.s, j.ID)
		c := f.claim("local")
		past := time.Now().Add(-time.Minute)
		if err := f.s.FailIfRunning(f.ctx, store.FailParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Class: inkwell.ClassRateLimited,
			Error: "not sent: provider sim's limits would hold the call", RetryAt: &past, HeldBack: true}); err != nil {
			f.t.Fatal(err)
		}
		die()
		d := mustShow(f.t, f.s, j.ID)
		var classes []string
		for _, a := range d.Attempts {
			classes = append(classes, string(a.ErrorClass))
		}
		if d.Job.Status != inkwell.StatusFailed || len(d.Attempts) != 3 {
			f.t.Fatalf("job %s with attempts %v; want failed with 3 attempts", d.Job.Status, classes)
		}
		b := f.board()[j.ID]
		if !strings.HasPrefix(b.NextAction, "possible poison job") {
			f.t.Errorf("job %d, attempts %v (the middle one held back, never sent): job_board says %q; want 'possible poison job' (two worker deaths while running it)",
				j.ID, classes, b.NextAction)
		}
		if o := f.overview()["failed"].NextAction; !strings.Contains(o, "possible poison job") {
			f.t.Errorf("job_overview failed row %q does not count the possible poison job", o)
		}
	})
}
